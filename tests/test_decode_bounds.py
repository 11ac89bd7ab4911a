"""Decode work is bounded wherever an image is decoded from outside (issue 32, item 1).

An 81 KB progressive JPEG whose last scan repeats 600 times took 14 s to decode in ``env.step``, outside
the tool's timeout, and again in every consumer. Now tool images are decoded in the sandbox call's
checking child (its time and memory), the env decodes only plain images (``vtb_env.sandbox.plain``:
work bounded by pixels times passes), dataset images are shown plain, and what reaches the observation
is plain. Real sandbox processes throughout; bombs from ``tests/support/decode_bombs.py``.
"""

from __future__ import annotations

import io
import struct
import time
from dataclasses import replace

import pytest
from PIL import Image

from tests.support.decode_bombs import bomb_bytes, bombs, calibrated_progressive_jpeg, progressive_jpeg
from tests.support.env_tools import exact_reward, hermes, make_task
from tests.support.hostile_images import hostile_images
from vtb_env import tool_images
from vtb_env.env import VisualToolBenchEnv
from vtb_env.image_checks import check_dataset_image, shown_dataset_image
from vtb_env.sandbox import Limits, Sandbox
from vtb_env.sandbox.normalize import MIN_CHECK_S
from vtb_env.sandbox.plain import MAX_JPEG_SCANS, MAX_PNG_CHUNKS, plain_form
from vtb_env.tasks import ImageDecodeError, ImageRef
from vtb_env.tools.base import ToolRegistry
from vtb_env.tools.python_tools import PythonImageProcessing

SMALL = bombs(scale=0.05)  # every kind, built in well under a second each


def _save(image: Image.Image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


# ---- the plain form: a closed set, read from the structure alone ---------------------------------


def test_plain_images_are_single_frame_png_and_huffman_jpeg_with_few_scans():
    noise = Image.effect_noise((64, 48), 40).convert("RGB")
    assert plain_form(_save(noise, "PNG")).format == "PNG"
    assert plain_form(_save(noise.convert("L"), "PNG")).mode == "L"
    assert plain_form(_save(noise, "JPEG")).passes == 1
    assert plain_form(_save(noise, "JPEG", progressive=True)).passes == 10
    plain = {name for name, data in hostile_images().items() if plain_form(data) is not None}
    # PNG in 8-bit L/RGB/RGBA and Huffman JPEG; metadata size is the shown form's business, not the decoder's
    assert plain == {
        "png_8mib_text_chunk",
        "png_16mib_iccp_chunk",
        "png_900kib_iccp_chunk",
        "jpeg_truncated",
        "jpeg_CMYK",
        "jpeg_exif_rotated",
    }
    for name, code in SMALL.items():
        assert plain_form(bomb_bytes(code)) is None, name


def test_the_plain_walk_refuses_what_would_make_pillow_loop_in_python():
    jpeg = _save(Image.new("RGB", (16, 16)), "JPEG", progressive=True)
    last = jpeg.rfind(b"\xff\xda")
    more_scans = jpeg[:-2] + jpeg[last:-2] * (MAX_JPEG_SCANS - 9) + b"\xff\xd9"
    assert plain_form(more_scans) is None and plain_form(jpeg[:-2] + jpeg[last:-2] * 2 + b"\xff\xd9") is not None
    assert plain_form(jpeg[:2] + b"\x00" * 1000 + jpeg[2:]) is None  # junk Pillow would step over byte by byte
    assert plain_form(jpeg[:2] + b"\xff" * 100 + jpeg[2:]) is None  # fill bytes likewise
    png = _save(Image.new("RGB", (4, 4)), "PNG")
    chunk = struct.pack(">I", 0) + b"teXt" + struct.pack(">I", 0)
    crowded = png[:33] + chunk * MAX_PNG_CHUNKS + png[33:]
    assert plain_form(png[:33] + chunk * 10 + png[33:]) is not None and plain_form(crowded) is None
    assert plain_form(png[:-12]) is None  # cut short: no IEND


# ---- tool images: decoded in the sandbox call, within its time -----------------------------------


@pytest.fixture(scope="module")
def fast_sandbox():
    with Sandbox(1, limits=Limits(timeout_s=0.6)) as sandbox:
        yield sandbox.start()


def _env(sandbox: Sandbox) -> VisualToolBenchEnv:
    env = VisualToolBenchEnv(
        tasks=[make_task("a")], tools=ToolRegistry([PythonImageProcessing(sandbox)]), reward=exact_reward()
    )
    env.reset(seed=0)
    return env


def test_a_progressive_jpeg_bomb_costs_the_step_no_more_than_the_tool_timeout(fast_sandbox, monkeypatch):
    bound_s = 0.6 + MIN_CHECK_S + 1.0  # the tool's timeout, the check's floor, overhead
    # grown on this machine until decoding it here takes twice the bound: a bomb on any host, fast or slow
    code, decode_s = calibrated_progressive_jpeg(min_decode_s=2 * bound_s)
    decoded = []
    monkeypatch.setattr(tool_images, "decode_image", lambda data: decoded.append(data))
    env = _env(fast_sandbox)
    start = time.perf_counter()
    obs, *_ = env.step(hermes("python_image_processing", code=code))
    step_s = time.perf_counter() - start
    assert step_s < bound_s < decode_s, (step_s, decode_s)
    assert decoded == [] and obs["image_names"] == ["image_1.png"]
    assert (
        "transformed_image_0.png was not shown: decoding it did not finish within the call's time limit"
        in (obs["messages"][-1]["content"])
    )


@pytest.mark.parametrize("name", SMALL)
def test_what_reaches_the_observation_from_a_tool_is_plain(name, monkeypatch):
    decoded = []
    monkeypatch.setattr(tool_images, "decode_image", lambda data: decoded.append(data))
    with Sandbox(1, limits=Limits(timeout_s=10)) as sandbox:
        env = _env(sandbox)
        obs, *_ = env.step(hermes("python_image_processing", code=SMALL[name]))
    assert decoded == []  # the env decoded nothing: the sandbox call did
    assert obs["image_names"][-1] == "transformed_image_0.png", obs["messages"][-1]["content"]
    form = plain_form(env._episode.dialogue.assets[-1].data)
    assert form is not None and form.format == "PNG" and form.mode in ("L", "RGB", "RGBA")


# ---- dataset images --------------------------------------------------------------------------------


def test_a_dataset_bomb_is_shown_plain_and_checked_outside_this_process(monkeypatch):
    from vtb_env import image_checks

    data = bomb_bytes(progressive_jpeg(side=400, repeats=50))
    decoded, real = [], image_checks.decode_image
    monkeypatch.setattr(image_checks, "decode_image", lambda data: decoded.append(data) or real(data))
    shown = shown_dataset_image(data)
    assert plain_form(shown).format == "PNG" and Image.open(io.BytesIO(shown)).size == (400, 400)
    check_dataset_image(data)
    assert decoded == []  # neither decoded it here
    plain = _save(Image.new("RGB", (8, 8), "red"), "PNG")
    assert shown_dataset_image(plain) is plain  # a plain image is shown as it is
    check_dataset_image(plain)
    assert decoded == [plain]  # ... and decoded here, where its work is bounded
    with pytest.raises(ImageDecodeError, match="cannot decode image"):
        shown_dataset_image(b"GIF89a" + b"\x00" * 40)


def test_reset_shows_a_dataset_bomb_as_a_plain_image():
    bomb = bomb_bytes(progressive_jpeg(side=400, repeats=50))
    task = make_task("a")
    turn = replace(task.turns[0], images=(ImageRef(name="photo.jpg", data=bomb),))
    env = VisualToolBenchEnv(tasks=[replace(task, turns=(turn,) + task.turns[1:])], reward=exact_reward())
    obs, info = env.reset(seed=0)
    assert obs["images"][0].format == "PNG" and obs["images"][0].size == (400, 400)
    assert obs["messages"][-1]["content"][-1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_an_image_part_in_an_action_is_never_decoded(monkeypatch):
    """What a ``vtb serve`` client sends is an action: its image parts are dropped by the parser, not decoded."""
    import base64

    from PIL import ImageFile

    bomb = bomb_bytes(progressive_jpeg(side=400, repeats=50))
    url = "data:image/jpeg;base64," + base64.b64encode(bomb).decode()
    loads = []
    real_load = ImageFile.ImageFile.load
    monkeypatch.setattr(ImageFile.ImageFile, "load", lambda self: loads.append(self.format) or real_load(self))
    env = VisualToolBenchEnv(tasks=[make_task("a")], reward=exact_reward())
    env.reset(seed=0)
    loads.clear()
    action = {
        "role": "assistant",
        "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "It is 10."}],
    }
    obs, reward, terminated, truncated, info = env.step(action)
    assert info["record"].final_answers[0] == "It is 10." and "JPEG" not in loads
