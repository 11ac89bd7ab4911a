"""OCR perception probe: what can a plain text reader see in an image?

Engine-agnostic API used to measure whether a task really needs image tools (and usable by
non-LLM baseline agents):

- ``read_text(image) -> list[OcrWord]``: the words with pixel boxes and confidences;
- ``text_of(image) -> str``: the words joined in reading order;
- ``contains(text, needle) -> bool``: does ``needle`` (normalised) occur in what the engine read?

The default engine is Tesseract 5 (Debian package ``tesseract-ocr``, installed by
``scripts/setup.sh``) driven through ``pytesseract``. It was chosen over rapidocr-onnxruntime:
it is 3-5x faster per call here and needs no second OpenCV build next to
opencv-python-headless. Any object with a ``read(image) -> list[OcrWord]`` method can be
passed as ``engine=``.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol, Union

from PIL import Image

from vtb_env.tasks import decode_image

ImageLike = Union[Image.Image, str, bytes]


class OcrUnavailable(RuntimeError):
    """No OCR engine can run here (e.g. the tesseract binary is missing)."""


@dataclass(frozen=True)
class OcrWord:
    """One recognised word: its text, pixel box ``(x0, y0, x1, y1)`` and confidence in 0..1."""

    text: str
    box: tuple[int, int, int, int]
    confidence: float


class OcrEngine(Protocol):
    def read(self, image: Image.Image) -> list[OcrWord]: ...


class TesseractEngine:
    """Tesseract through pytesseract. ``psm`` 11 = sparse text: finds words anywhere in a scene."""

    name = "tesseract-5"

    def __init__(self, psm: int = 11, lang: str = "eng", min_confidence: float = 0.0) -> None:
        if shutil.which("tesseract") is None:
            raise OcrUnavailable(
                "the tesseract binary is not installed (run scripts/setup.sh or apt-get install tesseract-ocr)"
            )
        try:
            import pytesseract
        except ImportError as exc:
            raise OcrUnavailable("pytesseract is not installed (pip install pytesseract)") from exc
        self._tess = pytesseract
        self.config = f"--psm {psm}"
        self.lang = lang
        self.min_confidence = min_confidence

    def read(self, image: Image.Image) -> list[OcrWord]:
        data = self._tess.image_to_data(
            image.convert("RGB"), lang=self.lang, config=self.config, output_type=self._tess.Output.DICT
        )
        words = []
        for i, text in enumerate(data["text"]):
            text = text.strip()
            confidence = float(data["conf"][i]) / 100.0
            if not text or confidence < self.min_confidence:
                continue
            x, y, w, h = (int(data[key][i]) for key in ("left", "top", "width", "height"))
            words.append(OcrWord(text=text, box=(x, y, x + w, y + h), confidence=max(confidence, 0.0)))
        return words


class RapidOcrEngine:
    """RapidOCR (PP-OCRv4 detection and recognition, and PP-OCR's 0/180 degree classifier) on ONNX Runtime:
    a second reader beside Tesseract, to say how reader-relative a mode label is (docs/synth.md).

    Its weights ship inside the ``rapidocr-onnxruntime`` wheel (nothing is downloaded); install with
    ``pip install -e .[ocr2]`` then ``pip install --no-deps rapidocr-onnxruntime==1.4.4`` (its metadata asks for
    ``opencv-python``, a second OpenCV build beside the project's headless one). It reads lines; each line's
    words get a share of its box by their length. ``threads``: ONNX Runtime's threads per model."""

    name = "rapidocr-1.4"

    def __init__(self, threads: int = 1) -> None:
        try:
            from rapidocr_onnxruntime import RapidOCR
        except ImportError as exc:
            raise OcrUnavailable(
                "rapidocr-onnxruntime is not installed (pip install -e .[ocr2] && "
                "pip install --no-deps rapidocr-onnxruntime==1.4.4)"
            ) from exc
        self._ocr = RapidOCR(intra_op_num_threads=threads, inter_op_num_threads=1)

    def read(self, image: Image.Image) -> list[OcrWord]:
        import numpy as np

        lines, _elapsed = self._ocr(np.asarray(image.convert("RGB")))
        words = []
        for quad, text, score in lines or ():
            xs, ys = [p[0] for p in quad], [p[1] for p in quad]
            x0, x1, y0, y1 = min(xs), max(xs), int(min(ys)), int(max(ys))
            parts, start = text.split(), 0
            step = (x1 - x0) / max(1, sum(len(p) + 1 for p in parts) - 1)
            for part in parts:
                left = x0 + start * step
                words.append(OcrWord(part, (int(left), y0, int(left + len(part) * step), y1), float(score)))
                start += len(part) + 1
        return words


@lru_cache(maxsize=1)
def default_engine() -> OcrEngine:
    """The shared default engine; raises OcrUnavailable with the fix when it cannot run."""
    return TesseractEngine()


def is_available() -> bool:
    try:
        default_engine()
    except OcrUnavailable:
        return False
    return True


def _as_image(image: ImageLike) -> Image.Image:
    if isinstance(image, Image.Image):
        return image
    if isinstance(image, bytes):
        return decode_image(image)
    with Image.open(image) as opened:
        opened.load()
        return opened.copy()


def read_text(image: ImageLike, engine: OcrEngine | None = None) -> list[OcrWord]:
    """Words in ``image`` (a PIL image, a path or PNG/JPEG bytes)."""
    return (engine or default_engine()).read(_as_image(image))


def text_of(image: ImageLike, engine: OcrEngine | None = None) -> str:
    """All words read from ``image``, space-separated in the engine's reading order."""
    return " ".join(word.text for word in read_text(image, engine))


def normalize(text: str) -> str:
    """Lower case, single spaces, no currency signs."""
    return " ".join(re.sub(r"[$€£]", " ", text.lower()).split())


def contains(read: str, needle: str) -> bool:
    """Does the already-read text ``read`` contain ``needle``?

    Both are normalised; spaces inside the needle are optional (OCR spacing is unreliable), and
    a needle that starts or ends with a digit must not continue a longer number (``5.4`` is not
    found in ``15.4`` or ``5.45``).
    """
    target = normalize(needle)
    if not target:
        return False
    body = r"\s*".join(re.escape(token) for token in target.split())
    pattern = r"(?<![0-9.])" * target[0].isdigit() + body + r"(?![0-9])" * target[-1].isdigit()
    return re.search(pattern, normalize(read)) is not None
