"""Turning an observation's messages into a chat-completions request body.

The env's messages are OpenAI-format; an image appears as a ready ``{"type": "image_url", ...}``
part or as a placeholder ``{"type": "image", "name": ...}`` (env option ``image_parts="name"``);
either way ``observation["images"][i]`` is the PIL image of the i-th image part. Placeholders
are encoded here under the agent's image policy; ready ``data:`` URLs are measured without
decoding (``images.data_url_info``) and re-encoded only when they break the policy. With an
``EncodedImages`` cache each image is encoded once, not once per request. The observation itself
is never mutated.
"""

from __future__ import annotations

import base64
import binascii
import io
from typing import Any, Mapping

from PIL import Image

from vtb_agents.base import Observation
from vtb_agents.images import EncodedImages, ImagePolicy, data_url_info, image_data_url
from vtb_env.observation import map_image_parts


class ObservationError(ValueError):
    """The observation does not match its images (more placeholders than images, wrong type)."""


def to_chat_messages(
    observation: Observation, policy: ImagePolicy, cache: EncodedImages | None = None
) -> tuple[list[dict[str, Any]], int]:
    """Request-ready messages and the longest image side sent (0 when there are no images)."""
    cache = cache if cache is not None else EncodedImages(max_bytes=0)
    images = list(observation.get("images") or ())
    largest = 0

    def convert(part: Mapping[str, Any], index: int) -> dict[str, Any]:
        nonlocal largest
        if part["type"] == "image":
            image = images[index] if index < len(images) else None
            if not isinstance(image, Image.Image):
                raise ObservationError("an image placeholder has no matching PIL image in observation['images']")
            url, size = cache.get((id(image), policy), image, lambda: image_data_url(image, policy))
            largest = max(largest, *size)
            return {"type": "image_url", "image_url": {"url": url}}
        original = str((part.get("image_url") or {}).get("url", ""))
        url, size = cache.get((original, policy), original, lambda: _within_policy(original, policy))
        largest = max(largest, *size)
        return {**part, "image_url": {**part["image_url"], "url": url}}

    return map_image_parts(observation.get("messages") or (), convert), largest


def _within_policy(url: str, policy: ImagePolicy) -> tuple[str, tuple[int, int]]:
    """A ``data:`` URL kept as is when it fits ``policy`` (measured from its header, no decoding),
    else decoded and re-encoded; other URLs pass (size unknown)."""
    if not url.startswith("data:") or "," not in url:
        return url, (0, 0)
    try:
        nbytes, size = data_url_info(url)
    except ValueError as exc:
        raise ObservationError(f"an image_url part holds an undecodable data URL: {exc}") from exc
    too_big = (policy.max_side and max(size) > policy.max_side) or (policy.max_bytes and nbytes > policy.max_bytes)
    if not too_big:
        return url, size
    try:
        image = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
        image.load()
    except (binascii.Error, ValueError, OSError) as exc:
        raise ObservationError(f"an image_url part holds an undecodable data URL: {exc}") from exc
    return image_data_url(image, policy)
