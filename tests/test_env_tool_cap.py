"""The tool-call cap in both presets: the default counts calls (per task, or per turn) and asks once for the
answer; the official preset counts rounds and uses the placeholder answer."""

from __future__ import annotations

from tests.support.env_tools import (
    hermes,
    make_task,
)
from tests.support.scripted_env import make_env, roles
from vtb_env.config import CAP_PLACEHOLDER_ANSWER, EnvConfig


def test_default_cap_counts_calls_then_asks_once_for_the_answer():
    env = make_env(tasks=[make_task("a")], config=EnvConfig.preset("default", max_tool_calls=3))
    env.reset(seed=0)
    two_calls = hermes("calculator", expression="1") + hermes("calculator", expression="2")
    obs, *_, info = env.step(two_calls)
    assert obs["tools"] and info["tools_available"]
    obs, reward, terminated, truncated, info = env.step(two_calls)
    calls = info["record"].tool_calls
    assert [c.error_kind for c in calls] == [None, None, None, "over_cap"] and "limit of 3" in calls[3].error
    assert obs["tools"] == [] and not info["tools_available"] and not truncated
    assert "reached the limit of 3 tool calls" in obs["messages"][-1]["content"] and roles(obs)[-1] == "user"
    assert info["record"].turns[0].hit_tool_cap

    obs, reward, terminated, truncated, info = env.step(hermes("calculator", expression="3"))
    assert truncated and not terminated and "reward_components" in info
    assert info["record"].tool_calls[-1].error_kind == "tools_withdrawn" and info["record"].turns[0].truncated


def test_default_cap_answer_after_withdrawal_continues():
    env = make_env(config=EnvConfig.preset("default", max_tool_calls=1, cap_scope="turn"))
    env.reset(seed=0)
    env.step(hermes("calculator", expression="1"))
    obs, reward, terminated, truncated, info = env.step("It is 10.")
    assert not truncated and info["turn"] == 1 and obs["tools"]  # a fresh budget for turn 2 (cap per turn)


def test_default_cap_is_per_task():
    env = make_env(config=EnvConfig.preset("default", max_tool_calls=1))
    env.reset(seed=0)
    env.step(hermes("calculator", expression="1"))
    obs, reward, terminated, truncated, info = env.step("It is 10.")
    assert not truncated and info["turn"] == 1 and obs["tools"] == []  # the task's budget is spent: turn 2 has no tools


def test_official_cap_counts_rounds_and_uses_the_placeholder():
    env = make_env(config=EnvConfig.preset("official", max_tool_calls=2))
    env.reset(seed=0)
    three_calls = "".join(hermes("calculator", expression=str(i)) for i in range(3))
    obs, *_, info = env.step(three_calls)
    assert info["tool_calls_in_turn"] == 3 and info["turn"] == 0  # rounds, not calls
    obs, reward, terminated, truncated, info = env.step(three_calls)
    assert info["turn"] == 1 and not truncated and all(c.ok for c in info["record"].tool_calls)
    assert info["record"].final_answers[0] == CAP_PLACEHOLDER_ANSWER
    assert roles(obs)[-3:] == ["user", "assistant", "user"] and obs["messages"][-2]["content"] == "Golden 10"
    env.step(three_calls)
    obs, reward, terminated, truncated, info = env.step(three_calls)
    assert (
        truncated
        and not terminated
        and info["record"].final_answers == [CAP_PLACEHOLDER_ANSWER, CAP_PLACEHOLDER_ANSWER]
    )
    assert obs["messages"][-1]["content"] == "Golden 20"
