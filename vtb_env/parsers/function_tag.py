"""``<function=name>...</function>`` format, with either body style:

- Llama 3.1 custom functions: ``<function=name>{"a": 1}</function>``;
- Qwen3-Coder XML: ``<function=name><parameter=a>1</parameter></function>``, often inside ``<tool_call>``.
"""

from __future__ import annotations

import json
import re

from vtb_env.parsers.base import ParsedCall, ToolCallParser, arguments_from_string

_FUNCTION = re.compile(r"<function=([^>\s]*)>(.*?)(?:</function>|$)", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)(?:</parameter>|(?=<parameter=)|$)", re.DOTALL)
_WRAPPER = re.compile(r"</?tool_call>")


class FunctionTagParser(ToolCallParser):
    name = "function_tag"

    def detect(self, text: str) -> bool:
        return "<function=" in text

    def parse(self, text: str) -> tuple[str, list[ParsedCall]]:
        calls = []
        for match in _FUNCTION.finditer(text):
            name, body = match.group(1).strip(), match.group(2).strip()
            raw = match.group(0)
            if not name:
                calls.append(ParsedCall(name="", arguments=body, raw=raw, error="<function=...> tag without a function name"))
            elif "<parameter=" in body:
                calls.append(ParsedCall(name=name, arguments=_xml_parameters(body), raw=raw))
            else:
                calls.append(arguments_from_string(name, body, raw))
        content = _WRAPPER.sub("", _FUNCTION.sub("", text))
        return content.strip(), calls


def _xml_parameters(body: str) -> dict[str, object]:
    """Parameter values are JSON when they parse as JSON (numbers, lists), strings otherwise."""
    arguments: dict[str, object] = {}
    for match in _PARAMETER.finditer(body):
        value = match.group(2).strip("\n")
        try:
            arguments[match.group(1)] = json.loads(value)
        except json.JSONDecodeError:
            arguments[match.group(1)] = value
    return arguments
