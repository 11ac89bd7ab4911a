"""TransformersAgent with tiny real checkpoints built in the test (text model and VLMs)."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from tests.support.env_tools import CALCULATOR_SCHEMA
from tests.support.tiny_models import build_scripted_model, build_tiny_idefics3, build_tiny_llava, build_tiny_mllama
from vtb_agents.transformers_agent import TransformersAgent, to_template_messages

pytestmark = pytest.mark.slow  # builds and runs several tiny checkpoints (~10 s)

CALL = {"name": "calculator", "arguments": {"expression": "6 * 7"}}


def observation(with_image: bool, after_tool: bool = False) -> dict:
    content = [{"type": "text", "text": "What is six times seven?"}]
    if with_image:
        content.insert(0, {"type": "image"})
    messages = [{"role": "user", "content": content}]
    if after_tool:
        messages += [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "calculator", "arguments": json.dumps(CALL["arguments"])},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": '{"result": 42}'},
        ]
    return {
        "messages": messages,
        "images": [Image.new("RGB", (40, 30), "red")] if with_image else [],
        "tools": [CALCULATOR_SCHEMA],
    }


@pytest.fixture(scope="module")
def scripted_llama(tmp_path_factory):
    return build_scripted_model(tmp_path_factory.mktemp("scripted_llama"), "llama", CALL, "The answer is 42.")


def test_scripted_text_model_emits_the_tool_call_then_the_answer(scripted_llama):
    agent = TransformersAgent(scripted_llama, max_new_tokens=8)
    assert not agent.is_vision
    first = agent.act(observation(with_image=False))
    assert (
        first.startswith("<tool_call>") and json.loads(first.split("<tool_call>")[1].split("</tool_call>")[0]) == CALL
    )
    assert agent.act(observation(with_image=False, after_tool=True)) == "The answer is 42."
    records = agent.drain_records()
    assert len(records) == 2 and all(r.prompt_tokens > 0 and r.completion_tokens >= 1 for r in records)


def test_batched_generation_matches_one_by_one(scripted_llama):
    agent = TransformersAgent(scripted_llama, max_new_tokens=8, batch_size=4)
    observations = [observation(False), observation(False, after_tool=True), observation(False)]
    batched = agent.act_batch(observations)
    assert batched == [agent.act(o) for o in observations]
    assert [r.meta["batch_size"] for r in agent.drain_records()[:3]] == [3, 3, 3]


@pytest.mark.parametrize("build", [build_tiny_idefics3, build_tiny_llava], ids=["idefics3", "llava"])
def test_vision_models_see_the_image_through_their_processor(build, tmp_path):
    agent = TransformersAgent(build(tmp_path / "vlm"), max_new_tokens=4, batch_size=2)
    assert agent.is_vision
    prompt, images = agent.render(observation(with_image=True))
    assert "<image>" in prompt and "calculator" in prompt and len(images) == 1
    actions = agent.act_batch([observation(True), observation(True)])
    assert len(actions) == 2 and all(isinstance(a, str) for a in actions)


def test_scripted_vlm_calls_the_tool_with_an_image_in_the_prompt(tmp_path):
    path = build_scripted_model(tmp_path / "scripted_idefics3", "idefics3", CALL, "Done.")
    agent = TransformersAgent(path, max_new_tokens=8)
    assert agent.is_vision and agent.act(observation(with_image=True)).startswith("<tool_call>")


def test_mllama_cross_attends_to_the_observation_image(tmp_path):
    import torch

    agent = TransformersAgent(build_tiny_mllama(tmp_path / "mllama"), max_new_tokens=4)
    assert agent.is_vision and type(agent.model).__name__ == "MllamaForConditionalGeneration"
    seen = []
    generate = agent.model.generate
    agent.model.generate = lambda **inputs: seen.append(inputs) or generate(**inputs)
    action = agent.act(observation(with_image=True, after_tool=True))
    assert isinstance(action, str) and agent.drain_records()[0].completion_tokens >= 1
    (inputs,) = seen
    assert inputs["pixel_values"].shape[:3] == (1, 1, 4)  # batch, images, tiles (max_num_tiles = 4)
    image_position = inputs["input_ids"][0].tolist().index(agent.processor.image_token_id)
    mask = inputs["cross_attention_mask"][0, :, 0, 0]  # per token: attends to the image's first tile
    assert mask[image_position:].all() and not mask[:image_position].any()  # text from the image on sees it
    model_inputs = {
        k: v for k, v in inputs.items() if k not in ("max_new_tokens", "pad_token_id", "eos_token_id", "do_sample")
    }
    with torch.inference_mode():
        logits = agent.model(**model_inputs).logits[0, -1]
        blank = agent.model(**{**model_inputs, "pixel_values": torch.zeros_like(inputs["pixel_values"])}).logits[0, -1]
    assert not torch.allclose(logits, blank)  # the image changes what the model says


def test_text_models_get_string_content_and_no_images():
    messages, images = to_template_messages(observation(with_image=True, after_tool=True), keep_images=False)
    assert messages[0]["content"] == "[image]What is six times seven?" and images == []
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == {"expression": "6 * 7"}
