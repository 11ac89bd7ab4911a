"""Llama 4 pythonic format: ``[get_weather(city="Paris"), calculator(expression="2+2")]``.

Read with the standard library's ``ast`` (never ``eval``): only calls with keyword arguments
whose values are literals are accepted.
"""

from __future__ import annotations

import ast
import re

from vtb_env.parsers.base import MAX_CALLS_PER_ACTION, ParsedCall, ToolCallParser, unread_calls

MAX_PYTHONIC_CHARS = 262_144
"""Longest call list given to ``ast.parse`` (~1.3 us per character, all at once): far above 100
calls of realistic size; a longer one is one error call instead of seconds of parsing."""

_TAGS = re.compile(r"<\|python_start\|>|<\|python_end\|>|<\|eom\|>|<\|eot\|>")
_LOOKS_LIKE_CALL = re.compile(r"^\s*\[\s*[A-Za-z_][\w.]*\s*\(")


class PythonicParser(ToolCallParser):
    """Pythonic call lists ``[name(arg=value), ...]`` (Llama 4, Llama 3.2), optionally in ``<|python_start|>``."""

    name = "pythonic"

    def detect(self, text: str) -> bool:
        return "<|python_start|>" in text or bool(_LOOKS_LIKE_CALL.match(text))

    def parse(self, text: str) -> tuple[str, list[ParsedCall]]:
        if "<|python_start|>" in text:
            content, _, body = text.partition("<|python_start|>")
        else:
            content, body = "", text
        body = _TAGS.sub("", body).strip()
        if len(body) > MAX_PYTHONIC_CHARS:
            return content.strip(), [
                ParsedCall(
                    name="",
                    arguments=body,
                    raw=body,
                    error=(
                        f"pythonic tool calls of {len(body):,} characters were not read: at most {MAX_PYTHONIC_CHARS:,}"
                    ),
                )
            ]
        try:
            tree = ast.parse(body, mode="eval").body
        except SyntaxError as exc:
            return content.strip(), [
                ParsedCall(
                    name="",
                    arguments=body,
                    raw=body,
                    error=f"pythonic tool call is not valid Python: {exc.msg} (line {exc.lineno}, column {exc.offset})",
                )
            ]
        except (RecursionError, MemoryError, ValueError):  # absurd nesting; NUL bytes
            return content.strip(), [
                ParsedCall(
                    name="",
                    arguments=body,
                    raw=body,
                    error="pythonic tool call is nested too deeply or contains NUL bytes",
                )
            ]
        if not isinstance(tree, ast.List):
            return content.strip(), [
                ParsedCall(
                    name="", arguments=body, raw=body, error="pythonic tool calls must be a list like [name(arg=value)]"
                )
            ]
        source = _Source(body)
        calls = [_call(node, source) for node in tree.elts[:MAX_CALLS_PER_ACTION]]
        if len(tree.elts) > MAX_CALLS_PER_ACTION:
            calls.append(unread_calls(len(tree.elts) - MAX_CALLS_PER_ACTION))
        return content.strip(), calls


class _Source:
    """Source segments of AST nodes in O(segment length): ``ast.get_source_segment`` re-splits the
    whole source on every call, which made an action with thousands of calls quadratic."""

    def __init__(self, text: str):
        self.data = text.encode("utf-8")  # AST columns are UTF-8 byte offsets
        self.line_starts = [0]
        for line in self.data.splitlines(keepends=True):
            self.line_starts.append(self.line_starts[-1] + len(line))

    def segment(self, node: ast.expr) -> str:
        start = self.line_starts[node.lineno - 1] + node.col_offset
        end = self.line_starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[operator]
        return self.data[start:end].decode("utf-8", errors="replace")


def _call(node: ast.expr, source: _Source) -> ParsedCall:
    raw = source.segment(node)
    if not isinstance(node, ast.Call):
        return ParsedCall(name="", arguments=raw, raw=raw, error=f"not a function call: {raw}")
    name = _dotted_name(node.func)
    if name is None:
        return ParsedCall(name="", arguments=raw, raw=raw, error=f"cannot read the function name in {raw}")
    if node.args:
        return ParsedCall(
            name=name, arguments=raw, raw=raw, error=f"{name}: positional arguments are not allowed; use name=value"
        )
    arguments = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            return ParsedCall(name=name, arguments=raw, raw=raw, error=f"{name}: **kwargs is not allowed")
        try:
            arguments[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            segment = source.segment(keyword.value)
            return ParsedCall(
                name=name,
                arguments=raw,
                raw=raw,
                error=f"{name}: argument {keyword.arg}={segment} is not a literal value",
            )
    return ParsedCall(name=name, arguments=arguments, raw=raw)


def _dotted_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None
