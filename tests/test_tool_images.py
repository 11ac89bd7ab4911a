"""Hostile tool images (issue 22, item 2): every mode and format Pillow opens is converted for the
observation or refused with a note, through the env, ``to_chat_messages`` and a transformers
processor; ``env.step`` never raises on a tool image (5 of these 25 made it raise before)."""

from __future__ import annotations

import hashlib
import io
from typing import Any, Mapping

import numpy as np
import pytest
from PIL import Image

from tests.support.env_tools import exact_reward, hermes, make_task
from tests.support.hostile_images import REFUSED, SIZE, hostile_images
from vtb_agents.images import ImagePolicy
from vtb_agents.messages import to_chat_messages
from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv
from vtb_env.observation import observation_to_processor_messages
from vtb_env.sandbox.image_modes import SHOWN_MODES
from vtb_env.tools.base import NamedImage, Tool, ToolContext, ToolRegistry, ToolResult

IMAGES = hostile_images()
CONFIGS = {
    "default": EnvConfig.preset("default"),
    "official-jpeg": EnvConfig.preset("official"),
    "name-parts": EnvConfig.preset("default", image_parts="name"),
}


class ReturnsHostileImage(Tool):
    """Stands in for model code that saved ``transformed_image_0.png``: the code names the hostile image."""

    name = "python_image_processing"
    schema = {
        "type": "function",
        "function": {
            "name": name,
            "description": "returns the named hostile image",
            "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
        },
    }

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        return ToolResult(text="{}", images=[NamedImage("transformed_image_0.png", IMAGES[arguments["code"]])])


def step_with(image_name: str, config: EnvConfig, with_info: bool = False) -> Any:
    env = VisualToolBenchEnv(
        tasks=[make_task("a")], tools=ToolRegistry([ReturnsHostileImage()]), reward=exact_reward(), config=config
    )
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(hermes("python_image_processing", code=image_name))
    assert not terminated and not truncated
    return (obs, info) if with_info else obs


def tool_message(obs: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(obs["messages"]) if m["role"] == "tool")


@pytest.mark.parametrize("config", CONFIGS, ids=list(CONFIGS))
@pytest.mark.parametrize("image_name", IMAGES)
def test_env_step_shows_or_refuses_every_hostile_image(image_name, config):
    obs = step_with(image_name, CONFIGS[config])
    if image_name in REFUSED:
        assert obs["image_names"] == ["image_1.png"]
        assert "image transformed_image_0.png was not shown" in tool_message(obs)
        return
    assert obs["image_names"] == ["image_1.png", "transformed_image_0.png"], tool_message(obs)
    shown = obs["images"][-1]
    assert shown.mode in SHOWN_MODES and shown.format in ("PNG", "JPEG", "WEBP"), (shown.mode, shown.format)
    expected = (64, 64) if image_name == "ico_3_sizes" else SIZE[::-1] if "exif_rotated" in image_name else SIZE
    assert shown.size == expected
    chat, _ = to_chat_messages(obs, ImagePolicy())
    url = chat[-1]["content"][-1]["image_url"]["url"]
    assert url.startswith("data:image/") and len(url) < 100_000  # no megabytes of text or profile riding along


def test_conversions_keep_the_picture_and_say_what_was_lost():
    def shown(name: str) -> tuple[Image.Image, str]:
        obs = step_with(name, CONFIGS["default"])
        return obs["images"][-1].copy(), tool_message(obs)

    red, note = shown("tiff_CMYK")
    assert red.getpixel((0, 0)) == (255, 0, 0) and "was not shown" not in note
    gray, _ = shown("png_16bit_gray")
    assert gray.getpixel((0, 0)) == round(40_000 / 257)  # not clipped to white
    semi, _ = shown("png_LA")
    assert semi.getpixel((0, 0)) == (128, 128, 128, 100)
    clear, _ = shown("png_P_transparency")
    assert clear.mode == "RGBA" and clear.getpixel((0, 0)) == (255, 0, 0, 255)
    first, note = shown("gif_3_frames")
    assert first.getpixel((0, 0)) == (255, 0, 0) and "only the first of its 3 frames is shown" in note
    floats, note = shown("tiff_F")
    assert floats.getextrema() == (0, 255) and "shown scaled to 0..255" in note
    stripped, note = shown("png_8mib_text_chunk")
    assert "bytes of metadata are dropped" in note and "Comment" not in stripped.info


def test_a_plain_png_or_jpeg_is_kept_byte_for_byte():
    """The common case costs no re-encoding: the record's hash is the tool's file's."""
    for fmt in ("PNG", "JPEG"):
        buffer = io.BytesIO()
        Image.effect_noise(SIZE, 40).convert("RGB").save(buffer, format=fmt)
        IMAGES["plain"] = buffer.getvalue()
        try:
            obs, info = step_with("plain", CONFIGS["default"], with_info=True)
        finally:
            del IMAGES["plain"]
        assert info["record"].tool_calls[-1].images[0]["sha256"] == hashlib.sha256(buffer.getvalue()).hexdigest()
        assert "transformed_image_0.png:" not in tool_message(obs)  # no conversion note


@pytest.fixture(scope="module")
def processor(tmp_path_factory):
    pytest.importorskip("transformers")
    from transformers import AutoProcessor

    from tests.support.tiny_models import build_tiny_llava

    return AutoProcessor.from_pretrained(build_tiny_llava(tmp_path_factory.mktemp("llava")))


@pytest.mark.slow
def test_a_transformers_processor_reads_every_shown_image(processor):
    reference = {
        "png_16bit_gray": Image.new("L", SIZE, round(40_000 / 257)),
        "tiff_CMYK": Image.new("RGB", SIZE, "red"),
    }
    for image_name in IMAGES:
        obs = step_with(image_name, CONFIGS["name-parts"])
        inputs = processor.apply_chat_template(
            observation_to_processor_messages(obs), tokenize=True, return_dict=True, return_tensors="np"
        )
        pixels = np.asarray(inputs["pixel_values"])
        assert pixels.shape[0] == len(obs["images"]) and np.isfinite(pixels).all(), image_name
        if image_name in reference:
            expected = processor.image_processor(reference[image_name], return_tensors="np")["pixel_values"][0]
            assert np.allclose(pixels[-1], expected, atol=1e-5), image_name
