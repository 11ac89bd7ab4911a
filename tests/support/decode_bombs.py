"""Images whose *decoding* is the attack (issue 32): files that are cheap to write and slow to decode.

Each bomb is model code (within the tool's 5,000 characters) that writes ``transformed_image_0.png``:
a progressive JPEG decodes every scan over the whole picture, so repeating its last scan multiplies the
work and barely the bytes (16 Mpx, 600 scans: ~110 KB and ~15-20 s in Pillow); the same with arithmetic
coding (written outside with libjpeg-turbo's ``jpegtran`` and embedded, the sandbox cannot run it); an
Adam7-interlaced PNG; APNG, GIF and WebP with thousands of frames (Pillow walks them to count frames); a
TIFF cut into one strip per row. ``bomb_bytes`` runs the same code here, for the cost of decoding it
in-process (what the environment did before). Sizes are parameters: tests use small ones,
``scripts/bench_tool_images.py`` the full ones.
"""

from __future__ import annotations

import base64
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zlib

from PIL import Image

MAX_CODE_CHARS = 5000
OUTPUT = "transformed_image_0.png"

_REPEAT_LAST_SCAN = (
    "last = data.rfind(b'\\xff\\xda')\n"
    f"open({OUTPUT!r}, 'wb').write(data[:-2] + data[last:-2] * {{repeats}} + b'\\xff\\xd9')\n"
)
PROGRESSIVE_JPEG = (
    "import io\nfrom PIL import Image\nbuffer = io.BytesIO()\n"
    "Image.new('RGB', ({side}, {side}), (128, 64, 32)).save(buffer, 'JPEG', progressive=True, quality=75)\n"
    "data = buffer.getvalue()\n" + _REPEAT_LAST_SCAN
)
INTERLACED_PNG = (  # Pillow cannot write Adam7: the passes by hand, noise so the file stays large
    "import struct, zlib\nfrom PIL import Image\nside = {side}\n"
    "rows = Image.effect_noise((side, side), 64).tobytes()\nraw = bytearray()\n"
    "for x0, y0, dx, dy in ((0,0,8,8), (4,0,8,8), (0,4,4,8), (2,0,4,4), (0,2,2,4), (1,0,2,2), (0,1,1,2)):\n"
    "    for y in range(y0, side, dy):\n"
    "        line = rows[y * side:(y + 1) * side][x0::dx]\n"
    "        if line:\n"
    "            raw += b'\\x00' + line\n"
    "def chunk(kind, data):\n"
    "    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))\n"
    "head = struct.pack('>IIBBBBB', side, side, 8, 0, 0, 0, 1)\n"
    f"open({OUTPUT!r}, 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', head)"
    " + chunk(b'IDAT', zlib.compress(bytes(raw), 1)) + chunk(b'IEND', b''))\n"
)
MANY_FRAMES = (
    "from PIL import Image\n"
    "frames = [Image.new('RGB', (2, 2), (i % 256, i // 256 % 256, 0)) for i in range({frames})]\n"
    f"frames[0].save({OUTPUT!r}, format='{{fmt}}', save_all=True, append_images=frames[1:], duration=10{{options}})\n"
)
STRIP_PER_ROW_TIFF = (
    "from PIL import Image\n"
    f"Image.new('L', ({{side}}, {{side}}), 7).save({OUTPUT!r}, format='TIFF', tiffinfo={{{{278: 1}}}})\n"
)


def progressive_jpeg(side: int = 4000, repeats: int = 600) -> str:
    """A flat RGB progressive JPEG of ``side``² pixels whose last scan is repeated ``repeats`` times."""
    return PROGRESSIVE_JPEG.format(side=side, repeats=repeats)


def arithmetic_jpeg(side: int = 4000, repeats: int = 600) -> str | None:
    """The same with arithmetic coding (SOF10), its one-scan base embedded; None without ``jpegtran``."""
    if shutil.which("jpegtran") is None:
        return None
    buffer = tempfile.SpooledTemporaryFile()
    Image.new("RGB", (side, side), (128, 64, 32)).save(buffer, "JPEG", quality=75)
    buffer.seek(0)
    base = subprocess.run(
        ["jpegtran", "-arithmetic", "-progressive"], input=buffer.read(), capture_output=True, check=True
    ).stdout
    packed = base64.b64encode(zlib.compress(base, 9)).decode()
    return f"import base64, zlib\ndata = zlib.decompress(base64.b64decode('{packed}'))\n" + _REPEAT_LAST_SCAN.format(
        repeats=repeats
    )


def interlaced_png(side: int = 4000) -> str:
    return INTERLACED_PNG.format(side=side)


def many_frames(fmt: str, frames: int = 20_000) -> str:
    """An animation of ``frames`` 2x2 frames (``fmt``: PNG for APNG, GIF, WEBP)."""
    return MANY_FRAMES.format(frames=frames, fmt=fmt, options=", lossless=True" if fmt == "WEBP" else "")


def strip_per_row_tiff(side: int = 4000) -> str:
    return STRIP_PER_ROW_TIFF.format(side=side)


def bombs(scale: float = 1.0) -> dict[str, str]:
    """Every bomb's code, sized by ``scale`` (1.0: the bench's full size); the arithmetic one needs jpegtran."""
    side, count = max(16, int(4000 * scale)), max(8, int(20_000 * scale))
    codes = {
        "progressive_jpeg_600_scans": progressive_jpeg(side),
        "arithmetic_jpeg_600_scans": arithmetic_jpeg(side),
        "interlaced_png": interlaced_png(side),
        "apng_frames": many_frames("PNG", count),
        "gif_frames": many_frames("GIF", count),
        "webp_frames": many_frames("WEBP", count),
        "tiff_strip_per_row": strip_per_row_tiff(side),
    }
    return {name: code for name, code in codes.items() if code is not None}


def decode_seconds(data: bytes) -> float:
    """Seconds Pillow takes here to decode ``data`` whole (what an unbounded consumer would spend)."""
    start = time.perf_counter()
    Image.open(io.BytesIO(data)).load()
    return time.perf_counter() - start


def calibrated_progressive_jpeg(
    min_decode_s: float, side: int = 1600, repeats: int = 500, max_repeats: int = 200_000
) -> tuple[str, float]:
    """A progressive JPEG bomb that decodes for more than ``min_decode_s`` on *this* machine, and its decode time.

    Decode time grows linearly with the repeated scans, so each try scales ``repeats`` by the measured shortfall
    (with a margin) instead of assuming a slow machine: a fixed bomb that is a bomb on one host decodes within
    the bound on a faster one, and the test meant to show the bound would then show nothing.
    """
    while True:
        code = progressive_jpeg(side=side, repeats=repeats)
        decode_s = decode_seconds(bomb_bytes(code))
        if decode_s > min_decode_s:
            return code, decode_s
        if repeats >= max_repeats:
            raise RuntimeError(f"{repeats} repeated scans decode in {decode_s:.2f} s, not over {min_decode_s} s")
        repeats = min(max_repeats, max(repeats * 2, int(repeats * 1.5 * min_decode_s / max(decode_s, 1e-3))))


def bomb_bytes(code: str) -> bytes:
    """Run a bomb's code here (a Python process in a temporary directory) and return the file it writes."""
    with tempfile.TemporaryDirectory() as directory:
        subprocess.run([sys.executable, "-c", code], cwd=directory, check=True)
        with open(os.path.join(directory, OUTPUT), "rb") as handle:
            return handle.read()
