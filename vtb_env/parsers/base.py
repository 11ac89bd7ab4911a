"""What every tool-call parser returns, and the helpers they share (think blocks, lenient JSON).

A parser turns one raw policy action into a ``ParsedAction``: the visible text, the reasoning
that was split off, and the tool calls. A call that could not be read is still returned, with
``error`` set, so that the environment can answer it with an error tool message instead of
silently treating the action as a final answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

import json_repair

MAX_CALLS_PER_ACTION = 100
"""Calls read from one action; the rest become one error call. Any cap (20 per turn by default) is far below."""

MAX_REPAIR_CHARS = 65_536
"""Longest text that JSON repair is attempted on (its cost grows quadratically). Tool arguments are
far shorter (code is at most 5,000 characters), so longer invalid JSON is reported, not repaired."""


@dataclass
class ParsedCall:
    """One tool call as read from the action. ``error`` says why it cannot be executed."""

    name: str
    arguments: Any  # a dict when readable; the raw text otherwise
    raw: str = ""  # the call's source text, for error messages and the trajectory
    error: str | None = None
    repaired: bool = False  # the JSON needed repair to parse
    call_id: str | None = None  # given by the policy (OpenAI dicts); the env assigns one otherwise


@dataclass
class ParsedAction:
    """A whole action: text outside the calls, reasoning, and the calls in the order written."""

    content: str
    reasoning: str = ""
    calls: list[ParsedCall] = field(default_factory=list)
    parser: str | None = None  # the format that produced the calls (None: plain text)


class ToolCallParser:
    """One tool-call format. Subclasses set ``name`` and implement ``detect`` and ``parse``.

    ``parse`` receives text with reasoning already removed and returns (content, calls).
    """

    name: str = ""

    def detect(self, text: str) -> bool:
        raise NotImplementedError

    def parse(self, text: str) -> tuple[str, list[ParsedCall]]:
        raise NotImplementedError


_THINK_BLOCK = re.compile(r"<think>(.*?)</think>", re.DOTALL)


def split_reasoning(text: str) -> tuple[str, str]:
    """Split ``<think>`` blocks off: returns (text without them, reasoning).

    Also handles a closing tag without an opening one (chat templates that put ``<think>`` in
    the prompt) and an unclosed block (generation cut off inside its thoughts).
    """
    thoughts: list[str] = []
    if "</think>" in text and "<think>" not in text.split("</think>", 1)[0]:
        head, text = text.split("</think>", 1)
        thoughts.append(head)
    thoughts.extend(_THINK_BLOCK.findall(text))
    text = _THINK_BLOCK.sub("", text)
    if "<think>" in text:
        text, unclosed = text.split("<think>", 1)
        thoughts.append(unclosed)
    return text.strip(), "\n".join(thought.strip() for thought in thoughts if thought.strip())


def load_json_lenient(text: str) -> tuple[Any, bool]:
    """Parse JSON, repairing near misses (trailing commas, single quotes, a missing brace).

    Returns (value, repaired). Raises ValueError when nothing sensible comes out.
    """
    try:
        return json.loads(text), False
    except (json.JSONDecodeError, TypeError):
        pass
    if not text.strip():
        raise ValueError("empty JSON")
    if len(text) > MAX_REPAIR_CHARS:
        raise ValueError(f"invalid JSON of {len(text):,} characters; repair is attempted only up to {MAX_REPAIR_CHARS:,}")
    try:
        value = json_repair.loads(text)
    except Exception as exc:  # json_repair has no stable exception type
        raise ValueError(f"invalid JSON: {exc}") from None
    if value in ("", None, [], {}) and text.strip() not in ('""', "null", "[]", "{}"):
        raise ValueError(f"invalid JSON: {_clip(text)}")
    return value, True


def bound_calls(calls: list[ParsedCall]) -> list[ParsedCall]:
    """The first ``MAX_CALLS_PER_ACTION`` calls, then one error call standing for the rest."""
    if len(calls) <= MAX_CALLS_PER_ACTION:
        return calls
    extra = len(calls) - MAX_CALLS_PER_ACTION
    return calls[:MAX_CALLS_PER_ACTION] + [ParsedCall(name="", arguments="", error=f"{extra} more tool calls were not read: at most {MAX_CALLS_PER_ACTION} calls per action")]


def call_from_object(obj: Any, raw: str, repaired: bool = False, arguments_keys: tuple[str, ...] = ("arguments", "parameters")) -> ParsedCall:
    """A call from a decoded ``{"name": ..., "arguments"|"parameters": ...}`` object, checked for shape."""
    if not isinstance(obj, Mapping):
        problem = "is not valid JSON" if repaired else f"must be a JSON object with 'name' and 'arguments', got {type(obj).__name__}"
        return ParsedCall(name="", arguments=raw, raw=raw, error=f"tool call {problem}: {_clip(raw)}")
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return ParsedCall(name="", arguments=raw, raw=raw, error=f"tool call has no 'name': {_clip(raw)}")
    key = next((k for k in arguments_keys if k in obj), None)
    arguments: Any = {} if key is None else obj[key]
    if isinstance(arguments, str):
        return arguments_from_string(name.strip(), arguments, raw, repaired)
    call = ParsedCall(name=name.strip(), arguments=arguments, raw=raw, repaired=repaired)
    if not isinstance(arguments, Mapping):
        call.error = f"arguments of {call.name} must be a JSON object, got {type(arguments).__name__}"
    return call


def arguments_from_string(name: str, text: str, raw: str, repaired: bool = False) -> ParsedCall:
    """A call whose arguments arrive as a JSON string (OpenAI style)."""
    if not text.strip():
        return ParsedCall(name=name, arguments={}, raw=raw, repaired=repaired)
    try:
        value, fixed = load_json_lenient(text)
    except ValueError as exc:
        return ParsedCall(name=name, arguments=text, raw=raw, error=f"arguments of {name} are not valid JSON ({exc})")
    if fixed and not isinstance(value, Mapping):  # repair guessed something that is not an object
        return ParsedCall(name=name, arguments=text, raw=raw, error=f"arguments of {name} are not valid JSON: {_clip(text)}")
    call = ParsedCall(name=name, arguments=value, raw=raw, repaired=repaired or fixed)
    if not isinstance(value, Mapping):
        call.error = f"arguments of {name} must be a JSON object, got {type(value).__name__}"
    return call


def _clip(text: str, limit: int = 200) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "..."
