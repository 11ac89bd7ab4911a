"""Untrusted images checked outside this process: decoded, converted and re-encoded in the image sandbox.

Decoding is the one step whose work image bytes do not bound (``vtb_env.sandbox.plain``). Bytes whose
structure is plain decode here under a bound (pixels times passes); anything else (a progressive JPEG
with hundreds of scans, GIF, TIFF, WebP, APNG...) is decoded only in a child of the image sandbox
(``Sandbox.normalize``), within ``CHECK_TIMEOUT_S`` and the sandbox's memory limit, and comes back as a
plain PNG/JPEG in a shown mode, or refused with the reason.
"""

from __future__ import annotations

from typing import Sequence

from vtb_env.sandbox import CheckedImage, ImageRequest, SandboxError, shared_sandbox
from vtb_env.sandbox.plain import plain_form
from vtb_env.tasks import MAX_IMAGE_PIXELS, ImageDecodeError, decode_image

CHECK_TIMEOUT_S = 10.0  # one call of Sandbox.normalize: a 64 Mpx image decodes and re-encodes well within it


def check_in_sandbox(
    images: Sequence[tuple[str, bytes]], max_pixels: int, max_call_pixels: int, timeout_s: float = CHECK_TIMEOUT_S
) -> list[CheckedImage]:
    """``images`` (name, bytes) checked in the image sandbox, in order; never raises (a sandbox failure
    refuses them all, with the reason)."""
    if not images:
        return []
    request = ImageRequest((), max_pixels=max_pixels, max_call_pixels=max_call_pixels)
    try:
        return shared_sandbox("image").normalize(images, request, timeout_s=timeout_s)
    except SandboxError as exc:
        return [CheckedImage(name, refusal=f"the image sandbox failed: {exc}") for name, _ in images]


def shown_dataset_image(data: bytes) -> bytes:
    """A dataset image's bytes as the dialogue shows them: the bytes themselves when their structure is plain
    (a consumer's decode is bounded by the pixels), else the image checked and re-encoded in the sandbox.
    Raises ImageDecodeError when it cannot be shown."""
    if plain_form(data) is not None:
        return data
    (checked,) = check_in_sandbox([("image", data)], MAX_IMAGE_PIXELS, MAX_IMAGE_PIXELS)
    if checked.refusal is not None:
        raise ImageDecodeError(f"cannot decode image: {checked.refusal}")
    return checked.data


def check_dataset_image(data: bytes) -> None:
    """Decode a dataset image once to prove it can be shown: here when plain (bounded work), else in the
    sandbox (``shown_dataset_image``). Raises ImageDecodeError with the reason."""
    if plain_form(data) is None:
        shown_dataset_image(data)
    else:
        decode_image(data).close()
