"""Images in the environment's observations: JPEG or passed-through bytes per preset, re-ingestion after the tool
messages, undecodable tool images, data URLs encoded once, name parts for local processors, large images."""

from __future__ import annotations

import json

import pytest

from tests.support.env_tools import (
    ImageMakerTool,
    exact_reward,
    hermes,
    make_task,
    png,
)
from tests.support.scripted_env import make_env, roles
from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv
from vtb_env.observation import ImageAsset, observation_to_processor_messages
from vtb_env.tools.base import ToolRegistry


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


def test_large_image_step_observation_contains_it():
    env = VisualToolBenchEnv(
        tasks=[make_task("a")], tools=ToolRegistry([ImageMakerTool(size=(2000, 1500))]), reward=exact_reward()
    )
    env.reset(seed=0)
    obs, *_ = env.step(hermes("python_image_processing", code="save"))
    assert obs["images"][-1].size == (2000, 1500) and len(png()) > 0
