"""The tiny test models reload through the real Auto* classes and generate; the scripted one follows its script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image
from transformers import AutoModelForCausalLM, AutoModelForImageTextToText, AutoProcessor, AutoTokenizer

from tests.support import tiny_models

CALL = {"name": "python_image_processing", "arguments": {"code": "img = Image.open('image_1.png')\nprint(img.size)"}}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": CALL["name"],
            "description": "Run Python on the images.",
            "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
        },
    }
]
ANSWER = "Final answer: 3 cats."
CALL_TEXT = f"<tool_call>{json.dumps(CALL)}</tool_call>"


def _user(text: str, image: bool) -> dict:
    return {"role": "user", "content": [*([{"type": "image"}] if image else []), {"type": "text", "text": text}]}


def _conversation(stage: str, image: bool) -> list[dict]:
    """Messages up to `stage` of a two-turn episode in which each turn makes one call."""
    call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": CALL["name"], "arguments": json.dumps(CALL["arguments"])},
            }
        ],
    }
    # Role words inside the text must not count as role headers.
    result = {"role": "tool", "tool_call_id": "c1", "content": "(640, 480) user ipython"}
    steps = [
        _user("How many cats are there? Tell the user.", image),
        call,
        result,
        {"role": "assistant", "content": ANSWER},
        _user("And dogs?", False),
        call,
        result,
    ]
    upto = {"first_turn": 1, "after_result": 3, "second_turn": 5, "second_after_result": 7}[stage]
    return steps[:upto]


def _load(path: Path, family: str):
    if family == "llama":
        return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    return AutoModelForImageTextToText.from_pretrained(path), AutoProcessor.from_pretrained(path)


def _reply(model, processor, family: str, messages: list[dict], tools=None, max_new_tokens: int = 12) -> str:
    text = processor.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
    if family == "llama":
        inputs, tokenizer = processor(text, return_tensors="pt", add_special_tokens=False), processor
    else:
        images = [Image.new("RGB", (48, 40), (200, 30, 30))] if "<image>" in text else None
        inputs = processor(text=text, images=images, return_tensors="pt", add_special_tokens=False)
        tokenizer = processor.tokenizer
    output = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
    return tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=False)


def test_tokenizer_keeps_tool_call_tags_and_renders_tools_and_images():
    tokenizer = tiny_models.build_tokenizer()
    text = tokenizer.apply_chat_template([_user("hi", True)], tools=TOOLS, add_generation_prompt=True, tokenize=False)
    assert text.startswith("<|begin_of_text|><|start_header_id|>system")
    assert '"name": "python_image_processing"' in text and "<image>hi<|eot_id|>" in text
    assert text.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
    ids = tokenizer.encode("<tool_call>{}</tool_call>", add_special_tokens=False)
    assert tokenizer.convert_ids_to_tokens([ids[0], ids[-1]]) == ["<tool_call>", "</tool_call>"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "<tool_call>{}</tool_call>"
    assert tokenizer.decode(tokenizer.encode("Crop image_1.png!", add_special_tokens=False)) == "Crop image_1.png!"


@pytest.mark.parametrize(
    "family,build",
    [
        ("llama", tiny_models.build_tiny_llama),
        ("idefics3", tiny_models.build_tiny_idefics3),
        ("llava", tiny_models.build_tiny_llava),
    ],
)
def test_random_model_reloads_and_generates(tmp_path, family, build):
    path = build(tmp_path / family)
    assert sum(f.stat().st_size for f in path.iterdir()) < 5_000_000
    model, processor = _load(path, family)
    reply = _reply(model, processor, family, [_user("Describe the image.", family != "llama")], max_new_tokens=5)
    assert isinstance(reply, str) and reply


@pytest.mark.parametrize("family", tiny_models.FAMILIES)
def test_scripted_model_calls_each_turn_then_answers(tmp_path, family):
    path = tiny_models.build_scripted_model(tmp_path / family, family, CALL, ANSWER)
    model, processor = _load(path, family)
    image = family != "llama"
    expected = {
        "first_turn": CALL_TEXT,
        "after_result": ANSWER,
        "second_turn": CALL_TEXT,
        "second_after_result": ANSWER,
    }
    for stage, text in expected.items():
        assert _reply(model, processor, family, _conversation(stage, image), TOOLS, 40) == text + "<|eot_id|>", stage
    # Raw-text mode: no tools in the prompt, same script.
    assert _reply(model, processor, family, _conversation("first_turn", image), None, 40) == CALL_TEXT + "<|eot_id|>"


def test_scripted_model_can_call_only_until_the_first_result(tmp_path):
    path = tiny_models.build_scripted_model(tmp_path / "once", "llama", CALL, ANSWER, call_each_turn=False)
    model, tokenizer = _load(path, "llama")
    replies = {
        stage: _reply(model, tokenizer, "llama", _conversation(stage, False), TOOLS, 40)
        for stage in ("first_turn", "after_result", "second_turn")
    }
    assert replies == {
        "first_turn": CALL_TEXT + "<|eot_id|>",
        "after_result": ANSWER + "<|eot_id|>",
        "second_turn": ANSWER + "<|eot_id|>",
    }


def test_scripted_model_rejects_a_malformed_call(tmp_path):
    with pytest.raises(ValueError, match="tool_call must be"):
        tiny_models.build_scripted_model(tmp_path / "bad", "llama", {"function": "x"})


def test_scripted_model_without_a_call_always_answers(tmp_path):
    verdict = '{"score": 1, "reason": "matches the rubric"}'
    path = tiny_models.build_scripted_model(tmp_path / "judge", "llama", None, verdict)
    model, tokenizer = _load(path, "llama")
    for stage in ("first_turn", "after_result"):
        assert _reply(model, tokenizer, "llama", _conversation(stage, False), None, 10) == verdict + "<|eot_id|>"
