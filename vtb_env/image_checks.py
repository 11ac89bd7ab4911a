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
