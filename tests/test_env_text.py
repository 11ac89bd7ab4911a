"""Policy and tool text can never break a step, a record or a tokenizer (issue 11, item 9).

Lone surrogates (half an emoji, a JSON ``\\udXXX`` escape, a file name with invalid UTF-8)
enter through the action and through tool results; everything the env emits must still encode
as UTF-8, and the next step must work.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.env_tools import EchoCalculator, ImageMakerTool, exact_reward, hermes, make_task, png, small_tools
from vtb_env.env import VisualToolBenchEnv
from vtb_env.safe_text import clean_text, clean_value
from vtb_env.tools.base import NamedImage, Tool, ToolContext, ToolRegistry, ToolResult
from vtb_env.tools.python_tools import PythonImageProcessing

HALF_EMOJI = "\ud83d"


def emitted_text(observation: dict[str, Any], info: dict[str, Any]) -> bytes:
    """Everything a trainer or ``vtb eval`` serialises from a step, as UTF-8 bytes (raises if it cannot)."""
    payload = {
        "messages": [{k: v for k, v in m.items()} for m in observation["messages"]],
        "image_names": observation["image_names"],
        "tools": observation["tools"],
        "info": {k: v for k, v in info.items() if k != "record"},
        "record": info["record"].to_dict(),
    }
    return json.dumps(payload, ensure_ascii=False, default=str).encode("utf-8")


def make_env(tools: ToolRegistry | None = None) -> VisualToolBenchEnv:
    return VisualToolBenchEnv(tasks=[make_task("a", turns=2)], tools=tools or small_tools(), reward=exact_reward())


def test_clean_text_joins_pairs_and_replaces_lone_surrogates():
    assert clean_text("ok ☕") == "ok ☕"
    assert clean_text("\ud83d\ude00") == "😀"  # a pair written as two code points is the real character
    assert clean_text(f"a{HALF_EMOJI}b\udcff.png") == "a\ufffdb\ufffd.png"
    assert clean_value({f"k{HALF_EMOJI}": [f"v{HALF_EMOJI}", 1, None, {"x": 2.5}]}) == {
        "k\ufffd": ["v\ufffd", 1, None, {"x": 2.5}]
    }


ACTIONS = {
    "hermes text": f'<tool_call>{{"name": "calculator", "arguments": {{"expression": "1{HALF_EMOJI}"}}}}</tool_call>',
    "hermes JSON escape": '<tool_call>{"name": "calculator", "arguments": {"expression": "1\\ud83d"}}</tool_call>',
    "pythonic": f'[calculator(expression="1{HALF_EMOJI}")]',
    "function_tag": f"<function=calculator><parameter=expression>1{HALF_EMOJI}</parameter></function>",
    "surrogate tool name": f'<tool_call>{{"name": "calc{HALF_EMOJI}", "arguments": {{}}}}</tool_call>',
    "openai dict": {
        "role": "assistant",
        "content": f"hm{HALF_EMOJI}",
        "tool_calls": [
            {
                "id": f"id{HALF_EMOJI}",
                "type": "function",
                "function": {"name": "calculator", "arguments": f'{{"expression": "1{HALF_EMOJI}"}}'},
            }
        ],
    },
    "final answer": f"<think>half {HALF_EMOJI}</think>It is 10 {HALF_EMOJI}",
}


@pytest.mark.parametrize("name", ACTIONS)
def test_surrogates_in_actions_reach_nothing_the_env_emits(name):
    env = make_env()
    env.reset(seed=0)
    observation, _, _, _, info = env.step(ACTIONS[name])
    emitted_text(observation, info)  # raises UnicodeEncodeError if a surrogate got through
    if name.startswith(("hermes", "pythonic", "function", "openai")):
        assert info["record"].tool_calls[0].arguments == {"expression": "1\ufffd"}
    observation, *_, info = env.step("It is 10.")  # the episode goes on
    emitted_text(observation, info)


class SurrogateTool(Tool):
    """A tool whose text, error and image names carry lone surrogates (as a buggy or hostile tool would)."""

    name = "calculator"
    schema = EchoCalculator.schema

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        if arguments["expression"] == "fail":
            return ToolResult(
                text=json.dumps({"error": f"bad {HALF_EMOJI}"}),
                error=f"bad {HALF_EMOJI}",
                meta={"kind": f"k{HALF_EMOJI}"},
            )
        return ToolResult(text=json.dumps({"out": f"x{HALF_EMOJI}"}), images=[NamedImage("\udcff.png", png())])


def test_surrogates_in_tool_results_are_cleaned():
    env = make_env(ToolRegistry([SurrogateTool()]))
    env.reset(seed=0)
    observation, *_, info = env.step(hermes("calculator", expression="1") + hermes("calculator", expression="fail"))
    body = emitted_text(observation, info).decode("utf-8")
    ok, failed = info["record"].tool_calls
    assert json.loads(ok.output.split("\n[")[0]) == {"out": "x\ufffd"}  # the JSON escape is gone too
    assert "\ufffd.png is shown as transformed_image_0.png" in ok.output and failed.error == "bad \ufffd"
    assert "\\ud83d" not in body and observation["image_names"][-1] == "transformed_image_0.png"
    observation, *_, info = env.step("It is 10.")
    emitted_text(observation, info)


def test_real_vision_tool_writing_an_invalid_utf8_file_name():
    env = VisualToolBenchEnv(
        tasks=[make_task("a")], tools=ToolRegistry([PythonImageProcessing()]), reward=exact_reward()
    )
    env.reset(seed=0)
    code = (
        "import os\nfrom PIL import Image\nImage.open('image_1.png').save(os.fsdecode(b'\\xff.png'), format='PNG')\n"
        "print(os.fsdecode(b'\\xfe'))"
    )
    observation, *_, info = env.step(hermes("python_image_processing", code=code))
    emitted_text(observation, info)
    call = info["record"].tool_calls[0]
    assert call.ok, call.output
    assert observation["image_names"] == ["image_1.png", "transformed_image_0.png"]
    observation, *_, info = env.step(hermes("python_image_processing", code="print('next call works')"))
    assert "next call works" in info["record"].tool_calls[-1].output
    emitted_text(observation, info)


def test_observation_goes_through_a_real_tokenizer():
    from tests.support.tiny_models import build_tokenizer

    tokenizer = build_tokenizer()
    env = make_env(ToolRegistry([SurrogateTool(), ImageMakerTool()]))
    env.reset(seed=0)
    observation, *_ = env.step(ACTIONS["hermes text"])
    for message in observation["messages"]:
        content = message["content"]
        texts = (
            [content] if isinstance(content, str) else [part["text"] for part in content if part.get("type") == "text"]
        )
        for text in texts:
            assert tokenizer(text)["input_ids"] is not None
    assert tokenizer(json.dumps(observation["messages"][-2:], ensure_ascii=False))["input_ids"]


_text = st.text(alphabet=st.characters(codec=None, blacklist_categories=()), max_size=40)  # surrogates included


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["hermes", "raw", "pythonic", "function", "openai"]), text=_text, name=_text)
def test_fuzzed_actions_never_break_a_step_or_a_record(kind, text, name):
    action: Any = {
        "hermes": f'<tool_call>{{"name": "{name}", "arguments": {{"expression": "{text}"}}}}</tool_call>',
        "raw": text,
        "pythonic": f"[calculator(expression={text!r})]",
        "function": f"<function={name}><parameter=expression>{text}</parameter></function>",
        "openai": {
            "role": "assistant",
            "content": text,
            "tool_calls": [{"function": {"name": name, "arguments": json.dumps({"expression": text})}}],
        },
    }[kind]
    env = make_env()
    env.reset(seed=0)
    observation, _, terminated, truncated, info = env.step(action)
    emitted_text(observation, info)
    if not (terminated or truncated):
        observation, *_, info = env.step("It is 10.")
        emitted_text(observation, info)
