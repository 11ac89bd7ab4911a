"""Dialogue parsing: what the agent knows from the chat messages of an observation.

The images each message shows come from the one walk over image parts
(``vtb_env.observation.map_image_parts``); the ``[image_1.png]`` label the env puts before each
one is left out of the prompt's text. The agent's own tool code prints which transformed image
came from which region; its earlier final answers are its memory.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence

from vtb_env.observation import is_image_part, map_image_parts

_LABEL = re.compile(r"^\[([^\[\]]+\.(?:png|jpe?g|webp|gif))\]$", re.I)


def tool_call(name: str, arguments: Mapping[str, Any], n: int) -> dict[str, Any]:
    """An assistant message with one tool call, the ``n``-th call of this turn (0-based)."""
    call = {"id": f"ocr_{n + 1}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return {"role": "assistant", "content": "", "tool_calls": [call]}


def call_name(call: Mapping[str, Any]) -> str:
    return str((call.get("function") or {}).get("name", ""))


def call_args(call: Mapping[str, Any]) -> Any:
    raw = (call.get("function") or {}).get("arguments", "{}")
    try:
        return json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None


def variants(messages: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, list[int]]]:
    """Transformed image -> (original, region), from the JSON the agent's own code printed.

    The env may show a file under another name (``[transformed_image_9.png is shown as
    transformed_image_2.png]``); those notes follow the tool's JSON and are applied here.
    """
    out: dict[str, tuple[str, list[int]]] = {}
    for message in messages:
        if message.get("role") != "tool":
            continue
        content = str(message.get("content") or "")
        try:
            body, _end = json.JSONDecoder().raw_decode(content)
            stdout = str(body.get("stdout", "")).strip()
            made = json.loads(stdout.splitlines()[-1]).get("variants", {}) if stdout else {}
        except (ValueError, AttributeError, IndexError):
            continue
        shown = dict(re.findall(r"\[(\S+) is shown as (\S+)\]", content))
        out.update({shown.get(name, name): (src, box) for name, (src, box) in made.items()})
    return out


def final_answers(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The agent's own final answers so far: assistant messages without tool calls."""
    return [
        message_text(m)
        for m in messages
        if m.get("role") == "assistant" and not m.get("tool_calls") and message_text(m)
    ]


def _parts(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [p for p in content or () if isinstance(p, Mapping)]


def image_names(messages: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[list[str]]:
    """The names of the images each message shows, in order: the i-th image part counted over all
    messages shows ``names[i]`` (the observation's ``image_names``), else the part's own ``name``."""

    def named(part: Mapping[str, Any], index: int) -> dict[str, Any]:
        return {"type": "image", "name": names[index] if index < len(names) else str(part.get("name") or "")}

    shown = map_image_parts(messages, named)
    return [[p["name"] for p in _parts(m) if is_image_part(p) and p["name"]] for m in shown]


def message_text(message: Mapping[str, Any]) -> str:
    texts = [str(p.get("text", "")) for p in _parts(message) if p.get("type") == "text"]
    return " ".join(t for t in texts if not _LABEL.match(t.strip())).strip()


def is_prompt(messages: Sequence[Mapping[str, Any]], index: int) -> bool:
    """A user message that is a turn's prompt (not the env's re-showing of tool images)."""
    message = messages[index]
    if message.get("role") != "user":
        return False
    previous = messages[index - 1] if index else {}
    return previous.get("role") != "tool"
