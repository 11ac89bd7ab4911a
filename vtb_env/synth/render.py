"""Fonts and drawing primitives shared by all scenes.

The font ships with a pinned PyPI wheel (``font-source-sans-pro==0.0.1``), so no system font
is assumed, and text is laid out with Pillow's BASIC engine (no raqm/HarfBuzz, whose presence
differs between machines). PNGs are written with fixed settings; the pixel content is
identical for a seed on any machine (PNG bytes also match when Pillow's zlib does).
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

Box = tuple[int, int, int, int]
RGB = tuple[int, int, int]


def font_file(weight: str = "Regular") -> str:
    """Path of a Source Sans Pro TTF (``Regular``, ``Semibold`` or ``Bold``)."""
    try:
        import font_source_sans_pro
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise RuntimeError("font-source-sans-pro is not installed: pip install font-source-sans-pro==0.0.1") from exc
    path = Path(font_source_sans_pro.font_directory) / f"SourceSansPro-{weight}.ttf"
    if not path.is_file():
        raise RuntimeError(f"font file missing: {path}")
    return str(path)


@lru_cache(maxsize=256)
def font(px: int, bold: bool = False) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(font_file("Bold" if bold else "Regular"), int(px), layout_engine=ImageFont.Layout.BASIC)


def text_box(draw: ImageDraw.ImageDraw, xy: tuple[int, int], text: str, px: int, fill: RGB, bold: bool = False) -> Box:
    """Draw ``text`` with its top-left at ``xy``; return the ink box."""
    draw.text(xy, text, font=font(px, bold), fill=fill)
    return tuple(int(v) for v in draw.textbbox(xy, text, font=font(px, bold)))  # type: ignore[return-value]


def text_width(text: str, px: int, bold: bool = False) -> int:
    left, _, right, _ = font(px, bold).getbbox(text)
    return int(right - left)


def png_bytes(image: Image.Image, compress_level: int = 6) -> bytes:
    """PNG with fixed settings and no metadata."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=compress_level, optimize=False)
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
