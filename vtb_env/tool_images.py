"""Where tool images enter an episode: the one place they are checked, named and decoded.

Tools return raw named bytes (``ToolResult.images``); whatever wrote them (model code in the
sandbox) is untrusted. ``ToolImages.admit`` reads each header first and applies the pixel budgets
before any pixel is decoded, then decodes once to prove the bytes are an image, converts what the
policy should not get as it is (any mode or format Pillow opens: ``vtb_env.image_modes``), and
names the kept ones ``transformed_image_<i>.png`` in the tool's order. Whatever the bytes, an image
is kept or refused with a note: admitting never raises. The env and verl's tool adapter both use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from vtb_env.image_modes import for_observation
from vtb_env.image_names import tool_image_name
from vtb_env.observation import ImageAsset
from vtb_env.tasks import ImageDecodeError, decode_image, image_size
from vtb_env.tools.base import NamedImage

# Over these budgets an image is refused with a note (the rollout goes on).
MAX_TOOL_PIXELS_PER_CALL = 64_000_000  # all images one call returns, together (one full-size image)
MAX_TOOL_PIXELS_PER_EPISODE = 256_000_000  # four full-size tool images


@dataclass
class ToolImages:
    """One episode's tool images so far: the next free index and the pixels kept."""

    next_index: int = 0  # the paper counts transformed images from 0
    pixels: int = 0

    def admit(self, images: Sequence[NamedImage]) -> tuple[list[ImageAsset], list[str]]:
        """Check, name and keep one call's images: the kept assets in order, and notes on the images
        refused (``image X was not shown: <reason>``), renamed (``X is shown as Y``) or converted
        (``X: only the first of its 3 frames is shown``)."""
        kept: list[ImageAsset] = []
        notes: list[str] = []
        call_pixels = 0
        for image in images:
            name = tool_image_name(self.next_index)
            try:
                width, height = image_size(image.data)
                refusal = self._over_budget(width * height, call_pixels)
                if refusal is None:
                    asset, conversions = _shown_asset(name, image.data)
            except ImageDecodeError as exc:
                refusal = str(exc)
            if refusal is not None:
                notes.append(f"image {image.name} was not shown: {refusal}")
                continue
            call_pixels += width * height
            self.pixels += width * height
            self.next_index += 1
            if image.name != name:  # names stay unique per episode; say where the tool's file went
                notes.append(f"{image.name} is shown as {name}")
            notes.extend(f"{name}: {conversion}" for conversion in conversions)
            kept.append(asset)
        return kept, notes

    def _over_budget(self, pixels: int, call_pixels: int) -> str | None:
        if call_pixels + pixels > MAX_TOOL_PIXELS_PER_CALL:
            return f"the images of one call are capped at {MAX_TOOL_PIXELS_PER_CALL} pixels together"
        if self.pixels + pixels > MAX_TOOL_PIXELS_PER_EPISODE:
            return f"tool images of an episode are capped at {MAX_TOOL_PIXELS_PER_EPISODE} pixels"
        return None


def _shown_asset(name: str, data: bytes) -> tuple[ImageAsset, list[str]]:
    """The one full decode (raises ImageDecodeError), then the image as the policy is shown it; only
    the bytes are kept (the observation's PIL image reopens them lazily)."""
    image = decode_image(data)
    try:
        shown, notes = for_observation(image, data)
    except (OSError, ValueError) as exc:  # a mode or codec Pillow decodes but cannot convert or re-encode
        raise ImageDecodeError(f"cannot be shown: {type(exc).__name__}: {exc}") from exc
    finally:
        image.close()
    return ImageAsset(name, shown), notes
