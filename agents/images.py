"""How images travel to a model: encoding into data URLs under a size policy.

The official toolkit sends base64 JPEG (quality 85); servers cap image sizes (pixels and bytes),
so the policy bounds the longest side and the encoded size, and ``shrunk`` gives the policy to
retry with when a server still rejects an image.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass, replace

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
