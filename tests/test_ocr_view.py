"""The OCR view: what a text policy is shown of an observation's images, read once per picture."""

from __future__ import annotations

import io
import re

import pytest
from PIL import Image, ImageDraw

from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv
from vtb_env.ocr import OcrUnavailable, OcrWord, TesseractEngine
from vtb_env.ocr_view import OcrCache, OcrView, make_view, pixel_key
from vtb_env.synth import generate
from vtb_env.tools.base import ToolRegistry


class CountingEngine:
    """Reads every picture as the same two words and counts the calls (what the cache must save)."""

    def __init__(self) -> None:
        self.calls = 0

    def read(self, image: Image.Image) -> list[OcrWord]:
        self.calls += 1
        return [OcrWord("Calcium", (0, 0, 1, 1), 0.9), OcrWord("smudge", (0, 0, 1, 1), 0.1)]


def _observation(env_tasks, **config):
    env = VisualToolBenchEnv(tasks=env_tasks, tools=ToolRegistry([]), config=EnvConfig.preset("default", **config))
    observation, _ = env.reset(options={"task_id": env_tasks[0].id})
    return observation


def test_view_turns_image_parts_into_the_words_read_and_keeps_the_rest():
    tasks = generate(2, 0)
    observation = _observation(tasks, image_parts="name")
    engine = CountingEngine()
    shown = OcrView(OcrCache(engine))(observation)
    user = shown["messages"][-1]
    pages = [part for part in user["content"] if part.get("ocr")]
    assert pages == [{"type": "text", "text": "Calcium smudge", "ocr": "image_1.png"}]
    assert any(part["text"] == tasks[0].turns[0].prompt for part in user["content"] if not part.get("ocr"))
    parts = [part for m in shown["messages"] if isinstance(m["content"], list) for part in m["content"]]
    assert not any(part["type"] in ("image", "image_url") for part in parts)
    assert shown["images"] is observation["images"] and shown["image_names"] == ["image_1.png"]
    assert observation["messages"][-1]["content"][-1]["type"] == "image"  # the env's observation is not changed

    blind = OcrView(OcrCache(engine), question=False)(observation)
    assert [part for m in blind["messages"] if m["role"] == "user" for part in m["content"]] == pages
    assert engine.calls == 2  # two caches, one reading each


def test_cache_reads_each_picture_once_whatever_its_encoding_and_drops_unsure_words(tmp_path):
    image = Image.new("RGB", (40, 20), (200, 210, 220))
    ImageDraw.Draw(image).rectangle((5, 5, 15, 15), fill=(0, 0, 0))
    png_fast, png_small = io.BytesIO(), io.BytesIO()
    image.save(png_fast, format="PNG", compress_level=1)
    image.save(png_small, format="PNG", compress_level=9)
    assert png_fast.getvalue() != png_small.getvalue()
    engine = CountingEngine()
    cache = OcrCache(engine, min_confidence=0.5)
    first = cache.read(Image.open(io.BytesIO(png_fast.getvalue())))
    again = cache.read(Image.open(io.BytesIO(png_small.getvalue())).convert("RGBA"))
    assert first == again == ("Calcium",) and engine.calls == 1 and cache.misses == 1
    assert cache.fill([image, image.copy(), Image.new("RGB", (3, 3))], workers=2) == 1 and engine.calls == 2
    assert pixel_key(image) != pixel_key(image.resize((20, 10)))

    saved = cache.save(tmp_path / "ocr.json")
    offline = OcrCache(engine=None)
    assert offline.load(saved) == 2
    assert offline.read(image) == ("Calcium",)
    with pytest.raises(OcrUnavailable, match="read-only OCR cache"):
        offline.read(Image.new("RGB", (5, 5), (1, 2, 3)))
    cache.signature = "another engine"
    cache.save(tmp_path / "other.json")
    with pytest.raises(ValueError, match="not by this cache's engine"):
        offline.load(tmp_path / "other.json")


@pytest.mark.parametrize(
    "content",
    [
        b"[1, 2]",
        b"null",
        b'{"format": 1, "words": []}',
        b'{"format": 1, "words": {"k": "Calcium"}}',
        b'{"format": 1, "words": {"k": [1, 2]}}',
        b'{"format": 1, "engine": 7, "words": {}}',
        b'{"format": 2, "words": {}}',
        b'{"format": 1, "words": {"k": ["a"]',
        b"\xff\xfe not utf-8",
        b"[" * 100_000,
    ],
)
def test_a_cache_file_of_any_wrong_shape_is_a_value_error_naming_the_file(tmp_path, content):
    path = tmp_path / "ocr.json"
    path.write_bytes(content)
    cache = OcrCache(engine=None)
    with pytest.raises(ValueError, match=f"^{re.escape(str(path))}: not an OCR cache"):
        cache.load(path)
    assert cache.words == {} and cache.signature is None  # nothing of a refused file was taken


def test_make_view_names_the_two_views():
    assert make_view(None) is None
    assert make_view("ocr").question and not make_view("ocr-pages").question
    with pytest.raises(ValueError, match="unknown image view"):
        make_view("pixels")


def test_tesseract_reads_the_asked_name_on_the_redundant_twin_only():
    """The real reader on the first v3 twin pair of seed 0 (a lab report hidden by ``corner``): the redundant
    twin's large page shows the asked test's name; the required twin's large page is the decoy, its key page
    small and turned."""
    try:
        engine = TesseractEngine()
    except OcrUnavailable as exc:
        pytest.skip(str(exc))
    tasks = generate(2, 0)
    by_label = {t.mode_label: t for t in tasks}
    asked = re.search(r"what is the (\w+) result", by_label["tool_redundant"].turns[0].prompt).group(1)
    view = OcrView(OcrCache(engine))
    read = {
        label: next(
            p["text"] for p in view(_observation([task], image_parts="name"))["messages"][-1]["content"] if p.get("ocr")
        )
        for label, task in by_label.items()
    }
    assert asked in read["tool_redundant"] and asked not in read["tool_required"], (asked, read)
