"""How images travel to a model: encoding into data URLs under a size policy.

The official toolkit sends base64 JPEG (quality 85); servers cap image sizes (pixels and bytes),
so the policy bounds the longest side and the encoded size, and ``shrunk`` gives the policy to
retry with when a server still rejects an image.

Cost: a ``data:`` URL is measured from its length and its header bytes (``data_url_info``), never
by decoding its pixels, and ``EncodedImages`` keeps what was encoded, so an image is encoded at
most once per policy while it stays in the dialogue (every step of an episode resends it).
"""

from __future__ import annotations

import base64
import binascii
import io
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Callable, Hashable

from PIL import Image


@dataclass(frozen=True)
class ImagePolicy:
    """Bounds on every image sent: longest side in pixels, encoded bytes, and the encoding."""

    max_side: int | None = None
    max_bytes: int | None = 8_000_000
    format: str = "JPEG"  # "JPEG" (official, quality 85) or "PNG" (lossless)
    jpeg_quality: int = 85
    min_side: int = 32  # never shrink below this: past it the image carries nothing

    def shrunk(self, largest_side_sent: int, factor: float = 0.5) -> "ImagePolicy | None":
        """The policy for a retry after a rejection, or None when images cannot get smaller."""
        side = int(min(self.max_side or largest_side_sent, largest_side_sent) * factor)
        if side < self.min_side:
            return None
        return replace(self, max_side=side)


def fit_image(image: Image.Image, policy: ImagePolicy) -> Image.Image:
    """The image converted to an encodable mode and resized so its longest side fits the policy."""
    if policy.format.upper() == "JPEG" and image.mode != "RGB":
        image = image.convert("RGB")
    elif image.mode not in ("RGB", "RGBA", "L", "LA"):
        image = image.convert("RGBA" if "A" in image.getbands() else "RGB")
    if policy.max_side and max(image.size) > policy.max_side:
        scale = policy.max_side / max(image.size)
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        image = image.resize(size, Image.Resampling.LANCZOS)
    return image


def encode_image(image: Image.Image, policy: ImagePolicy) -> tuple[bytes, tuple[int, int]]:
    """Encoded bytes within ``policy`` (shrinking by 3/4 steps until under ``max_bytes``) and the size sent."""
    image = fit_image(image, policy)
    while True:
        buffer = io.BytesIO()
        if policy.format.upper() == "JPEG":
            image.save(buffer, format="JPEG", quality=policy.jpeg_quality)
        else:
            image.save(buffer, format=policy.format.upper())
        data = buffer.getvalue()
        if policy.max_bytes is None or len(data) <= policy.max_bytes or max(image.size) <= policy.min_side:
            return data, image.size
        smaller = (max(1, image.width * 3 // 4), max(1, image.height * 3 // 4))
        image = image.resize(smaller, Image.Resampling.LANCZOS)


def image_data_url(image: Image.Image, policy: ImagePolicy) -> tuple[str, tuple[int, int]]:
    """A ``data:`` URL for the image under ``policy``, and the pixel size it was sent at."""
    data, size = encode_image(image, policy)
    mime = "image/jpeg" if policy.format.upper() == "JPEG" else f"image/{policy.format.lower()}"
    return f"data:{mime};base64,{base64.b64encode(data).decode()}", size


HEADER_B64_CHARS = 1 << 16  # 48 KiB of image bytes: enough for PNG/GIF/WebP headers and most JPEG headers


def data_url_info(url: str) -> tuple[int, tuple[int, int]]:
    """(encoded bytes, pixel size) of a base64 ``data:`` URL, from its length and header only.

    Raises ``ValueError`` when the URL holds no readable image header.
    """
    payload = url.split(",", 1)[1]
    padding = payload[-2:].count("=")
    nbytes = len(payload) * 3 // 4 - padding
    for chars in (HEADER_B64_CHARS, len(payload)):  # the header, else (a JPEG with a large EXIF block) all bytes
        try:
            head = base64.b64decode(payload[: chars - chars % 4] if chars < len(payload) else payload, validate=True)
            with Image.open(io.BytesIO(head)) as image:  # parses the header; pixels are never decoded
                return nbytes, image.size
        except (binascii.Error, OSError, ValueError, SyntaxError):
            if chars >= len(payload):
                break
    raise ValueError("the data URL holds no readable image")


class EncodedImages:
    """What was already encoded, keyed by (image identity, policy), bounded in bytes (LRU).

    Shared by the threads of one agent. A PIL image is keyed by ``id`` and held by the entry, so
    its id cannot be reused while cached; a data URL is keyed by the string itself (the env hands
    the same string object every step, whose hash Python computes once).
    """

    def __init__(self, max_bytes: int = 512 << 20):
        self.max_bytes = max_bytes
        self.hits = self.misses = 0
        self._entries: OrderedDict[Hashable, tuple[Any, str, tuple[int, int], int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(
        self, key: Hashable, source: Any, make: Callable[[], tuple[str, tuple[int, int]]]
    ) -> tuple[str, tuple[int, int]]:
        """The cached (url, size) of ``key``, else ``make()``'s, cached (``source`` is held with it)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return entry[1], entry[2]
        url, size = make()  # outside the lock: encodes of different images run in parallel
        cost = len(url) + (len(source) if isinstance(source, str) and source is not url else 0)
        with self._lock:
            self.misses += 1
            if key not in self._entries and cost <= self.max_bytes:
                self._entries[key] = (source, url, size, cost)
                self._bytes += cost
                while self._bytes > self.max_bytes:
                    _, (_, _, _, old) = self._entries.popitem(last=False)
                    self._bytes -= old
        return url, size
