"""The environment's episode semantics: a scripted two-turn episode, history modes, seeding, prompts and
configuration errors, reward failures, truncation, closed episodes, the default reward, gymnasium.make and HTML
rendering, no answer facts in info or records."""

from __future__ import annotations

import json

import gymnasium
import pytest

import vtb_env  # noqa: F401  (registers VisualToolBench-v0)
from tests.support.env_tools import (
    exact_reward,
    hermes,
    make_task,
    small_tools,
)
from tests.support.scripted_env import make_env, roles
from vtb_env.config import EnvConfig
from vtb_env.env import EpisodeOverError, VisualToolBenchEnv
from vtb_env.loaders import load_tasks
from vtb_env.prompts import STRONG_SYSTEM_PROMPT, WEAK_SYSTEM_PROMPT
from vtb_env.tasks import Task, Turn


def test_scripted_two_turn_episode_produces_the_expected_trajectory():
    env = make_env(render_mode="ansi")
    obs, info = env.reset(seed=0)
    assert roles(obs) == ["system", "user"] and obs["messages"][0]["content"] == STRONG_SYSTEM_PROMPT
    assert obs["image_names"] == ["image_1.png"] and [t["function"]["name"] for t in obs["tools"]] == [
        "python_image_processing",
        "calculator",
        "web_search",
    ]
    assert info["task"]["id"] == "a" and "golden_answer" not in json.dumps(info["task"])
    assert obs in env.observation_space

    # Turn 1, round 1: two parallel calls; the vision call saves two images.
    obs, reward, terminated, truncated, info = env.step(
        "<think>zoom first</think>"
        + hermes("python_image_processing", code="save; save")
        + hermes("calculator", expression="13+3")
    )
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert roles(obs) == ["system", "user", "assistant", "tool", "tool", "user"]
    assistant = obs["messages"][2]
    assert [call["id"] for call in assistant["tool_calls"]] == ["call_1", "call_2"]
    assert [m["tool_call_id"] for m in obs["messages"][3:5]] == ["call_1", "call_2"]
    assert json.loads(obs["messages"][3]["content"]) == {
        "saved": ["transformed_image_0.png", "transformed_image_1.png"],
        "visible": ["image_1.png"],
    }
    assert obs["image_names"] == ["image_1.png", "transformed_image_0.png", "transformed_image_1.png"]
    assert [p["text"] for p in obs["messages"][5]["content"] if p["type"] == "text"][1:] == [
        "[transformed_image_0.png]",
        "[transformed_image_1.png]",
    ]
    assert obs in env.observation_space

    # Final answer of turn 1 (reasoning removed); turn 2 arrives with image_2.png.
    obs, reward, terminated, truncated, info = env.step("<think>16?</think>It is 10.")
    assert (reward, terminated, truncated, info["turn"]) == (0.0, False, False, 1)
    assert roles(obs)[-2:] == ["assistant", "user"] and obs["messages"][-2]["content"] == "It is 10."
    assert obs["image_names"] == ["image_1.png", "transformed_image_0.png", "transformed_image_1.png", "image_2.png"]

    # Turn 2: a pythonic call (the vision tool now sees every image so far), then the answer.
    obs, *_ = env.step('[python_image_processing(code="save")]')
    assert json.loads(obs["messages"][-2]["content"])["visible"] == [
        "image_1.png",
        "transformed_image_0.png",
        "transformed_image_1.png",
        "image_2.png",
    ]
    assert obs["image_names"][-1] == "transformed_image_2.png"
    obs, reward, terminated, truncated, info = env.step("The answer is 20.")
    assert (terminated, truncated, reward) == (True, False, 1.0)
    assert (
        info["reward_components"]["rubric_score"] == 1.0
        and info["reward_components"]["tool_success"] == 1.0
        and obs["tools"] == []
    )

    record = info["record"]
    assert record.final_answers == ["It is 10.", "The answer is 20."]
    assert [[c.name for c in turn.tool_calls] for turn in record.turns] == [
        ["python_image_processing", "calculator"],
        ["python_image_processing"],
    ]
    assert record.turns[0].steps[0].reasoning == "zoom first" and record.turns[0].steps[0].parser == "hermes"
    assert record.turns[1].steps[0].parser == "pythonic"
    assert [image["name"] for image in record.tool_calls[0].images] == [
        "transformed_image_0.png",
        "transformed_image_1.png",
    ]
    assert [image["name"] for image in record.metadata["images"]] == ["image_1.png", "image_2.png"]
    assert all(len(image["sha256"]) == 64 for call in record.tool_calls for image in call.images)
    assert all(step.env_overhead_s > 0 for turn in record.turns for step in turn.steps)
    assert "== tool (call_1)" in env.render()


def test_history_model_keeps_the_exchange_and_golden_replaces_it():
    actions = [hermes("python_image_processing", code="save"), "It is 10."]
    for history, expected in [
        ("model", ["system", "user", "assistant", "tool", "user", "assistant", "user"]),
        ("golden", ["system", "user", "assistant", "user"]),
    ]:
        env = make_env(config=EnvConfig.preset("default", history=history))
        env.reset(seed=0)
        for action in actions:
            obs, *_ = env.step(action)
        assert roles(obs) == expected
        answer = obs["messages"][-2]["content"]
        assert answer == ("It is 10." if history == "model" else "Golden 10")
        # Earlier turns' task images stay; the tool images vanish with the golden history.
        assert obs["image_names"] == (
            ["image_1.png", "transformed_image_0.png", "image_2.png"]
            if history == "model"
            else ["image_1.png", "image_2.png"]
        )
        obs, *_ = env.step(hermes("python_image_processing", code="save"))
        assert obs["image_names"][-1] == "transformed_image_1.png"  # indices are per episode


def test_seeding_is_reproducible():
    tasks = [make_task(f"t{i}") for i in range(8)]
    env = make_env(tasks=tasks)
    first = [env.reset(seed=s)[1]["task"]["id"] for s in range(6)]
    again = [env.reset(seed=s)[1]["task"]["id"] for s in range(6)]
    assert first == again and len(set(first)) > 1
    env.reset(seed=7)
    unseeded = [env.reset()[1]["task"]["id"] for _ in range(5)]
    env.reset(seed=7)
    assert unseeded == [env.reset()[1]["task"]["id"] for _ in range(5)]
    assert env.reset(options={"task_id": "t5"})[1]["task"]["id"] == "t5"
    assert env.reset(options={"index": 2})[1]["task"]["id"] == "t2"
    with pytest.raises(KeyError):
        env.reset(options={"task_id": "nope"})


def test_prompts_tool_sets_and_configuration_errors():
    weak = make_env(config=EnvConfig.preset("default", system_prompt="weak"))
    assert weak.reset(seed=0)[0]["messages"][0]["content"] == WEAK_SYSTEM_PROMPT
    assert roles(make_env(config=EnvConfig(system_prompt=None)).reset(seed=0)[0]) == ["user"]
    no_vision = make_env(config=EnvConfig(tool_set="no_vision")).reset(seed=0)[0]["tools"]
    assert [t["function"]["name"] for t in no_vision] == ["calculator", "web_search"]
    env = make_env(config=EnvConfig(tool_set="none"))
    obs, _ = env.reset(seed=0)
    assert obs["tools"] == []
    obs, *_ = env.step(hermes("calculator", expression="1"))
    assert "available tools: none" in obs["messages"][-1]["content"]
    assert EnvConfig.preset("official").differences(EnvConfig.preset("default")) == {
        "preset_name": ("official", "default"),
        "cap_unit": ("rounds", "calls"),
        "cap_scope": ("turn", "task"),
        "at_cap": ("placeholder", "ask_final"),
        "history": ("golden", "model"),
        "image_encoding": ("jpeg", "original"),
    }
    with pytest.raises(ValueError, match="history"):
        EnvConfig(history="oracle")
    with pytest.raises(ValueError, match="unknown preset"):
        EnvConfig.preset("fast")
    with pytest.raises(RuntimeError, match="reset"):
        make_env().step("hi")


def test_reward_failure_is_reported_not_raised():
    def broken(task, record):
        raise ConnectionError("judge down")

    env = VisualToolBenchEnv(tasks=[make_task("a")], tools=small_tools(), reward=broken)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("10")
    assert terminated and reward == 0.0 and "judge down" in info["reward_error"]


def test_truncate_ends_the_episode_and_scores_it_through_the_env_reward():
    env = make_env()
    env.reset(seed=0)
    env.step("It is 10.")  # turn 1 answered; turn 2 never is
    obs, reward, terminated, truncated, info = env.truncate("token budget")
    assert (terminated, truncated) == (False, True) and obs["tools"] == []
    components = info["reward_components"]
    assert (components["rubric_score"], components["passed"], components["format"]) == (0.5, 0.0, 0.0)
    assert reward == pytest.approx((1.0 * 0.5 + 1.0 * 0.0 + 0.1 * 0.0) / 2.1)
    record = info["record"]
    assert record.turns[-1].truncated and record.metadata["truncation"] == "token budget"
    with pytest.raises(EpisodeOverError, match=r"call reset\(\)"):
        env.truncate("again")

    def broken(task, record):
        raise ConnectionError("judge down")

    env = VisualToolBenchEnv(tasks=[make_task("a")], tools=small_tools(), reward=broken)
    env.reset(seed=0)
    _, reward, _, truncated, info = env.truncate("stop")
    assert truncated and reward == 0.0 and "judge down" in info["reward_error"] and "reward_components" not in info


def test_a_finished_episode_is_closed_until_reset():
    """After the end, step() neither pays again nor runs or records a tool call; reset() opens the next one."""
    env = make_env(tasks=[make_task("a")])
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("It is 10.")
    assert terminated and reward > 0 and env.episode_over
    record = info["record"]
    for action in ("It is 10.", hermes("python_image_processing", code="save")):
        with pytest.raises(EpisodeOverError, match=r"call reset\(\)"):
            env.step(action)
    assert len(record.turns[0].steps) == 1 and record.tool_calls == []
    env.reset(seed=0)
    assert not env.episode_over and env.step("It is 10.")[1] == reward


def test_default_reward_pools_the_turns_and_reports_its_components():
    env = make_env()
    env.reset(seed=0)
    env.step("It is 10.")
    _, reward, _, _, info = env.step("It is 99.")
    components = info["reward_components"]
    assert (components["rubric_score"], components["passed"], components["format"]) == (0.5, 0.0, 1.0)
    # format is process credit: earned in proportion to the rubric score
    assert "tool_success" not in components and reward == pytest.approx((1.0 * 0.5 + 1.0 * 0.0 + 0.5 * 0.1 * 1.0) / 2.1)
    plain = Task(id="p", turns=(Turn(prompt="hi"),))
    env = VisualToolBenchEnv(tasks=[plain], tools=small_tools())  # the env's own default reward
    obs, _ = env.reset()
    assert obs["messages"][-1] == {"role": "user", "content": "hi"} and obs["images"] == []
    assert env.step("hello")[4]["reward_components"]["rubric_score"] == 0.0


def test_gymnasium_make_and_html_render():
    env = gymnasium.make(
        "VisualToolBench-v0", tasks=[make_task("a")], tools=small_tools(), reward=exact_reward(), render_mode="html"
    )
    env.reset(seed=1)
    env.step(hermes("python_image_processing", code="save"))
    page = env.render()
    assert page.startswith("<!doctype html>") and page.count('<img src="data:image/png;base64,') == 2
    env.close()


def test_info_and_record_hold_no_answer_facts():
    task = load_tasks("synth:2:3")[0]
    assert task.metadata["key_facts"]
    env = VisualToolBenchEnv(tasks=[task], tools=small_tools(), reward=exact_reward())
    _, info = env.reset(seed=0)
    assert "key_facts" not in info["task"]["metadata"] and "key_facts" not in info["record"].metadata["metadata"]
    assert task.turns[0].golden_answer not in json.dumps(info["task"]) + json.dumps(info["record"].to_dict())
