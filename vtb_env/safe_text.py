"""The one place where text from the policy and from tools is made encodable as UTF-8.

Python strings may hold lone surrogates: a policy that writes half an emoji (``"\\ud83d"``), a
JSON escape such as ``"\\udc00"`` in tool arguments, a file name with invalid UTF-8 bytes
(``b"\\xff.png"`` lists as ``"\\udcff.png"``). Such a string breaks ``str.encode("utf-8")`` and
with it tokenizers, JSON records and HTTP clients. The environment passes every action and every
tool result through this module as they enter it (``clean_action`` on the raw action,
``clean_parsed_action`` on what the parser decoded from it, since JSON escapes such as
``"\\ud83d"`` only become surrogates when decoded, ``clean_tool_result`` on each result), so
nothing it emits (observations, tool messages, info, records) can hold one. Surrogate pairs written as two
code points become the real character; lone surrogates become U+FFFD.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Mapping

from vtb_env.parsers import ParsedAction
from vtb_env.tools.base import ToolResult


def clean_text(text: str) -> str:
    """``text`` with surrogate pairs joined and lone surrogates replaced by U+FFFD (fast when clean)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def clean_value(value: Any) -> Any:
    """A JSON-like value (dict keys included) with every string cleaned; other values unchanged.

    Works through a JSON round trip, so it never recurses in Python; a value JSON cannot encode
    is returned as it is (callers report it; its ``repr`` escapes surrogates).
    """
    if isinstance(value, str):
        return clean_text(value)
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return value
    cleaned = clean_text(text)
    if cleaned is text:
        return value
    try:
        return json.loads(cleaned)
    except (ValueError, RecursionError):
        return value


def clean_action(action: Any) -> Any:
    """A policy action (text or an assistant message dict) with its strings cleaned."""
    if isinstance(action, str):
        return clean_text(action)
    if isinstance(action, Mapping):
        return clean_value(action)
    return action


def clean_parsed_action(parsed: ParsedAction) -> ParsedAction:
    """The parsed action's text, reasoning and calls (names, arguments, raw text, errors) cleaned, in place."""
    parsed.content, parsed.reasoning = clean_text(parsed.content), clean_text(parsed.reasoning)
    for call in parsed.calls:
        call.name, call.raw, call.arguments = clean_text(call.name), clean_text(call.raw), clean_value(call.arguments)
        call.error = None if call.error is None else clean_text(call.error)
        call.call_id = None if call.call_id is None else clean_text(call.call_id)
    return parsed


def clean_json_text(text: str) -> str:
    """``clean_text``, and JSON text whose escapes spell lone surrogates (``"\\udcff"``) re-encoded
    without them: a reader that decodes the tool message must not get them back."""
    text = clean_text(text)
    if "\\ud" not in text and "\\uD" not in text:
        return text
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text
    cleaned = clean_value(value)
    return text if cleaned is value else json.dumps(cleaned, ensure_ascii=False)


def clean_tool_result(result: ToolResult) -> ToolResult:
    """The result's text, error, image names and metadata cleaned (the same object when all are clean)."""
    images = [
        image if clean_text(image.name) is image.name else replace(image, name=clean_text(image.name))
        for image in result.images
    ]
    text, error, meta = (
        clean_json_text(result.text),
        None if result.error is None else clean_text(result.error),
        clean_value(result.meta),
    )
    if (
        text is result.text
        and error is result.error
        and meta is result.meta
        and all(a is b for a, b in zip(images, result.images, strict=False))
    ):
        return result
    return replace(result, text=text, error=error, images=images, meta=meta)
