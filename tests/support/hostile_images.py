"""Images model code can legally write, in every awkward mode and format Pillow opens (issue 22).

Each is what ``Image.new(...).save('transformed_image_0.png', format=...)`` (or a few bytes by
hand) gives: the file name says PNG, the bytes may be anything. ``REFUSED`` lists the ones no
decoder can show (not an image, or cut short); every other one must reach the policy as an
RGB, RGBA or L image.
"""

from __future__ import annotations

import io
import random
import struct
import zlib
from typing import Any, Callable

from PIL import Image, PngImagePlugin

SIZE = (32, 24)


def _save(image: Image.Image, fmt: str, **options: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def _frames(mode: str = "RGB") -> list[Image.Image]:
    return [Image.new(mode, SIZE, color) for color in ((255, 0, 0), (0, 255, 0), (0, 0, 255))]


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _rgb16_png() -> bytes:
    """16 bits per channel RGB: Pillow cannot write it, so by hand (filter byte 0 per row)."""
    width, height = SIZE
    row = b"\x00" + struct.pack(">HHH", 65535, 32768, 0) * width
    header = struct.pack(">IIBBBBB", width, height, 16, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", zlib.compress(row * height))
        + _png_chunk(b"IEND", b"")
    )


def _huge_text_png() -> bytes:
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", "x" * (8 << 20))  # 8 MiB of tEXt next to 2 KiB of pixels
    return _save(Image.new("RGB", SIZE, "red"), "PNG", pnginfo=info)


def _huge_iccp_png() -> bytes:
    return _save(Image.new("RGB", SIZE, "red"), "PNG", icc_profile=bytes(range(256)) * (16 << 12))  # 16 MiB profile


def _large_iccp_png() -> bytes:
    return _save(Image.new("RGB", SIZE, "red"), "PNG", icc_profile=random.Random(0).randbytes(900 << 10))


def _p_with_transparency() -> bytes:
    image = Image.new("P", SIZE, 1)
    image.putpalette([0, 0, 0, 255, 0, 0] + [0] * 762)
    return _save(image, "PNG", transparency=0)


def _exif_rotated_jpeg() -> bytes:
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90 degrees clockwise to display
    return _save(Image.new("RGB", SIZE, "blue"), "JPEG", exif=exif.tobytes())


def _f_tiff() -> bytes:
    image = Image.new("F", SIZE)
    image.putdata([x * 1000.5 - 7 for x in range(SIZE[0] * SIZE[1])])
    return _save(image, "TIFF")


def _i_tiff() -> bytes:
    image = Image.new("I", SIZE)
    image.putdata([x * 70_000 for x in range(SIZE[0] * SIZE[1])])
    return _save(image, "TIFF")


BUILDERS: dict[str, Callable[[], bytes]] = {
    "apng_3_frames": lambda: _save(_frames()[0], "PNG", save_all=True, append_images=_frames()[1:]),
    "gif_3_frames": lambda: _save(_frames()[0], "GIF", save_all=True, append_images=_frames()[1:]),
    "webp_3_frames": lambda: _save(_frames()[0], "WEBP", save_all=True, append_images=_frames()[1:], lossless=True),
    "png_8mib_text_chunk": _huge_text_png,
    "png_16mib_iccp_chunk": _huge_iccp_png,  # a decompression bomb: Pillow will not read the header
    "png_900kib_iccp_chunk": _large_iccp_png,
    "png_truncated": lambda: _save(Image.effect_noise(SIZE, 64), "PNG")[:-300],
    "jpeg_truncated": lambda: _save(Image.effect_noise((256, 256), 64).convert("RGB"), "JPEG")[:1500],
    "svg_named_png": lambda: b'<svg xmlns="http://www.w3.org/2000/svg" width="32" height="24"><rect width="32"/></svg>',
    "pdf_named_png": lambda: _save(Image.new("RGB", SIZE, "red"), "PDF"),
    "png_16bit_gray": lambda: _save(Image.new("I;16", SIZE, 40_000), "PNG"),
    "png_16bit_rgb": _rgb16_png,
    "png_LA": lambda: _save(Image.new("LA", SIZE, (128, 100)), "PNG"),
    "png_P_transparency": _p_with_transparency,
    "png_1bit": lambda: _save(Image.new("1", SIZE, 1), "PNG"),
    "tiff_CMYK": lambda: _save(Image.new("CMYK", SIZE, (0, 255, 255, 0)), "TIFF"),
    "jpeg_CMYK": lambda: _save(Image.new("CMYK", SIZE, (0, 255, 255, 0)), "JPEG"),
    "tiff_F": _f_tiff,
    "tiff_I": _i_tiff,
    "tiff_LAB": lambda: _save(Image.new("LAB", SIZE, (50, 60, 40)), "TIFF"),
    "tiff_YCbCr": lambda: _save(Image.new("YCbCr", SIZE, (80, 90, 240)), "TIFF"),
    "jpeg_exif_rotated": _exif_rotated_jpeg,
    "bmp_RGB": lambda: _save(Image.new("RGB", SIZE, "green"), "BMP"),
    "ico_3_sizes": lambda: _save(Image.new("RGBA", (64, 64), "green"), "ICO", sizes=[(16, 16), (32, 32), (64, 64)]),
    "ppm_RGB": lambda: _save(Image.new("RGB", SIZE, "yellow"), "PPM"),
}


def _reads_back(name: str) -> bool:
    """Whether this Pillow decodes the file it wrote (Pillow 12, which gradio via openenv-core pins, writes a
    YCbCr TIFF it then calls truncated: the env must refuse that one with a note, not raise)."""
    try:
        with Image.open(io.BytesIO(BUILDERS[name]())) as image:
            image.load()
        return True
    except OSError:
        return False


REFUSED = {"png_16mib_iccp_chunk", "png_truncated", "jpeg_truncated", "svg_named_png", "pdf_named_png"} | {
    name for name in ("tiff_YCbCr",) if not _reads_back(name)
}


def hostile_images() -> dict[str, bytes]:
    """Every hostile image by name (built fresh: a few MB in all)."""
    return {name: build() for name, build in BUILDERS.items()}
