"""A step's tool work is bounded: a per-round call cap and a per-round wall-clock budget (issue 11, item 11)."""

from __future__ import annotations

import json
import time

import pytest

from tests.support.env_tools import exact_reward, hermes, make_task, small_tools
from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv


def make_env(**overrides) -> VisualToolBenchEnv:
    config = EnvConfig.preset(overrides.pop("preset", "official"), **overrides)
    return VisualToolBenchEnv(tasks=[make_task("a")], tools=small_tools(), reward=exact_reward(), config=config)


def test_official_preset_runs_at_most_the_round_cap_and_answers_the_rest():
    env = make_env()  # counts rounds, so 100 calls in one action were all run before
    env.reset(seed=0)
    action = "".join(hermes("calculator", expression=str(i)) for i in range(100))
    observation, *_, info = env.step(action)
    calls = info["record"].tool_calls
    assert len(calls) == 100 and [c.ok for c in calls[:20]] == [True] * 20
    assert {c.error_kind for c in calls[20:]} == {"over_round_cap"}
    assert json.loads(observation["messages"][-1]["content"]) == {
        "error": "not executed: at most 20 tool calls run per round"
    }
    observation, *_, info = env.step(hermes("calculator", expression="2"))  # the next round runs normally
    assert info["record"].tool_calls[-1].ok


def test_round_time_budget_cuts_off_calls_not_yet_started():
    env = make_env(round_time_budget_s=0.5)
    env.reset(seed=0)
    start = time.monotonic()
    observation, *_, info = env.step("".join(hermes("web_search", query="sleep 0.3") for _ in range(6)))
    elapsed = time.monotonic() - start
    calls = info["record"].tool_calls
    ran = [c for c in calls if c.error_kind != "round_time_budget"]
    assert len(ran) == 2 and all(c.ok for c in ran)  # 0.3 s each: the third would start after 0.5 s
    assert [c.error for c in calls[2:]] == ["not executed: this round's tool time budget of 0.5 s was spent"] * 4
    assert elapsed < 0.3 * 6  # the cut-off calls never ran
    tool_messages = [m for m in observation["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 6 and "budget" in tool_messages[-1]["content"]
    *_, info = env.step(hermes("web_search", query="sleep 0.1"))  # a fresh budget for the next round
    assert info["record"].tool_calls[-1].ok


def test_budgets_are_configurable_and_checked():
    env = make_env(preset="default", max_calls_per_round=2, round_time_budget_s=None)
    env.reset(seed=0)
    *_, info = env.step("".join(hermes("calculator", expression=str(i)) for i in range(3)))
    assert [c.error_kind for c in info["record"].tool_calls] == [None, None, "over_round_cap"]
    for bad in ({"max_calls_per_round": 0}, {"round_time_budget_s": 0}):
        with pytest.raises(ValueError, match="invalid EnvConfig"):
            EnvConfig.preset("default", **bad)
    assert EnvConfig.preset("official").max_calls_per_round == EnvConfig.preset("default").max_calls_per_round == 20
