"""Images made plain inside the sandbox: decoded, converted, compared with the inputs and re-encoded.

Decoding an image is work its bytes do not bound (``vtb_env.sandbox.plain``): an 81 KB progressive
JPEG took 14 s. So untrusted images are decoded only here, in a child of the zygote isolated like
every call's child (landlock, seccomp, slot uid, ``RLIMIT_AS``), never in the environment's process:

- after a call with ``images=ImageRequest(...)`` (the vision tool), once the code's child and every
  process it left are gone, the server hands the image files the code wrote, and the call's input
  files, to a fresh *checking* child with what is left of the call's timeout (at least
  ``MIN_CHECK_S``); the model's code never runs in it and cannot reach it;
- ``Sandbox.normalize`` does the same for images from anywhere else (a dataset, another tool), with a
  timeout of its own.

For each image, in the request's order: the header against the pixel budgets, one full decode, the
picture as the policy is shown it (``image_modes.for_observation``: the bytes themselves when they are a
plain PNG/JPEG of one upright frame in a shown mode, else a PNG), and whether its pixels repeat an input's
exactly (``copy_of``). Each result is written as soon as it is ready, so an image that is still decoding
when the time is up costs only itself: the server refuses it with a note.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Mapping, Sequence

from PIL import Image

from vtb_env.sandbox import protocol
from vtb_env.sandbox.image_modes import for_observation, shown_image
from vtb_env.sandbox.plain import plain_form

MIN_CHECK_S = 0.5  # the checking child's time when the code used up (nearly) all of the call's
DEFAULT_MAX_PIXELS = 64_000_000


@dataclass(frozen=True)
class ImageRequest:
    """Which files a call returns as images, in what order, and their pixel budgets (checked from the header)."""

    suffixes: tuple[str, ...]  # lower-case file name endings, e.g. (".png", ".jpg")
    order: str | None = None  # a regex: names it matches come first, by the number of its first group, then by name
    max_pixels: int = DEFAULT_MAX_PIXELS  # one image
    max_call_pixels: int = DEFAULT_MAX_PIXELS  # the call's images together

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ImageRequest":
        return cls(**{**data, "suffixes": tuple(data["suffixes"])})

    def select(self, names: Sequence[str]) -> list[str]:
        """The image files among ``names``, in the request's order."""
        pattern = re.compile(self.order) if self.order else None

        def key(name: str) -> tuple[int, int, str]:
            match = pattern.fullmatch(name) if pattern else None
            return (0, int(match.group(1)), name) if match else (1, 0, name)

        return sorted((name for name in names if name.lower().endswith(self.suffixes)), key=key)


@dataclass(frozen=True)
class CheckedImage:
    """One image after the check: plain bytes to show, or why it is not shown (``data`` is then empty)."""

    name: str
    data: bytes = field(default=b"", repr=False)
    notes: tuple[str, ...] = ()  # what showing it changed: frames dropped, mode converted, metadata dropped
    refusal: str | None = None
    copy_of: str | None = None  # the input whose pixels it repeats exactly (a new file, not new work)


def write_request(
    stream: BinaryIO, request: ImageRequest, images: Sequence[tuple[str, bytes]], inputs: Mapping[str, bytes]
) -> None:
    """The checking child's whole input, framed like the pool's messages; only the inputs an image could
    repeat go with it (when every image is plain its size is known without decoding)."""
    inputs = _comparable(images, inputs)
    header = {
        "images": [name for name, _ in images],
        "inputs": list(inputs),
        "max_pixels": request.max_pixels,
        "max_call_pixels": request.max_call_pixels,
    }
    protocol.send(stream, header, [data for _, data in images] + list(inputs.values()))


def _comparable(images: Sequence[tuple[str, bytes]], inputs: Mapping[str, bytes]) -> dict[str, bytes]:
    """The inputs whose size matches an image's, either way round (EXIF may turn it); all when an image is
    not plain (its size is known only once decoded)."""
    forms = [plain_form(data) for _, data in images]
    if any(form is None for form in forms):
        return dict(inputs)
    sizes = {size for f in forms for size in ((f.width, f.height), (f.height, f.width))}
    comparable = {}
    for name, data in inputs.items():
        form = plain_form(data)
        if form is None or (form.width, form.height) in sizes:
            comparable[name] = data
    return comparable


def read_results(data: bytes, names: Sequence[str], unfinished: str) -> list[CheckedImage]:
    """The child's results for ``names`` (complete messages only); an image without one is refused with
    ``unfinished``."""
    stream, results = io.BytesIO(data), {}
    while True:
        try:
            header, (blob,) = protocol.receive(stream)
        except (EOFError, ValueError):
            break
        results[header["name"]] = CheckedImage(
            header["name"], blob, tuple(header["notes"]), header["refusal"], header["copy_of"]
        )
    return [results.get(name) or CheckedImage(name, refusal=unfinished) for name in names]


def run_in_child(request: bytes, out_fd: int) -> int:
    """The checking child's work (trusted code on untrusted bytes): one result message per image on ``out_fd``."""
    header, blobs = protocol.receive(io.BytesIO(request))
    names, input_names = header["images"], header["inputs"]
    inputs = _Inputs(dict(zip(input_names, blobs[len(names) :], strict=True)))
    out = io.FileIO(out_fd, "w", closefd=False)
    budgets = _Budgets(header["max_pixels"], header["max_call_pixels"])
    for name, data in zip(names, blobs, strict=False):
        result = _check(name, data, budgets, inputs)
        protocol.send(
            out,
            {"name": name, "notes": list(result.notes), "refusal": result.refusal, "copy_of": result.copy_of},
            [result.data],
        )
    return 0


@dataclass
class _Budgets:
    max_pixels: int
    max_call_pixels: int
    spent: int = 0

    def refusal(self, width: int, height: int) -> str | None:
        if self.spent + width * height > self.max_call_pixels:
            return f"the images of one call are capped at {self.max_call_pixels} pixels together"
        if width * height > self.max_pixels:
            return f"image of {width}x{height} exceeds {self.max_pixels} pixels"
        return None


def _check(name: str, data: bytes, budgets: _Budgets, inputs: "_Inputs") -> CheckedImage:
    """One image, from its header to the bytes to show."""
    try:
        image = Image.open(io.BytesIO(data))
    except Exception as exc:  # Pillow raises many types for bad data
        return CheckedImage(name, refusal=f"cannot read the image header: {_reason(exc)}")
    refusal = budgets.refusal(*image.size)
    if refusal is not None:
        return CheckedImage(name, refusal=refusal)
    try:
        image.load()
        shown_bytes, notes = for_observation(image, data)
        copy_of = inputs.repeated_by(shown_image(image)[0])
    except Exception as exc:
        return CheckedImage(name, refusal=f"cannot decode image: {_reason(exc)}")
    budgets.spent += image.width * image.height
    return CheckedImage(name, shown_bytes, tuple(notes), None, copy_of)


class _Inputs:
    """The call's input images, each decoded only when an output has its size (and then once)."""

    def __init__(self, data: Mapping[str, bytes]):
        self._data = dict(data)
        self._sizes: dict[str, tuple[int, int] | None] = {}
        self._shown: dict[str, Any] = {}

    def repeated_by(self, shown: Any) -> str | None:
        """The name of the input whose shown pixels ``shown`` repeats exactly, or None."""
        for name in self._data:
            if self._size(name) != shown.size:
                continue
            if name not in self._shown:
                try:
                    self._shown[name] = shown_image(_loaded(self._data[name]))[0]
                except Exception:
                    self._shown[name] = None
            other = self._shown[name]
            if other is not None and other.size == shown.size and other.mode == shown.mode:
                if other.tobytes() == shown.tobytes():
                    return name
        return None

    def _size(self, name: str) -> tuple[int, int] | None:
        if name not in self._sizes:
            try:
                with Image.open(io.BytesIO(self._data[name])) as header:
                    self._sizes[name] = header.size
            except Exception:
                self._sizes[name] = None
        return self._sizes[name]


def _loaded(data: bytes) -> Any:
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


def _reason(exc: BaseException) -> str:
    text = re.sub(r" <_io\.BytesIO object at 0x[0-9a-f]+>", "", str(exc))  # Pillow names the buffer
    return f"{type(exc).__name__}: {text}" if isinstance(exc, MemoryError) or not text else text


def unfinished_reason(timed_out: bool, exit_code: int, stderr: str) -> str:
    """Why the checking child gave no result for an image."""
    if timed_out:
        return "decoding it did not finish within the call's time limit"
    last = stderr.strip().splitlines()[-1:] or [f"exit code {exit_code}"]
    return f"its decoder failed ({last[0][:200]})"
