"""Any image Pillow opens, as the policy is shown it: one frame, upright, in RGB, RGBA or L.

Model code may save any mode in any format under a ``.png`` name (CMYK TIFF, 32-bit float,
LAB, 16-bit, palette with transparency, animations, EXIF-rotated JPEG, megabytes of text
chunks). PNG cannot hold most of those modes and processors read them wrongly (a 16-bit image
clips to white), so the observation gets ``shown_image``'s conversion; what it drops (frames,
precision) is said in a note. It runs where untrusted images are decoded: in a sandbox call
(``vtb_env.sandbox.normalize``), and for the dataset's images as the observation encodes them.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageOps

from vtb_env.sandbox.plain import plain_form

SHOWN_MODES = ("RGB", "RGBA", "L")
MAX_EXTRA_BYTES = 64 * 1024  # file bytes beyond the raw pixels: more is metadata, not image
_TO_RGBA = ("LA", "La", "PA", "RGBa")
_WIDE = ("I", "F")
_ORIENTATION = 0x0112  # EXIF tag  # one channel, more than 8 bits: scaled to L


def shown_image(image: Image.Image) -> tuple[Image.Image, list[str]]:
    """``image`` (loaded; its current frame) upright and in a SHOWN_MODE, and notes on what was lost.
    Returns ``image`` itself when nothing had to change."""
    notes = []
    frames = getattr(image, "n_frames", 1)
    if frames > 1:
        notes.append(f"only the first of its {frames} frames is shown")
    upright = image if image.getexif().get(_ORIENTATION, 1) == 1 else ImageOps.exif_transpose(image)
    if image.mode in SHOWN_MODES:
        return upright, notes
    if image.mode == "1":
        return upright.convert("L"), notes
    if image.mode in _TO_RGBA or (image.mode == "P" and "transparency" in image.info):
        return upright.convert("RGBA"), notes
    if image.mode.startswith(_WIDE):
        gray, note = _scaled_to_gray(upright)
        return gray, notes + ([note] if note else [])
    return upright.convert("RGB"), notes  # P, CMYK, YCbCr, LAB, HSV, RGBX: Pillow converts each to RGB


def _scaled_to_gray(image: Image.Image) -> tuple[Image.Image, str | None]:
    """One wide channel (I;16*, I, F) as 8-bit L: 16-bit data by its full range, other values as they are
    when they fit 0..255, else stretched from their own range (said in the note). In float32, in place:
    a 64-Mpx float image costs one extra copy, not several."""
    values = np.array(image, dtype=np.float32)  # a writable copy
    finite = np.isfinite(values)
    low, high = (float(values[finite].min()), float(values[finite].max())) if finite.any() else (0.0, 0.0)
    values[~finite] = 0.0
    del finite
    note = None
    if image.mode.startswith("I;16") or (image.mode == "I" and low >= 0 and 255 < high <= 65535):
        values *= 1 / 257
        note = "its 16-bit values are shown at 8 bits"
    elif low < 0 or high > 255:
        values -= low
        values *= 255 / (high - low)
        note = f"its values from {low:g} to {high:g} are shown scaled to 0..255"
    np.clip(values, 0, 255, out=values)
    return Image.fromarray(np.rint(values, out=values).astype(np.uint8), "L"), note


def _bytes_per_pixel(mode: str) -> int:
    """Bytes of one pixel, uncompressed (an upper bound for sub-byte modes such as 1)."""
    if mode in ("I", "F") or mode.startswith(("I;32", "F;")):
        return 4
    if mode.startswith("I;16"):
        return 2
    return Image.getmodebands(mode)


def for_observation(image: Image.Image, data: bytes) -> tuple[bytes, list[str]]:
    """The bytes to show for ``data`` (decoded as ``image``): ``data`` itself when it already is a compact
    plain PNG/JPEG (``vtb_env.sandbox.plain``) of one upright frame in a SHOWN_MODE, else a PNG of
    ``shown_image``; and the notes."""
    shown, notes = shown_image(image)
    raw_bytes = image.width * image.height * _bytes_per_pixel(image.mode)
    single = getattr(image, "n_frames", 1) == 1
    if shown is image and single and len(data) <= raw_bytes + MAX_EXTRA_BYTES and plain_form(data) is not None:
        return data, notes
    if len(data) > raw_bytes + MAX_EXTRA_BYTES:
        notes.append(f"its {len(data) - raw_bytes} bytes of metadata are dropped")
    buffer = io.BytesIO()
    profile = image.info.get("icc_profile")  # colours stay right; an oversized profile is metadata like the rest
    keep = profile if profile and len(profile) <= MAX_EXTRA_BYTES and shown.mode == image.mode else None
    shown.save(buffer, format="PNG", compress_level=1, icc_profile=keep)
    return buffer.getvalue(), notes
