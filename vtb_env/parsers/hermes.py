"""Hermes / Qwen format: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, one block per call."""

from __future__ import annotations

from vtb_env.parsers.base import (
    ParsedCall,
    ToolCallParser,
    call_from_object,
    load_json_lenient,
    read_call_blocks,
    tag_blocks,
)

OPEN, CLOSE = "<tool_call>", "</tool_call>"


class HermesParser(ToolCallParser):
    """Hermes ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` blocks (Qwen and most chat templates)."""

    name = "hermes"

    def detect(self, text: str) -> bool:
        return OPEN in text

    def parse(self, text: str) -> tuple[str, list[ParsedCall]]:
        blocks = (
            (start, end, (text[body_start:body_end].strip(), text[start:end]))
            for start, body_start, body_end, end in tag_blocks(text, OPEN, CLOSE)
        )
        content, calls = read_call_blocks(text, blocks, lambda block: _block_call(*block), OPEN)
        return content.strip(), calls


def _block_call(body: str, raw: str) -> ParsedCall:
    if not body:
        return ParsedCall(name="", arguments="", raw=raw, error="empty <tool_call> block")
    try:
        value, repaired = load_json_lenient(body)
    except ValueError as exc:
        return ParsedCall(name="", arguments=body, raw=body, error=f"<tool_call> block is not valid JSON ({exc})")
    return call_from_object(value, body, repaired)
