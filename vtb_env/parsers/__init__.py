"""Tool-call parsing: one small module per format, a registry, and auto-detection.

>>> action = parse_action('<tool_call>{"name": "calculator", "arguments": {"expression": "2+2"}}</tool_call>')
>>> action.parser, action.calls[0].name, action.calls[0].arguments
('hermes', 'calculator', {'expression': '2+2'})

Formats (``PARSERS``): ``hermes``, ``function_tag``, ``llama3_json``, ``pythonic``; an OpenAI
assistant message dict is always read as such (``openai``). ``fmt="auto"`` tries the text
formats in ``AUTO_ORDER`` (most specific marker first) and uses the first whose ``detect``
matches; text that matches none is a plain answer.
"""

from __future__ import annotations

import reprlib
from typing import Any, Mapping

from vtb_env.parsers.base import (
    MAX_CALLS_PER_ACTION,
    ParsedAction,
    ParsedCall,
    ToolCallParser,
    bound_calls,
    load_json_lenient,
    repair_budget,
    split_reasoning,
)
from vtb_env.parsers.function_tag import FunctionTagParser
from vtb_env.parsers.hermes import HermesParser
from vtb_env.parsers.llama3_json import Llama3JsonParser
from vtb_env.parsers.openai_message import message_text, parse_message
from vtb_env.parsers.pythonic import PythonicParser

PARSERS: dict[str, ToolCallParser] = {}
OPENAI_FORMAT = "openai"


def register_parser(parser: ToolCallParser) -> ToolCallParser:
    """Add a format (e.g. a model's own) to the registry; later registrations replace earlier ones."""
    if not parser.name or parser.name in ("auto", OPENAI_FORMAT):
        raise ValueError(f"invalid parser name {parser.name!r}")
    PARSERS[parser.name] = parser
    return parser


for _parser in (FunctionTagParser(), HermesParser(), Llama3JsonParser(), PythonicParser()):
    register_parser(_parser)

# <function= may sit inside <tool_call> (Qwen3-Coder), so it is tried before hermes.
AUTO_ORDER: tuple[str, ...] = ("function_tag", "hermes", "llama3_json", "pythonic")
FORMATS: tuple[str, ...] = ("auto", OPENAI_FORMAT, *AUTO_ORDER)


def action_text(action: Any) -> str:
    """The action as recorded in the trajectory: the text itself, or a message dict as JSON. Never raises."""
    if isinstance(action, str):
        return action
    if isinstance(action, Mapping):
        return message_text(action)[0]
    return reprlib.repr(action)


def parse_action(action: str | Mapping[str, Any], fmt: str = "auto") -> ParsedAction:
    """Read one policy action (raw assistant text or an OpenAI message dict). Never raises on content.

    Cost is linear in the action's length: at most ``MAX_CALLS_PER_ACTION`` calls are parsed (the
    rest are counted), and JSON repair shares one bounded budget per action.
    Raises ValueError only for an unknown ``fmt`` (a configuration error, not policy output).
    """
    if fmt != "auto" and fmt != OPENAI_FORMAT and fmt not in PARSERS:
        raise ValueError(f"unknown tool-call format {fmt!r}; known: auto, {OPENAI_FORMAT}, {', '.join(PARSERS)}")
    with repair_budget():
        return _parse(action, fmt)


def _parse(action: str | Mapping[str, Any], fmt: str) -> ParsedAction:
    if isinstance(action, Mapping):
        text, problem = message_text(action)
        if problem is not None:  # checked first: the parser below must only see plain JSON data
            return ParsedAction(content="", calls=[ParsedCall(name="", arguments=text, raw=text, error=problem)])
        content, reasoning, calls = parse_message(action)
        content, more_reasoning = split_reasoning(content)
        reasoning = "\n".join(part for part in (reasoning, more_reasoning) if part)
        if not calls and fmt != OPENAI_FORMAT:  # some servers leave calls in the text
            return _parse_text(content, reasoning, fmt)
        return ParsedAction(
            content=content, reasoning=reasoning, calls=bound_calls(calls), parser=OPENAI_FORMAT if calls else None
        )
    if not isinstance(action, str):
        return ParsedAction(
            content="",
            calls=[
                ParsedCall(
                    name="",
                    arguments=reprlib.repr(action),
                    error=f"an action must be a string or an assistant message dict, got {type(action).__name__}",
                )
            ],
            parser=None,
        )
    text, reasoning = split_reasoning(action)
    return _parse_text(text, reasoning, fmt)


def _parse_text(text: str, reasoning: str, fmt: str) -> ParsedAction:
    if fmt == "auto":
        parser = next((PARSERS[name] for name in AUTO_ORDER if PARSERS[name].detect(text)), None)
    else:
        parser = PARSERS.get(fmt)
        parser = parser if parser is not None and parser.detect(text) else None
    if parser is None:
        return ParsedAction(content=text, reasoning=reasoning)
    content, calls = parser.parse(text)
    return ParsedAction(content=content, reasoning=reasoning, calls=bound_calls(calls), parser=parser.name)


__all__ = [
    "AUTO_ORDER",
    "MAX_CALLS_PER_ACTION",
    "FORMATS",
    "PARSERS",
    "ParsedAction",
    "ParsedCall",
    "ToolCallParser",
    "action_text",
    "load_json_lenient",
    "parse_action",
    "register_parser",
    "split_reasoning",
]
