"""Turning an observation's messages into a chat-completions request body.

The env's messages are OpenAI-format; an image appears as a content part ``{"type": "image"}``
(a placeholder: the next image of ``observation["images"]``, in order) or as a ready
``{"type": "image_url", ...}`` part. Placeholders are encoded here under the agent's
image policy; the observation itself is never mutated.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from PIL import Image

from agents.base import Observation
from agents.images import ImagePolicy, image_data_url


class ObservationError(ValueError):
    """The observation does not match its images (more placeholders than images, wrong type)."""


def to_chat_messages(observation: Observation, policy: ImagePolicy) -> tuple[list[dict[str, Any]], int]:
    """Request-ready messages and the longest image side sent (0 when there are no images)."""
    images: Iterator[Image.Image] = iter(observation.get("images") or ())
    largest = 0
    messages = []
    for message in observation.get("messages") or ():
        content = message.get("content")
        if isinstance(content, list):
            parts = []
            for part in content:
                if isinstance(part, Mapping) and part.get("type") == "image":
                    image = next(images, None)
                    if not isinstance(image, Image.Image):
                        raise ObservationError("an image placeholder has no matching PIL image in observation['images']")
                    url, size = image_data_url(image, policy)
                    largest = max(largest, *size)
                    parts.append({"type": "image_url", "image_url": {"url": url}})
                else:
                    parts.append(dict(part))
            content = parts
        messages.append({**message, "content": content})
    return messages, largest
