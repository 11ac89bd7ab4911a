"""Where tool images enter an episode: the one place they are checked, named and budgeted.

Tools return named bytes (``ToolResult.images``); whatever wrote them (model code in the sandbox) is
untrusted, and decoding is work the bytes do not bound (an 81 KB progressive JPEG took 14 s). So no
image is decoded in the environment's process unless its structure bounds the work
(``vtb_env.sandbox.plain``):

- the vision tool's images arrive ``checked``: its sandbox call decoded each one in a fresh isolated
  child within the call's own timeout and memory limit, converted what the policy should not get as it
  is (``vtb_env.sandbox.image_modes``) and re-encoded it as a plain PNG (or kept the bytes when they
  already were a plain PNG/JPEG); here a walk over the container confirms the plain form, nothing more;
- another tool's images are decoded here when they are plain (the work is bounded by their pixels),
  else checked the same way in the image sandbox (``vtb_env.image_checks``).

The pixel budgets apply from the header before any pixel is decoded; the kept images are named
``transformed_image_<i>.png`` in the tool's order. Whatever the bytes, an image is kept or refused with a
note: admitting never raises. The env and verl's tool adapter both use it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from vtb_env.image_checks import check_in_sandbox
from vtb_env.image_names import tool_image_name
from vtb_env.observation import ImageAsset
from vtb_env.sandbox.image_modes import SHOWN_MODES, for_observation
from vtb_env.sandbox.normalize import DEFAULT_MAX_PIXELS
from vtb_env.sandbox.plain import plain_form
from vtb_env.tasks import ImageDecodeError, decode_image
from vtb_env.tools.base import NamedImage

# Over these budgets an image is refused with a note (the rollout goes on).
MAX_TOOL_PIXELS_PER_CALL = DEFAULT_MAX_PIXELS  # all images one call returns, together (one full-size image)
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
        for image in _checked(images):
            name = tool_image_name(self.next_index)
            form = None if image.refusal is not None else plain_form(image.data)
            refusal = image.refusal
            if refusal is None and (form is None or form.mode not in SHOWN_MODES):
                refusal = "its check did not give a plain image"  # never for the sandbox's own output
            if refusal is None:
                refusal = self._over_budget(form.pixels, call_pixels)
            if refusal is not None:
                notes.append(f"image {image.name} was not shown: {refusal}")
                continue
            call_pixels += form.pixels
            self.pixels += form.pixels
            self.next_index += 1
            if image.name != name:  # names stay unique per episode; say where the tool's file went
                notes.append(f"{image.name} is shown as {name}")
            notes.extend(f"{name}: {note}" for note in image.notes)
            kept.append(ImageAsset(name, image.data))
        return kept, notes

    def _over_budget(self, pixels: int, call_pixels: int) -> str | None:
        if call_pixels + pixels > MAX_TOOL_PIXELS_PER_CALL:
            return f"the images of one call are capped at {MAX_TOOL_PIXELS_PER_CALL} pixels together"
        if self.pixels + pixels > MAX_TOOL_PIXELS_PER_EPISODE:
            return f"tool images of an episode are capped at {MAX_TOOL_PIXELS_PER_EPISODE} pixels"
        return None


def _checked(images: Sequence[NamedImage]) -> list[NamedImage]:
    """Every image checked: plain ones decoded here (bounded work), the rest in the image sandbox."""
    results = [image if image.checked or image.refusal else _checked_here(image) for image in images]
    pending = [i for i, image in enumerate(results) if image is None]
    checked = check_in_sandbox(
        [(images[i].name, images[i].data) for i in pending], MAX_TOOL_PIXELS_PER_CALL, MAX_TOOL_PIXELS_PER_CALL
    )
    for i, result in zip(pending, checked, strict=True):
        results[i] = NamedImage(result.name, result.data, True, result.notes, result.refusal)
    return results


def _checked_here(image: NamedImage) -> NamedImage | None:
    """A plain image decoded once in this process and shown as ``for_observation`` says; None when not plain."""
    form = plain_form(image.data)
    if form is None:
        return None
    if form.pixels > MAX_TOOL_PIXELS_PER_CALL:
        refusal = f"image of {form.width}x{form.height} exceeds {MAX_TOOL_PIXELS_PER_CALL} pixels"
        return replace(image, data=b"", refusal=refusal)
    try:
        decoded = decode_image(image.data)
    except ImageDecodeError as exc:
        return replace(image, data=b"", refusal=str(exc))
    try:
        shown, notes = for_observation(decoded, image.data)
    except (OSError, ValueError) as exc:  # a mode Pillow decodes but cannot convert or re-encode
        return replace(image, data=b"", refusal=f"cannot be shown: {type(exc).__name__}: {exc}")
    finally:
        decoded.close()
    return replace(image, data=shown, checked=True, notes=tuple(notes))
