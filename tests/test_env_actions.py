"""How the environment reads actions: every action format drives a call; malformed, failing, strange and
unserializable actions become error tool messages, never exceptions; 5000 calls take one quick step."""

from __future__ import annotations

import json
import time

import pytest

from tests.support.env_tools import (
    hermes,
    unserializable_actions,
)
from tests.support.scripted_env import make_env, roles


def test_every_action_format_drives_a_call():
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "abc", "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "2"}'}}
        ],
    }
    actions = [
        hermes("calculator", expression="2"),
        '<|python_tag|>{"name": "calculator", "parameters": {"expression": "2"}}',
        '{"name": "calculator", "parameters": {"expression": "2"}}',
        '[calculator(expression="2")]',
        '<function=calculator>{"expression": "2"}</function>',
        message,
    ]
    for action in actions:
        env = make_env()
        env.reset(seed=0)
        obs, *_, info = env.step(action)
        assert json.loads(obs["messages"][-1]["content"]) == {"result": "2"}, action
        assert info["parse_errors"] == []
    assert obs["messages"][-1]["tool_call_id"] == "abc"  # the policy's own call id is kept


@pytest.mark.parametrize(
    ("action", "kind", "fragment"),
    [
        ("<tool_call>{bad json</tool_call>", "parse_error", "not valid JSON"),
        (hermes("crop_tool", code="x"), "invalid_call", "unknown tool 'crop_tool'"),
        (hermes("calculator"), "invalid_call", "'expression' is a required property"),
        (hermes("calculator", expression=7), "invalid_call", "7 is not of type 'string'"),
        (hermes("python_image_processing", code="x" * 5001), "invalid_call", "5001 characters, must be at most 5000"),
        (hermes("calculator", expression="fail"), "tool_error", "cannot evaluate"),
        ({"foo": "bar"}, "parse_error", "an assistant message needs 'content' and/or 'tool_calls'"),
        (
            {"role": "assistant", "content": [{"type": "text", "text": None}]},
            "parse_error",
            "'text' must be a string, got NoneType",
        ),
    ],
)
def test_malformed_and_failing_calls_become_error_tool_messages(action, kind, fragment):
    env = make_env()
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    assert not terminated and not truncated and roles(obs)[-1] == "tool"
    assert fragment in json.loads(obs["messages"][-1]["content"])["error"]
    call = info["record"].tool_calls[0]
    assert call.error_kind == kind and fragment in call.error
    assert info["tool_calls_in_turn"] == 1  # malformed calls count
    assert (kind == "parse_error") == bool(info["parse_errors"])
    obs, *_ = env.step("It is 10.")  # the episode goes on
    assert info["turn"] == 0 and env._episode.turn_index == 1


def test_env_never_raises_on_strange_actions():
    env = make_env()
    env.reset(seed=0)
    for action in [
        None,
        3.5,
        {"role": "assistant", "tool_calls": "nope"},
        {"role": "assistant", "tool_calls": [None]},
        "[calc(",
        "<tool_call>",
        "<|python_tag|>",
    ]:
        obs, reward, terminated, truncated, info = env.step(action)
        assert obs in env.observation_space and not terminated


@pytest.mark.parametrize(("action", "reason"), unserializable_actions(), ids=["tuple_key", "deep", "cyclic"])
def test_unserializable_dict_action_is_a_parse_error_not_an_exception(action, reason):
    env = make_env()
    env.reset(seed=1)
    obs, reward, terminated, truncated, info = env.step(action)
    assert not terminated and not truncated and roles(obs)[-1] == "tool"
    error = json.loads(obs["messages"][-1]["content"])["error"]
    assert error.startswith("the action is not a JSON-serializable assistant message") and reason in error
    assert info["parse_errors"] == [error] and info["record"].tool_calls[0].error_kind == "parse_error"
    assert len(info["record"].turns[0].steps[0].action_text) < 1000  # a bounded repr, not the whole structure
    _, _, terminated, *_ = env.step("It is 10.")  # the episode goes on
    assert env._episode.turn_index == 1


def test_5000_pythonic_calls_take_one_quick_step():
    env = make_env()
    env.reset(seed=0)
    start = time.perf_counter()
    obs, _, terminated, truncated, info = env.step(
        "[" + ", ".join(f'calculator(expression="{i}")' for i in range(5000)) + "]"
    )
    elapsed = time.perf_counter() - start
    assert elapsed < 2.0, f"{elapsed:.1f} s (was 104 s)"
    kinds = [call.error_kind for call in info["record"].tool_calls]
    assert kinds == [None] * 20 + ["over_cap"] * 80 + ["parse_error"] and not terminated and not truncated
    assert "4900 more tool calls were not read" in obs["messages"][-2]["content"]
