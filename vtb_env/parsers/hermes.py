"""Hermes / Qwen format: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, one block per call."""

from __future__ import annotations

import re

from vtb_env.parsers.base import ParsedCall, ToolCallParser, call_from_object, load_json_lenient

_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)


class HermesParser(ToolCallParser):
    name = "hermes"

    def detect(self, text: str) -> bool:
        return "<tool_call>" in text

    def parse(self, text: str) -> tuple[str, list[ParsedCall]]:
        calls = []
        for match in _BLOCK.finditer(text):
            body = match.group(1).strip()
            if not body:
                calls.append(ParsedCall(name="", arguments="", raw=match.group(0), error="empty <tool_call> block"))
                continue
            try:
                value, repaired = load_json_lenient(body)
            except ValueError as exc:
                calls.append(ParsedCall(name="", arguments=body, raw=body, error=f"<tool_call> block is not valid JSON ({exc})"))
                continue
            calls.append(call_from_object(value, body, repaired))
        return _BLOCK.sub("", text).strip(), calls
