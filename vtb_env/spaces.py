"""Gymnasium spaces for a dialogue environment: actions are assistant text (or an OpenAI
assistant message dict), observations are the dialogue dict made by ``Dialogue.observation``.

Both are custom ``Space`` subclasses (variable-length text and nested lists do not fit the
built-in spaces); they batch under ``gymnasium.vector`` as tuples (use
``AsyncVectorEnv(..., shared_memory=False)``: custom spaces have no shared-memory layout).
"""

from __future__ import annotations

import string
from typing import Any, Mapping

import numpy as np
from gymnasium.spaces import Space
from PIL import Image

from vtb_env.observation import is_image_part

ROLES = frozenset({"system", "user", "assistant", "tool"})
_SAMPLE_CHARACTERS = string.ascii_letters + string.digits + " .,?!"


class AssistantActionSpace(Space):
    """A policy action: raw assistant text (any tool-call format) of at most ``max_length`` characters,
    or an OpenAI assistant message dict (``content`` and/or ``tool_calls``). ``sample()`` gives random text."""

    def __init__(self, max_length: int = 1_000_000, seed: int | np.random.Generator | None = None):
        super().__init__(shape=None, dtype=None, seed=seed)
        self.max_length = max_length

    def contains(self, x: Any) -> bool:
        if isinstance(x, str):
            return len(x) <= self.max_length
        if isinstance(x, Mapping):
            return (
                x.get("role", "assistant") == "assistant"
                and ("content" in x or "tool_calls" in x)
                and isinstance(x.get("tool_calls") or [], list)
            )
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        length = int(self.np_random.integers(1, 64))
        return "".join(self.np_random.choice(list(_SAMPLE_CHARACTERS), size=length))

    @property
    def is_np_flattened(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"AssistantActionSpace(max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, AssistantActionSpace) and other.max_length == self.max_length


class DialogueObservationSpace(Space):
    """``{"messages": [...OpenAI messages...], "images": [PIL.Image], "image_names": [str],
    "tools": [function schemas]}``.

    ``contains`` checks the structure: known roles, one image per image part, a name per image,
    function-typed tool schemas, tool messages answering a ``tool_call_id``.
    """

    keys = ("messages", "images", "image_names", "tools")

    def __init__(self, seed: int | np.random.Generator | None = None):
        super().__init__(shape=None, dtype=None, seed=seed)

    def contains(self, x: Any) -> bool:
        if not isinstance(x, Mapping) or set(x) != set(self.keys):
            return False
        messages, images, names, tools = (x[key] for key in self.keys)
        if not all(isinstance(item, list) for item in (messages, images, names, tools)):
            return False
        if (
            len(images) != len(names)
            or not all(isinstance(image, Image.Image) for image in images)
            or not all(isinstance(n, str) for n in names)
        ):
            return False
        if not all(
            isinstance(tool, Mapping) and tool.get("type") == "function" and isinstance(tool.get("function"), Mapping)
            for tool in tools
        ):
            return False
        image_parts = 0
        for message in messages:
            if not isinstance(message, Mapping) or message.get("role") not in ROLES:
                return False
            if message["role"] == "tool" and not isinstance(message.get("tool_call_id"), str):
                return False
            content = message.get("content")
            if isinstance(content, list):
                if not all(isinstance(part, Mapping) and "type" in part for part in content):
                    return False
                image_parts += sum(is_image_part(part) for part in content)
            elif not (content is None or isinstance(content, str)):
                return False
        return image_parts == len(images)

    def sample(self, mask: Any = None, probability: Any = None) -> dict[str, Any]:
        length = int(self.np_random.integers(1, 64))
        text = "".join(self.np_random.choice(list(_SAMPLE_CHARACTERS), size=length))
        return {"messages": [{"role": "user", "content": text}], "images": [], "image_names": [], "tools": []}

    @property
    def is_np_flattened(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "DialogueObservationSpace()"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, DialogueObservationSpace)
