"""An OpenAI assistant message dict: ``{"role": "assistant", "content": ..., "tool_calls": [...]}``.

Accepts the dict a chat-completions client returns (``message.model_dump()``) or a plain dict;
``arguments`` is the JSON string the API sends (a dict is accepted too). Reasoning fields that
servers add (``reasoning_content``, ``reasoning``) are kept as reasoning.
"""

from __future__ import annotations

import json
import reprlib
from typing import Any, Mapping

from vtb_env.parsers.base import ParsedCall, arguments_from_string


def message_text(message: Mapping[str, Any]) -> tuple[str, str | None]:
    """The message as JSON text for the trajectory, and why it is not a JSON message (None if it is).

    Never raises: keys that are not strings, reference cycles and nesting too deep to encode give
    an error and a bounded ``reprlib`` text instead.
    """
    try:
        return json.dumps(message, ensure_ascii=False, default=str), None
    except (TypeError, ValueError, RecursionError) as exc:
        return reprlib.repr(message), f"the action is not a JSON-serializable assistant message ({type(exc).__name__}: {exc})"


def parse_message(message: Mapping[str, Any]) -> tuple[str, str, list[ParsedCall]]:
    """Returns (content, reasoning, calls)."""
    content = message.get("content") or ""
    if isinstance(content, list):  # content parts: keep the text ones
        content = "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
    items = message.get("tool_calls") or []
    if not isinstance(items, list):
        return str(content), str(reasoning), [ParsedCall(name="", arguments=repr(items)[:200], error=f"tool_calls must be a list, got {type(items).__name__}")]
    calls = [_call(item) for item in items]
    return str(content), str(reasoning), calls


def _call(item: Any) -> ParsedCall:
    raw = json.dumps(item, ensure_ascii=False, default=str)
    if not isinstance(item, Mapping) or not isinstance(item.get("function"), Mapping):
        return ParsedCall(name="", arguments=raw, raw=raw, error=f"a tool_calls entry needs a 'function' object: {raw[:200]}")
    function = item["function"]
    name = function.get("name")
    call_id = item.get("id") if isinstance(item.get("id"), str) and item.get("id") else None
    if not isinstance(name, str) or not name.strip():
        return ParsedCall(name="", arguments=raw, raw=raw, error="tool call has no function name", call_id=call_id)
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):
        call = arguments_from_string(name.strip(), arguments, raw)
    elif isinstance(arguments, Mapping):
        call = ParsedCall(name=name.strip(), arguments=dict(arguments), raw=raw)
    else:
        call = ParsedCall(name=name.strip(), arguments=arguments, raw=raw, error=f"arguments of {name} must be a JSON object, got {type(arguments).__name__}")
    call.call_id = call_id
    return call
