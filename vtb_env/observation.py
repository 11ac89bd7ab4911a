"""The dialogue an episode shows the policy: OpenAI-format messages plus the images as PIL.

Images are ``ImageAsset``s: bytes read once, and the PIL image, hash and base64 data URL made
on first use and cached, so a long episode never re-encodes an image. The dialogue stores image
parts as references to assets; ``Dialogue.observation()`` turns them into OpenAI parts
(``{"type": "image_url", "image_url": {"url": "data:..."}}``) or, with ``image_parts="name"``,
into ``{"type": "image", "name": "image_1.png"}`` placeholders for local processors (no base64 at
all). Each image part is preceded by a text part ``[image_1.png]`` naming it, and
``observation["images"][i]`` is the image of the i-th image part.
"""

from __future__ import annotations

import base64
import hashlib
import io
import threading
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Iterable, Mapping

from PIL import Image

from vtb_env.sandbox.image_modes import shown_image
from vtb_env.tasks import MAX_IMAGE_PIXELS, ImageDecodeError
from vtb_env.tools.base import NamedImage

_PASS_THROUGH = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


class ImageAsset:
    """One image of the dialogue, named as the model sees it (``image_1.png``, ``transformed_image_0.png``)."""

    def __init__(self, name: str, source: bytes | Callable[[], bytes]):
        self.name = name
        self._source = source
        self._urls: dict[tuple[str, int], str] = {}
        self._lock = threading.Lock()

    @cached_property
    def data(self) -> bytes:
        return self._source if isinstance(self._source, bytes) else self._source()

    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @cached_property
    def pil(self) -> Image.Image:
        """The image, opened lazily (pixels load on first access). Treat it as read-only: it is shared between steps."""
        image = Image.open(io.BytesIO(self.data))
        width, height = image.size
        if width * height > MAX_IMAGE_PIXELS:
            raise ImageDecodeError(f"{self.name}: {width}x{height} exceeds {MAX_IMAGE_PIXELS} pixels")
        return image

    def named(self) -> NamedImage:
        return NamedImage(self.name, self.data)

    def data_url(self, encoding: str = "original", quality: int = 85) -> str:
        """``data:<mime>;base64,...``; made once per (encoding, quality) and cached."""
        key = (encoding, quality)
        url = self._urls.get(key)
        if url is None:
            with self._lock:
                url = self._urls.get(key) or self._encode(encoding, quality)
                self._urls[key] = url
        return url

    def _encode(self, encoding: str, quality: int) -> str:
        if encoding == "original":
            data = self.data
            mime = next((mime for magic, mime in _PASS_THROUGH if data.startswith(magic)), None)
            if mime is None and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
                mime = "image/webp"
            if mime is None:
                data, mime = _encode_pil(self.pil, "PNG"), "image/png"
        elif encoding == "jpeg":
            data, mime = _encode_pil(self.pil, "JPEG", quality=quality), "image/jpeg"
        else:
            raise ValueError(f"unknown image encoding {encoding!r}")
        return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _encode_pil(image: Image.Image, fmt: str, **options: Any) -> bytes:
    image = shown_image(image)[0]  # tool images already are; a dataset's may be CMYK, 16-bit, LAB...
    if fmt == "JPEG" and image.mode == "RGBA":
        image = image.convert("RGB")
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


@dataclass(frozen=True)
class ImagePart:
    """An image part in a stored message: resolved into an OpenAI part when an observation is made."""

    asset: ImageAsset


def labelled_image_parts(assets: Iterable[ImageAsset]) -> list[Any]:
    """``[name]`` text part, then the image, for each asset: the model can refer to files by name."""
    parts: list[Any] = []
    for asset in assets:
        parts.append({"type": "text", "text": f"[{asset.name}]"})
        parts.append(ImagePart(asset))
    return parts


def user_message(prompt: str, assets: Iterable[ImageAsset] = ()) -> dict[str, Any]:
    """A turn's prompt: plain text content when it has no images, else the prompt then labelled images."""
    parts = labelled_image_parts(assets)
    if not parts:
        return {"role": "user", "content": prompt}
    return {"role": "user", "content": [{"type": "text", "text": prompt}, *parts]}


def reingestion_message(assets: Iterable[ImageAsset]) -> dict[str, Any]:
    """The user message after a round's tool messages that shows the images the tools produced."""
    assets = list(assets)
    names = ", ".join(asset.name for asset in assets)
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": f"Images produced by the tool calls above: {names}."},
            *labelled_image_parts(assets),
        ],
    }


class Dialogue:
    """The messages of an episode so far, with the assets each one shows, in order."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self._assets: list[tuple[ImageAsset, ...]] = []  # per message

    def append(self, message: dict[str, Any]) -> None:
        content = message.get("content")
        assets = (
            tuple(part.asset for part in content if isinstance(part, ImagePart)) if isinstance(content, list) else ()
        )
        self.messages.append(message)
        self._assets.append(assets)

    def truncate(self, length: int) -> None:
        """Drop the messages from ``length`` on (the golden history replaces a finished turn)."""
        del self.messages[length:], self._assets[length:]

    def __len__(self) -> int:
        return len(self.messages)

    def _image_parts(self) -> list["ImagePart"]:
        return [
            part
            for message in self.messages
            if isinstance(message.get("content"), list)
            for part in message["content"]
            if isinstance(part, ImagePart)
        ]

    @property
    def assets(self) -> list[ImageAsset]:
        """Every image visible in the dialogue, in order of appearance."""
        return [asset for assets in self._assets for asset in assets]

    def observation(
        self,
        tools: list[dict[str, Any]],
        image_parts: str = "data_url",
        encoding: str = "original",
        quality: int = 85,
        keep_last_images: int | None = None,
    ) -> dict[str, Any]:
        """A fresh observation dict (new containers every call; strings and images are shared, never mutated).

        ``keep_last_images=K``: only the last K image parts are sent; each older one becomes a
        text part naming the image, so the dialogue stays readable under a server's per-prompt limit.
        """
        assets = self.assets
        dropped = (
            {id(part) for part in self._image_parts()[: max(0, len(assets) - keep_last_images)]}
            if keep_last_images
            else set()
        )

        def resolve(part: ImagePart) -> dict[str, Any]:
            if id(part) in dropped:
                return {
                    "type": "text",
                    "text": f"[{part.asset.name} is no longer shown: only the last {keep_last_images} images are kept]",
                }
            if image_parts == "name":
                return {"type": "image", "name": part.asset.name}
            return {"type": "image_url", "image_url": {"url": part.asset.data_url(encoding, quality)}}

        if dropped:
            assets = assets[len(dropped) :]
        return {
            "messages": [_fresh(message, resolve) for message in self.messages],
            "images": [asset.pil for asset in assets],
            "image_names": [asset.name for asset in assets],
            "tools": tools,
        }


def _fresh(value: Any, resolve: Callable[[ImagePart], dict[str, Any]]) -> Any:
    if isinstance(value, dict):
        return {key: _fresh(item, resolve) for key, item in value.items()}
    if isinstance(value, list):
        return [_fresh(item, resolve) for item in value]
    if isinstance(value, ImagePart):
        return resolve(value)
    return value


def is_image_part(part: Any) -> bool:
    """An observation's image part: ``{"type": "image_url", ...}`` or the ``{"type": "image", "name": ...}``
    placeholder."""
    return isinstance(part, Mapping) and part.get("type") in ("image", "image_url")


def image_parts(messages: Iterable[Mapping[str, Any]]) -> list[Any]:
    """The image parts themselves, in order (``observation["images"][i]`` is the i-th one's image),
    for a caller that edits them in place (``map_image_parts`` makes copies)."""
    return [
        part
        for message in messages
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if is_image_part(part)
    ]


def map_image_parts(
    messages: Iterable[Mapping[str, Any]], convert: Callable[[Mapping[str, Any], int], Any]
) -> list[dict[str, Any]]:
    """Copies of ``messages`` with the i-th image part (counted over all messages, so
    ``observation["images"][i]`` is its image) replaced by ``convert(part, i)``; the other parts
    are copied as they are. The one walk over image parts that every converter builds on."""
    index = -1
    converted = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            parts = []
            for part in content:
                if is_image_part(part):
                    index += 1
                    parts.append(convert(part, index))
                else:
                    parts.append(dict(part) if isinstance(part, Mapping) else part)
            content = parts
        converted.append({**message, "content": content})
    return converted


def observation_to_processor_messages(observation: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The observation's messages for a transformers processor: image parts become
    ``{"type": "image", "image": PIL}``."""
    images = observation["images"]
    return map_image_parts(observation["messages"], lambda part, i: {"type": "image", "image": images[i]})
