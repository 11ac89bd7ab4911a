"""Fonts and drawing primitives shared by all scenes.

Every typeface ships with a pinned PyPI package (``FACES``), so no system font is assumed, and text
is laid out with Pillow's BASIC engine (no raqm/HarfBuzz, whose presence differs between machines).
Generators v1 and v2 draw everything in Source Sans Pro; v3 picks a face per pair and draws a
picture inside ``with typeface(name):``. PNGs are written with fixed settings; the pixel content is
identical for a seed on any machine (PNG bytes also match when Pillow's zlib does).
"""

from __future__ import annotations

import hashlib
import importlib
import io
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterator

import numpy as np
from PIL import Image, ImageDraw, ImageFont

Box = tuple[int, int, int, int]
RGB = tuple[int, int, int]


@dataclass(frozen=True)
class Face:
    """A typeface from a pinned font package: its module and its regular and bold file names."""

    module: str
    package: str  # pip requirement, for the error message
    regular: str
    bold: str
    look: str  # sans | serif | humanist | geometric (how it reads, for the docs and metadata)


FACES: dict[str, Face] = {
    "source-sans": Face(
        "font_source_sans_pro",
        "font-source-sans-pro==0.0.1",
        "SourceSansPro-Regular.ttf",
        "SourceSansPro-Bold.ttf",
        "sans",
    ),
    "source-serif": Face(
        "font_source_serif_pro",
        "font-source-serif-pro==0.0.1",
        "SourceSerifPro-Regular.ttf",
        "SourceSerifPro-Bold.ttf",
        "serif",
    ),
    "roboto": Face("font_roboto", "font-roboto==0.0.1", "Roboto-Regular.ttf", "Roboto-Bold.ttf", "sans"),
    "lato": Face("font_lato", "font-lato==0.1.0", "Lato-Regular.ttf", "Lato-Bold.ttf", "humanist"),
    "caladea": Face("font_caladea", "font-caladea==0.0.2", "Caladea-Regular.ttf", "Caladea-Bold.ttf", "serif"),
    "manrope": Face("font_manrope", "font-manrope==0.0.2", "Manrope-Regular.ttf", "Manrope-Bold.ttf", "geometric"),
}
DEFAULT_FACE = "source-sans"  # generators v1 and v2
_FACE: ContextVar[str] = ContextVar("vtb_synth_face", default=DEFAULT_FACE)


@contextmanager
def typeface(name: str) -> Iterator[None]:
    """Draw every text inside the block in ``name`` (a ``FACES`` key)."""
    if name not in FACES:
        raise ValueError(f"unknown typeface {name!r}; choose from {sorted(FACES)}")
    token = _FACE.set(name)
    try:
        yield
    finally:
        _FACE.reset(token)


def font_file(weight: str = "Regular", face: str = DEFAULT_FACE) -> str:
    """Path of a face's TTF (``weight``: ``Regular`` or ``Bold``)."""
    spec = FACES[face]
    try:
        module = importlib.import_module(spec.module)
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise RuntimeError(f"{spec.package} is not installed: pip install {spec.package}") from exc
    path = Path(module.font_directory) / (spec.bold if weight == "Bold" else spec.regular)
    if not path.is_file():
        raise RuntimeError(f"font file missing: {path}")
    return str(path)


@lru_cache(maxsize=512)
def _font(face: str, px: int, bold: bool) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(
        font_file("Bold" if bold else "Regular", face), int(px), layout_engine=ImageFont.Layout.BASIC
    )


def font(px: int, bold: bool = False) -> ImageFont.FreeTypeFont:
    """The current typeface (``typeface``; Source Sans Pro outside any block) at ``px`` pixels."""
    return _font(_FACE.get(), int(px), bool(bold))


def text_box(draw: ImageDraw.ImageDraw, xy: tuple[int, int], text: str, px: int, fill: RGB, bold: bool = False) -> Box:
    """Draw ``text`` with its top-left at ``xy``; return the ink box."""
    draw.text(xy, text, font=font(px, bold), fill=fill)
    return tuple(int(v) for v in draw.textbbox(xy, text, font=font(px, bold)))  # type: ignore[return-value]


def text_width(text: str, px: int, bold: bool = False) -> int:
    left, _, right, _ = font(px, bold).getbbox(text)
    return int(right - left)


def png_bytes(image: Image.Image, compress_level: int = 6, strategy: int = -1, opencv: bool = False) -> bytes:
    """PNG with fixed settings and no metadata; ``strategy``: zlib's (-1 Pillow's default, 3 run-length).

    ``opencv`` (v3, an RGB image): OpenCV's libpng with the run-length strategy and the Paeth filter on every
    row: the same pixels, files as small as Pillow's run-length ones, 35% less CPU (Pillow tries a filter per row).
    """
    if opencv:
        import cv2  # a core dependency, needed only here

        bgr = cv2.cvtColor(np.asarray(image.convert("RGB")), cv2.COLOR_RGB2BGR)
        params = [cv2.IMWRITE_PNG_STRATEGY, cv2.IMWRITE_PNG_STRATEGY_RLE, cv2.IMWRITE_PNG_FILTER]
        return cv2.imencode(".png", bgr, [*params, cv2.IMWRITE_PNG_FILTER_PAETH])[1].tobytes()
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=compress_level, compress_type=strategy, optimize=False)
    return buffer.getvalue()


def pixel_hash(image: Image.Image) -> str:
    """Hash of the decoded pixels (independent of the PNG encoder)."""
    array = np.asarray(image.convert("RGB"))
    return hashlib.sha256(array.tobytes() + str(array.shape).encode()).hexdigest()


@dataclass(frozen=True)
class Panel:
    """A rendered document panel and where its key facts are (``boxes[label]`` = row box)."""

    image: Image.Image
    boxes: dict[str, Box]
    background: RGB
