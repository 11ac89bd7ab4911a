"""Llama 4 pythonic format: ``[get_weather(city="Paris"), calculator(expression="2+2")]``.

Read with the standard library's ``ast`` (never ``eval``): only calls with keyword arguments
whose values are literals are accepted.
"""

from __future__ import annotations

import ast
import re

from vtb_env.parsers.base import ParsedCall, ToolCallParser

_TAGS = re.compile(r"<\|python_start\|>|<\|python_end\|>|<\|eom\|>|<\|eot\|>")
_LOOKS_LIKE_CALL = re.compile(r"^\s*\[\s*[A-Za-z_][\w.]*\s*\(")


class PythonicParser(ToolCallParser):
    name = "pythonic"

    def detect(self, text: str) -> bool:
        return "<|python_start|>" in text or bool(_LOOKS_LIKE_CALL.match(text))

    def parse(self, text: str) -> tuple[str, list[ParsedCall]]:
        if "<|python_start|>" in text:
            content, _, body = text.partition("<|python_start|>")
        else:
            content, body = "", text
        body = _TAGS.sub("", body).strip()
        try:
            tree = ast.parse(body, mode="eval").body
        except SyntaxError as exc:
            return content.strip(), [ParsedCall(name="", arguments=body, raw=body, error=f"pythonic tool call is not valid Python: {exc.msg} (line {exc.lineno}, column {exc.offset})")]
        if not isinstance(tree, ast.List):
            return content.strip(), [ParsedCall(name="", arguments=body, raw=body, error="pythonic tool calls must be a list like [name(arg=value)]")]
        return content.strip(), [_call(node, body) for node in tree.elts]


def _call(node: ast.expr, source: str) -> ParsedCall:
    raw = ast.get_source_segment(source, node) or ""
    if not isinstance(node, ast.Call):
        return ParsedCall(name="", arguments=raw, raw=raw, error=f"not a function call: {raw}")
    name = _dotted_name(node.func)
    if name is None:
        return ParsedCall(name="", arguments=raw, raw=raw, error=f"cannot read the function name in {raw}")
    if node.args:
        return ParsedCall(name=name, arguments=raw, raw=raw, error=f"{name}: positional arguments are not allowed; use name=value")
    arguments = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            return ParsedCall(name=name, arguments=raw, raw=raw, error=f"{name}: **kwargs is not allowed")
        try:
            arguments[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, SyntaxError, TypeError):
            segment = ast.get_source_segment(source, keyword.value)
            return ParsedCall(name=name, arguments=raw, raw=raw, error=f"{name}: argument {keyword.arg}={segment} is not a literal value")
    return ParsedCall(name=name, arguments=arguments, raw=raw)


def _dotted_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None
