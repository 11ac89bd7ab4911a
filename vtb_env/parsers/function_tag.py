"""``<function=name>...</function>`` format, with either body style:

- Llama 3.1 custom functions: ``<function=name>{"a": 1}</function>``;
- Qwen3-Coder XML: ``<function=name><parameter=a>1</parameter></function>``, often inside ``<tool_call>``.

Read with ``str.find`` scans that never revisit text, so the cost is linear even for
``"<function=" * 100_000`` (a regex with a backtracking name group was quadratic there).
"""

from __future__ import annotations

import json
import re
from typing import Iterator

from vtb_env.parsers.base import ParsedCall, ToolCallParser, arguments_from_string, read_call_blocks

FUNCTION, END_FUNCTION = "<function=", "</function>"
PARAMETER, END_PARAMETER = "<parameter=", "</parameter>"
_NAME_END = re.compile(r"[>\s]")
_WRAPPER = re.compile(r"</?tool_call>")


class FunctionTagParser(ToolCallParser):
    """``<function=name>...</function>`` calls: a JSON body (Llama 3.1 custom functions) or ``<parameter=...>``
    tags (Qwen3-Coder)."""

    name = "function_tag"

    def detect(self, text: str) -> bool:
        return FUNCTION in text

    def parse(self, text: str) -> tuple[str, list[ParsedCall]]:
        blocks = (
            (start, end, (name.strip(), body.strip(), text[start:end]))
            for start, name, body, end in _tags(text, FUNCTION, (END_FUNCTION,), allow_empty_name=True)
        )
        content, calls = read_call_blocks(text, blocks, lambda block: _call(*block), FUNCTION)
        return _WRAPPER.sub("", content).strip(), calls


def _call(name: str, body: str, raw: str) -> ParsedCall:
    if not name:
        return ParsedCall(name="", arguments=body, raw=raw, error="<function=...> tag without a function name")
    if PARAMETER in body:
        return ParsedCall(name=name, arguments=_xml_parameters(body), raw=raw)
    return arguments_from_string(name, body, raw)


class _NextOccurrence:
    """Next position of ``needle`` at or after a position; remembered, so a left-to-right scan
    searches each stretch of text once."""

    def __init__(self, text: str, needle: str) -> None:
        self.text, self.needle, self.found = text, needle, -2

    def at_or_after(self, position: int) -> int:
        if self.found == -1 or (self.found >= position):
            return len(self.text) if self.found == -1 else self.found
        self.found = self.text.find(self.needle, position)
        return len(self.text) if self.found == -1 else self.found


def _tags(
    text: str, opener: str, closers: tuple[str, ...], allow_empty_name: bool = False
) -> Iterator[tuple[int, str, str, int]]:
    """(start, name, body, end) of each ``<opener>name>body<closer>`` tag. The body ends at the first
    closer (consumed) or, for the other entries of ``closers``' lookahead, at the end of the text."""
    close_at = _NextOccurrence(text, closers[0])
    next_open = _NextOccurrence(text, opener)
    position = 0
    while (start := text.find(opener, position)) != -1:
        name_start = start + len(opener)
        name_end_match = _NAME_END.search(text, name_start)
        if name_end_match is None:
            return
        name_end = name_end_match.start()
        if text[name_end] != ">" or (name_end == name_start and not allow_empty_name):
            # every opener inside text[start:name_end] ends its name at the same place: skip them all
            position = max(name_end, start + 1)
            continue
        body_start = name_end + 1
        close = close_at.at_or_after(body_start)
        if len(closers) > 1:  # the body may also end where the next tag opens
            close = min(close, next_open.at_or_after(body_start))
        consumed = len(closers[0]) if text.startswith(closers[0], close) else 0
        yield start, text[name_start:name_end], text[body_start:close], close + consumed
        position = close + consumed


def _xml_parameters(body: str) -> dict[str, object]:
    """Parameter values are JSON when they parse as JSON (numbers, lists), strings otherwise."""
    arguments: dict[str, object] = {}
    for _, name, value, _ in _tags(body, PARAMETER, (END_PARAMETER, PARAMETER)):
        value = value.strip("\n")
        try:
            arguments[name] = json.loads(value)
        except (ValueError, RecursionError):
            arguments[name] = value
    return arguments
