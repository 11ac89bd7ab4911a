"""Llama 3.x JSON format: ``{"name": ..., "parameters": {...}}``, optionally after ``<|python_tag|>``.

Several calls may follow one another, separated by whitespace or ``;``, or come as a JSON list.
"""

from __future__ import annotations

import json
import re

from vtb_env.parsers.base import (
    MAX_CALLS_PER_ACTION,
    ParsedCall,
    ToolCallParser,
    call_from_object,
    load_json_lenient,
    unread_calls,
)

PYTHON_TAG = "<|python_tag|>"
_LOOKS_LIKE_CALL = re.compile(r'^\s*\[?\s*\{\s*"name"\s*:')
_END_TOKENS = re.compile(r"<\|(?:eom_id|eot_id)\|>")


class Llama3JsonParser(ToolCallParser):
    """Llama 3 JSON calls ``{"name": ..., "parameters": ...}``, optionally after ``<|python_tag|>``."""

    name = "llama3_json"

    def detect(self, text: str) -> bool:
        return PYTHON_TAG in text or bool(_LOOKS_LIKE_CALL.match(text))

    def parse(self, text: str) -> tuple[str, list[ParsedCall]]:
        content, _, body = text.partition(PYTHON_TAG) if PYTHON_TAG in text else ("", "", text)
        body = _END_TOKENS.sub("", body).strip()
        if not body:
            return content.strip(), [
                ParsedCall(name="", arguments="", raw=PYTHON_TAG, error=f"{PYTHON_TAG} is not followed by a tool call")
            ]
        return content.strip(), _calls(body)


def _calls(body: str) -> list[ParsedCall]:
    """Decode values one after another (C speed); past the per-action bound they are only counted."""
    decoder = json.JSONDecoder()
    calls: list[ParsedCall] = []
    unread = 0
    position = 0
    while position < len(body):
        while position < len(body) and body[position] in " \t\r\n;,":
            position += 1
        if position >= len(body):
            break
        try:
            value, end = decoder.raw_decode(body, position)
            raw, repaired = body[position:end], False
        except (ValueError, RecursionError):  # also integers too long to convert, absurd nesting
            raw = body[position:]
            if len(calls) >= MAX_CALLS_PER_ACTION:
                unread += 1
                break
            try:
                value, repaired = load_json_lenient(raw)
            except ValueError as exc:
                calls.append(ParsedCall(name="", arguments=raw, raw=raw, error=f"tool call is not valid JSON ({exc})"))
                break
            end = len(body)
        items = value if isinstance(value, list) else [value]
        room = max(MAX_CALLS_PER_ACTION - len(calls), 0)
        calls.extend(call_from_object(item, raw, repaired) for item in items[:room])
        unread += len(items) - min(room, len(items))
        position = end
    return calls + [unread_calls(unread)] * (unread > 0)
