"""An OpenAI assistant message dict: ``{"role": "assistant", "content": ..., "tool_calls": [...]}``.

Accepts the dict a chat-completions client returns (``message.model_dump()``) or a plain dict;
``arguments`` is the JSON string the API sends (a dict is accepted too). Reasoning fields that
servers add (``reasoning_content``, ``reasoning``) are kept as reasoning.
"""

from __future__ import annotations

import json
import reprlib
from typing import Any, Mapping

from vtb_env.parsers.base import MAX_CALLS_PER_ACTION, ParsedCall, arguments_from_string, unread_calls


def message_text(message: Mapping[str, Any]) -> tuple[str, str | None]:
    """The message as JSON text for the trajectory, and why it is not a JSON message (None if it is).

    Never raises: keys that are not strings, reference cycles and nesting too deep to encode give
    an error and a bounded ``reprlib`` text instead.
    """
    try:
        return json.dumps(message, ensure_ascii=False, default=str), None
    except (TypeError, ValueError, RecursionError) as exc:
        return reprlib.repr(
            message
        ), f"the action is not a JSON-serializable assistant message ({type(exc).__name__}: {exc})"


def parse_message(message: Mapping[str, Any]) -> tuple[str, str, list[ParsedCall]]:
    """Returns (content, reasoning, calls); a message that is not an assistant message gives one error call."""
    content, problem = _content_text(message)
    if problem is not None:
        return "", "", [ParsedCall(name="", arguments=message_text(message)[0][:200], error=problem)]
    reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
    items = message.get("tool_calls") or []
    if not isinstance(items, list):
        return (
            str(content),
            str(reasoning),
            [
                ParsedCall(
                    name="", arguments=repr(items)[:200], error=f"tool_calls must be a list, got {type(items).__name__}"
                )
            ],
        )
    calls = [_call(item) for item in items[:MAX_CALLS_PER_ACTION]]
    if len(items) > MAX_CALLS_PER_ACTION:
        calls.append(unread_calls(len(items) - MAX_CALLS_PER_ACTION))
    return str(content), str(reasoning), calls


def _content_text(message: Mapping[str, Any]) -> tuple[str, str | None]:
    """The message's text (text parts joined), or why the message cannot be read."""
    if "content" not in message and "tool_calls" not in message:
        return "", f"an assistant message needs 'content' and/or 'tool_calls'; got the keys {sorted(map(str, message))}"
    if message.get("role", "assistant") != "assistant":
        return "", f"the action must be an assistant message, got role {message.get('role')!r}"
    content = message.get("content")
    if content is None or isinstance(content, str):
        return content or "", None
    if not isinstance(content, list):
        return "", f"'content' must be a string, a list of content parts or null, got {type(content).__name__}"
    texts = []
    for i, part in enumerate(content):
        if not isinstance(part, Mapping):
            return "", f"content part {i} must be an object, got {type(part).__name__}"
        if part.get("type", "text") != "text":  # e.g. an image part: no text to keep
            continue
        if not isinstance(part.get("text"), str):
            return (
                "",
                f"content part {i} is a text part whose 'text' must be a string, got {type(part.get('text')).__name__}",
            )
        texts.append(part["text"])
    return "".join(texts), None


def _call(item: Any) -> ParsedCall:
    try:
        raw = json.dumps(item, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):  # a cycle, or nesting too deep to encode: a bounded text instead
        raw = reprlib.repr(item)
    if not isinstance(item, Mapping) or not isinstance(item.get("function"), Mapping):
        return ParsedCall(
            name="", arguments=raw, raw=raw, error=f"a tool_calls entry needs a 'function' object: {raw[:200]}"
        )
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
        call = ParsedCall(
            name=name.strip(),
            arguments=arguments,
            raw=raw,
            error=f"arguments of {name} must be a JSON object, got {type(arguments).__name__}",
        )
    call.call_id = call_id
    return call
