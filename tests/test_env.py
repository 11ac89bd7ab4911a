"""The environment's episode semantics: a scripted episode, every action format, malformed calls,
history modes, the cap in both presets, image re-ingestion, seeding, caching and rendering."""

from __future__ import annotations

import json
import time

import gymnasium
import pytest

import vtb_env  # noqa: F401  (registers VisualToolBench-v0)
from tests.support.env_tools import (
    ImageMakerTool,
    exact_reward,
    hermes,
    make_task,
    png,
    small_tools,
    unserializable_actions,
)
from vtb_env.config import CAP_PLACEHOLDER_ANSWER, EnvConfig
from vtb_env.env import EpisodeOverError, VisualToolBenchEnv
from vtb_env.loaders import load_tasks
from vtb_env.observation import ImageAsset, observation_to_processor_messages
from vtb_env.prompts import STRONG_SYSTEM_PROMPT, WEAK_SYSTEM_PROMPT
from vtb_env.tasks import Task, Turn
from vtb_env.tools.base import ToolRegistry
from vtb_env.tools.python_tools import PythonImageProcessing


def make_env(tasks=None, config="default", **kwargs) -> VisualToolBenchEnv:
    return VisualToolBenchEnv(
        tasks=tasks or [make_task("a", turns=2)], tools=small_tools(), reward=exact_reward(), config=config, **kwargs
    )


def roles(observation):
    return [message["role"] for message in observation["messages"]]


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


def test_official_preset_sends_jpeg_and_default_passes_bytes_through():
    for preset, prefix in [("default", "data:image/png;base64,"), ("official", "data:image/jpeg;base64,")]:
        env = make_env(config=preset)
        obs, _ = env.reset(seed=0)
        part = obs["messages"][1]["content"][2]
        assert part["type"] == "image_url" and part["image_url"]["url"].startswith(prefix)


def test_reingestion_message_follows_all_tool_messages_in_call_order():
    env = make_env()
    env.reset(seed=0)
    action = (
        hermes("python_image_processing", code="save")
        + hermes("calculator", expression="1")
        + hermes("python_image_processing", code="save save")
    )
    obs, *_, info = env.step(action)
    assert roles(obs)[-5:] == ["assistant", "tool", "tool", "tool", "user"]
    second = json.loads(obs["messages"][-2]["content"])
    assert second["saved"] == ["transformed_image_1.png", "transformed_image_2.png"]
    assert "transformed_image_0.png" in second["visible"]  # calls of a round run in order
    labels = [p["text"] for p in obs["messages"][-1]["content"] if p["type"] == "text"][1:]
    assert labels == ["[transformed_image_0.png]", "[transformed_image_1.png]", "[transformed_image_2.png]"]
    assert obs["image_names"][1:] == ["transformed_image_0.png", "transformed_image_1.png", "transformed_image_2.png"]
    assert [obs["images"][i].size for i in range(1, 4)] == [(32, 24)] * 3


def test_undecodable_tool_image_is_reported_not_shown():
    class Broken(ImageMakerTool):
        def run(self, arguments, context):
            result = super().run(arguments, context)
            result.images[0] = type(result.images[0])(result.images[0].name, b"\x89PNG\r\n\x1a\ngarbage")
            return result

    env = VisualToolBenchEnv(tasks=[make_task("a")], tools=ToolRegistry([Broken()]), reward=exact_reward())
    env.reset(seed=0)
    obs, *_ = env.step(hermes("python_image_processing", code="save save"))
    assert obs["image_names"] == ["image_1.png", "transformed_image_0.png"]
    assert "was not shown" in obs["messages"][-2]["content"]


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


def test_data_urls_are_encoded_once_per_image(monkeypatch):
    calls = []
    original = ImageAsset._encode
    monkeypatch.setattr(ImageAsset, "_encode", lambda self, *a: calls.append(self.name) or original(self, *a))
    env = make_env(tasks=[make_task("a")], config="official")
    for _ in range(2):  # a repeated task reuses the cached task image
        env.reset(options={"index": 0})
        for _ in range(4):
            obs, *_ = env.step(hermes("python_image_processing", code="save"))
    assert sorted(calls) == sorted(["image_1.png"] + [f"transformed_image_{i}.png" for i in range(4)] * 2)


def test_name_parts_never_encode_and_convert_for_local_processors(monkeypatch):
    monkeypatch.setattr(ImageAsset, "_encode", lambda *a: pytest.fail("encoded"))
    env = make_env(config=EnvConfig.preset("default", image_parts="name"))
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step(hermes("python_image_processing", code="save"))
    assert obs in env.observation_space
    parts = [p for m in obs["messages"] if isinstance(m["content"], list) for p in m["content"] if p["type"] == "image"]
    assert [p["name"] for p in parts] == obs["image_names"]
    hf = observation_to_processor_messages(obs)
    images = [p["image"] for m in hf if isinstance(m["content"], list) for p in m["content"] if p["type"] == "image"]
    assert images == obs["images"] and images[1].size == (32, 24)


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


def test_large_image_step_observation_contains_it():
    env = VisualToolBenchEnv(
        tasks=[make_task("a")], tools=ToolRegistry([ImageMakerTool(size=(2000, 1500))]), reward=exact_reward()
    )
    env.reset(seed=0)
    obs, *_ = env.step(hermes("python_image_processing", code="save"))
    assert obs["images"][-1].size == (2000, 1500) and len(png()) > 0


def test_full_episode_through_the_real_vision_tool():
    env = VisualToolBenchEnv(
        tasks=[make_task("a")], tools=ToolRegistry([PythonImageProcessing()]), reward=exact_reward()
    )
    obs, _ = env.reset(seed=0)
    assert "image_1.png" in obs["tools"][0]["function"]["description"]  # the schema lists the visible files
    code = (
        "from PIL import Image\nimg = Image.open('image_1.png')\nprint(img.size)\n"
        "img.crop((0, 0, 20, 10)).save('transformed_image_0.png')\nimg.resize((5, 5)).save('other.png')"
    )
    obs, *_, info = env.step(hermes("python_image_processing", code=code))
    assert roles(obs)[-3:] == ["assistant", "tool", "user"]
    output = obs["messages"][-2]["content"]
    assert (
        json.loads(output.split("\n[")[0])["stdout"] == "(41, 30)\n"
        and "other.png is shown as transformed_image_1.png" in output
    )
    assert obs["image_names"] == ["image_1.png", "transformed_image_0.png", "transformed_image_1.png"]
    assert [image.size for image in obs["images"]] == [(41, 30), (20, 10), (5, 5)]
    obs, *_ = env.step(
        hermes(
            "python_image_processing", code="from PIL import Image\nprint(Image.open('transformed_image_1.png').size)"
        )
    )
    assert (
        json.loads(obs["messages"][-1]["content"].split("\n[")[0])["stdout"] == "(5, 5)\n"
    )  # the renamed file is visible next round
    obs, reward, terminated, truncated, info = env.step("It is 10.")
    assert terminated and reward == 1.0 and info["record"].tool_calls[0].ok


ZOOM_CODE = """from PIL import Image
img = Image.open('image_1.png')
w, h = img.size
img.crop((0, 0, w // 2, h // 2)).resize((w, h), Image.LANCZOS).save('transformed_image_0.png')
print(img.size)
"""


def test_scripted_episode_over_a_demo_task_with_the_default_tools():
    """A generic zoom policy (it never sees the reference) on the first tool-required single-turn demo task."""
    task = next(t for t in load_tasks("demo") if t.mode_label == "tool_required" and len(t.turns) == 1)
    env = VisualToolBenchEnv(tasks=[task], reward=exact_reward())
    obs, info = env.reset(seed=0)
    assert roles(obs) == ["system", "user"] and obs["image_names"] == ["image_1.png"] and info["task"]["id"] == task.id
    assert [t["function"]["name"] for t in obs["tools"]] == [
        "python_image_processing",
        "python_interpreter",
        "web_search",
        "browser_get_page_text",
        "historical_weather",
        "calculator",
    ]
    size = obs["images"][0].size

    obs, reward, terminated, truncated, info = env.step(
        "<think>zoom into the top-left quarter</think>" + hermes("python_image_processing", code=ZOOM_CODE)
    )
    assert (reward, terminated, truncated, info["parse_errors"]) == (0.0, False, False, [])
    assert roles(obs) == ["system", "user", "assistant", "tool", "user"]
    assert json.loads(obs["messages"][3]["content"].split("\n[")[0])["stdout"] == f"{size}\n"
    labels = [p["text"] for p in obs["messages"][4]["content"] if p["type"] == "text"]
    assert labels[1:] == ["[transformed_image_0.png]"] and obs["image_names"] == [
        "image_1.png",
        "transformed_image_0.png",
    ]
    assert obs["images"][1].size == size and obs in env.observation_space

    obs, reward, terminated, truncated, info = env.step("I zoomed in, but cannot read the bars.")
    assert terminated and not truncated and obs["tools"] == [] and roles(obs)[-1] == "assistant"
    record = info["record"]
    assert record.final_answers == ["I zoomed in, but cannot read the bars."] and record.used_tools
    assert [(c.name, c.ok, [i["name"] for i in c.images]) for c in record.tool_calls] == [
        ("python_image_processing", True, ["transformed_image_0.png"])
    ]
    components = info["reward_components"]
    assert {"rubric_score", "passed", "mode", "format", "used_tools", "credited_tools"} <= components.keys()
    assert components["format"] == 1.0 and components["used_tools"] == 1.0 and components["judge_errors"] == 0.0
    # a demo task carries key facts: the env judged what the zoom revealed, and only a reveal is TP (and tool_success)
    revealed = record.tool_calls[0].revealed
    assert revealed is not None and components["credited_tools"] == components["mode"] == float(bool(revealed))
    assert components.get("tool_success", 0.0) == float(bool(revealed))
    assert reward == components["reward"]
    env.close()


def test_info_and_record_hold_no_answer_facts():
    task = load_tasks("synth:2:3")[0]
    assert task.metadata["key_facts"]
    env = VisualToolBenchEnv(tasks=[task], tools=small_tools(), reward=exact_reward())
    _, info = env.reset(seed=0)
    assert "key_facts" not in info["task"]["metadata"] and "key_facts" not in info["record"].metadata["metadata"]
    assert task.turns[0].golden_answer not in json.dumps(info["task"]) + json.dumps(info["record"].to_dict())
