"""Records of any accepted action serialise (issue 22, item 3): tool arguments nested 600, 5,000 and
100,000 levels deep, through the env, a completion read for a reward (TRL, verl) and ``vtb eval``.
Before, a 600-level argument stepped fine but ``record.to_dict()`` raised RecursionError."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from tests.support.chat_server import ChatServer
from tests.support.cli import eval_args
from tests.support.env_tools import exact_reward, make_task, small_tools
from tests.support.menu_tasks import write_menu_tasks
from vtb_app.cli import main
from vtb_app.evaluation.records import latest_records
from vtb_env.completion import record_from_completion
from vtb_env.env import VisualToolBenchEnv
from vtb_env.trajectory import MAX_ARGUMENT_DEPTH, EpisodeRecord, nesting_depth

DEPTHS = (600, 5_000, 100_000)


def nested_json(depth: int) -> str:
    return "[" * depth + "]" * depth


def nested_object(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def serialises(record: EpisodeRecord) -> None:
    """Every way a record leaves the process: to_dict, JSON (eval records, GRPO logs), pickle (Ray), copies."""
    data = record.to_dict()
    assert EpisodeRecord.from_dict(json.loads(json.dumps(data))).to_dict() == data
    pickle.loads(pickle.dumps(record))
    copy.deepcopy(record)


def step_once(action) -> EpisodeRecord:
    env = VisualToolBenchEnv(tasks=[make_task("a")], tools=small_tools(), reward=exact_reward())
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    assert not terminated and "error" in obs["messages"][-1]["content"]  # an error tool message; the episode goes on
    env.step("The answer is 10.")
    return info["record"]


@pytest.mark.parametrize("depth", DEPTHS)
def test_env_records_of_deep_text_arguments_serialise(depth):
    action = '<tool_call>{"name": "calculator", "arguments": {"expression": ' + nested_json(depth) + "}}</tool_call>"
    record = step_once(action)
    call = record.tool_calls[0]
    assert isinstance(call.arguments, str) and not call.ok  # the policy's text, not a structure
    serialises(record)


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("form", ["object", "json-string"])
def test_env_records_of_deep_message_arguments_serialise(depth, form):
    arguments = {"expression": nested_object(depth)} if form == "object" else nested_json(depth)
    action = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "calculator", "arguments": arguments}}],
    }
    serialises(step_once(action))


def test_the_bound_is_the_deepest_argument_kept_as_a_structure():
    shallow = '{"expression": "1+1", "x": ' + nested_json(MAX_ARGUMENT_DEPTH - 1) + "}"
    deep = '{"expression": "1+1", "x": ' + nested_json(MAX_ARGUMENT_DEPTH) + "}"
    kept = step_once(f'<tool_call>{{"name": "calculator", "arguments": {shallow}}}</tool_call>').tool_calls[0]
    assert isinstance(kept.arguments, dict) and nesting_depth(kept.arguments, 100) == MAX_ARGUMENT_DEPTH
    cut = step_once(f'<tool_call>{{"name": "calculator", "arguments": {deep}}}</tool_call>').tool_calls[0]
    assert cut.arguments.startswith("<tool_call>") or cut.arguments.startswith("{")
    assert cut.error == f"arguments of calculator are nested deeper than {MAX_ARGUMENT_DEPTH} levels"
    assert cut.error_kind == "invalid_call"


def test_nesting_depth_needs_no_recursion_and_survives_cycles():
    assert nesting_depth(nested_object(100_000), 64) == 65 and nesting_depth({"a": 1}, 64) == 1
    cyclic: dict = {}
    cyclic["self"] = cyclic
    assert nesting_depth(cyclic, 64) == 65 and nesting_depth("text", 64) == 0


@pytest.mark.parametrize("depth", DEPTHS)
def test_completions_read_for_rewards_serialise(depth):
    text = '<tool_call>{"name": "calculator", "arguments": {"expression": ' + nested_json(depth) + "}}</tool_call>"
    messages = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "function": {"name": "calculator", "arguments": {"x": nested_object(depth)}}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "{}"},
        {"role": "assistant", "content": "The answer is 10."},
    ]
    serialises(record_from_completion("a", text))
    serialises(record_from_completion("a", messages))


@pytest.mark.parametrize("depth", DEPTHS)
def test_trl_tool_calls_of_any_depth_step_and_serialise(depth):
    """TRL's environment_factory hands the env the arguments TRL parsed (GRPO training)."""
    from vtb_app.integrations.trl import VTBEnvironment

    env = VisualToolBenchEnv(tasks=[make_task("a")], tools=small_tools(), reward=exact_reward())
    rollout = VTBEnvironment(env, show_images=False)
    rollout.reset("a")
    reply = rollout._call_tool("calculator", {"expression": nested_object(depth)})
    assert '"error"' in reply
    serialises(env._episode.record)


def test_vtb_eval_writes_ok_records_at_every_depth(tmp_path, capsys):
    data = write_menu_tasks(tmp_path / "data", n=3)
    depth_of_task: dict[str, int] = {}

    def deep_then_answer(request: dict) -> dict:
        prompt = json.dumps(request["messages"][:2])
        depth = depth_of_task.setdefault(prompt, DEPTHS[len(depth_of_task) % len(DEPTHS)])
        if not any(m["role"] == "tool" for m in request["messages"]):
            arguments = '{"expression": ' + nested_json(depth) + "}"
            return {
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": arguments}}
                ]
            }
        return {"content": "The answer is 13."}

    with ChatServer(deep_then_answer) as server:
        assert main(eval_args(data, f"openai:m@{server.base_url}", tmp_path / "run", "--concurrency", "1")) == 0
    records = latest_records(tmp_path / "run" / "records.jsonl")
    assert len(records) == 3 and sorted(depth_of_task.values()) == sorted(DEPTHS)
    assert all(
        r["status"] == "ok" and r["tool_use"] == {"calls": 1, "failed_calls": 1, "used_tools": True}
        for r in records.values()
    )
