"""``EnvConfig(answer_format="slot")`` through the real env and its default reward: the system prompt asks
for the slot, the exact checks read only it, and a slot holding a second value fails."""

from __future__ import annotations

import pytest

from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv
from vtb_env.loaders import load_tasks
from vtb_env.prompts import SLOT_INSTRUCTION


@pytest.fixture(scope="module")
def task():
    """A single-turn demo task whose critical rubric is a number check, and that number."""
    for candidate in load_tasks("demo"):
        (turn, *rest) = candidate.turns
        critical = [r for r in turn.rubrics if r.critical and r.check and r.check["type"] == "number"]
        if not rest and len(critical) == 1 and candidate.mode_label == "tool_redundant":
            return candidate, critical[0].check["value"]
    raise AssertionError("the demo set has no single-turn task with one critical number check")


def _play(task, answer: str, answer_format: str) -> dict:
    env = VisualToolBenchEnv(tasks=[task], config=EnvConfig(answer_format=answer_format))
    try:
        observation, _ = env.reset(options={"task_id": task.id})
        if answer_format == "slot":
            assert SLOT_INSTRUCTION in observation["messages"][0]["content"]
        _, reward, terminated, _, info = env.step(answer)
        assert terminated
        return {"reward": reward, **info["reward_components"]}
    finally:
        env.close()


def test_slot_mode_reads_the_slot_and_refuses_a_second_value(task):
    task, value = task
    golden = task.turns[0].golden_answer
    assert _play(task, golden, "free")["passed"] == 1.0
    assert _play(task, golden, "slot")["passed"] == 0.0  # no slot: nothing to read
    assert _play(task, f"{golden}\nAnswer: {value:g}", "slot")["passed"] == 1.0
    assert _play(task, f"{golden}\nAnswer: {value:g} or {value + 1:g}", "slot")["passed"] == 0.0
    assert _play(task, f"Working: 987654.\nAnswer: {value:g}", "slot")["passed"] == 1.0  # only the slot is read


def test_an_unknown_answer_format_is_refused():
    with pytest.raises(ValueError, match="answer_format"):
        EnvConfig(answer_format="boxed")
