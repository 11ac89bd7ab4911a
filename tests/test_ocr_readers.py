"""The second OCR reader (RapidOCR, the [ocr2] extra): it reads what the generator prints, through the engine API."""

from __future__ import annotations

import numpy as np
import pytest

from vtb_env import ocr
from vtb_env.synth.scene_drawing import render
from vtb_env.synth.scenes import make_scene

pytest.importorskip("rapidocr_onnxruntime")


@pytest.fixture(scope="module")
def engine():
    return ocr.RapidOcrEngine()


def test_rapidocr_reads_a_printed_document_upright_and_upside_down(engine):
    """Its 0/180 degree classifier turns print back: one reason a mode label is true only for its reader."""
    scene = make_scene("menu", np.random.default_rng(4), 5)
    page = render(scene, 30, rng=np.random.default_rng(0), printable=True).image
    for image in (page, page.rotate(180, expand=True)):
        words = ocr.read_text(image, engine)
        text = " ".join(w.text for w in words)
        read = [e for e in scene.entries if ocr.contains(text, e.label) and ocr.contains(text, e.text)]
        assert len(read) >= 4, text
        assert all(
            0 <= w.box[0] <= w.box[2] <= image.width and 0 <= w.box[1] <= w.box[3] <= image.height for w in words
        )
    assert engine.name == "rapidocr-1.4" and ocr.TesseractEngine.name == "tesseract-5"


def test_a_blank_image_reads_as_nothing(engine):
    from PIL import Image

    assert ocr.read_text(Image.new("RGB", (200, 80), (255, 255, 255)), engine) == []
