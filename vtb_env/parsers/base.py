"""What every tool-call parser returns, and the helpers they share (think blocks, lenient JSON).

A parser turns one raw policy action into a ``ParsedAction``: the visible text, the reasoning
that was split off, and the tool calls. A call that could not be read is still returned, with
``error`` set, so that the environment can answer it with an error tool message instead of
silently treating the action as a final answer.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, TypeVar

from json_repair.json_parser import JSONParser

MAX_CALLS_PER_ACTION = 100
_Block = TypeVar("_Block")
"""Calls read from one action; the rest are counted, not parsed, and become one error call. Any cap
(20 per turn by default) is far below."""

MAX_REPAIR_CHARS = 8_192
"""Longest text that JSON repair is attempted on. Tool arguments are shorter (code is at most 5,000
characters), so longer invalid JSON is reported, not repaired."""

REPAIR_BUDGET_READS = 32_000
"""Character reads that JSON repair may spend on one action, all its calls together (under 0.1 s).
``json_repair`` is quadratic on unbalanced quotes; counting its reads (not timing them) keeps the
bound deterministic, so the same action is always read the same way."""

_repair_budget: ContextVar["_RepairBudget | None"] = ContextVar("vtb_repair_budget", default=None)


@dataclass
class ParsedCall:
    """One tool call as read from the action. ``error`` says why it cannot be executed."""

    name: str
    arguments: Any  # a dict when readable; the raw text otherwise
    raw: str = ""  # the call's source text, for error messages and the trajectory
    error: str | None = None
    repaired: bool = False  # the JSON needed repair to parse
    call_id: str | None = None  # given by the policy (OpenAI dicts); the env assigns one otherwise
    unread: int = 0  # > 0: this error entry stands for that many calls left unparsed (see ``unread_calls``)


@dataclass
class ParsedAction:
    """A whole action: text outside the calls, reasoning, and the calls in the order written."""

    content: str
    reasoning: str = ""
    calls: list[ParsedCall] = field(default_factory=list)
    parser: str | None = None  # the format that produced the calls (None: plain text)


class ToolCallParser:
    """One tool-call format. Subclasses set ``name`` and implement ``detect`` and ``parse``.

    ``parse`` receives text with reasoning already removed and returns (content, calls).
    """

    name: str = ""

    def detect(self, text: str) -> bool:
        raise NotImplementedError

    def parse(self, text: str) -> tuple[str, list[ParsedCall]]:
        raise NotImplementedError


THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def split_reasoning(text: str) -> tuple[str, str]:
    """Split ``<think>`` blocks off: returns (text without them, reasoning). Linear in ``len(text)``.

    Also handles a closing tag without an opening one (chat templates that put ``<think>`` in
    the prompt) and an unclosed block (generation cut off inside its thoughts).
    """
    thoughts: list[str] = []
    first_close = text.find(THINK_CLOSE)
    if first_close != -1 and text.find(THINK_OPEN, 0, first_close) == -1:
        thoughts.append(text[:first_close])
        text = text[first_close + len(THINK_CLOSE) :]
    visible: list[str] = []
    position = 0
    while (start := text.find(THINK_OPEN, position)) != -1:
        visible.append(text[position:start])
        end = text.find(THINK_CLOSE, start + len(THINK_OPEN))
        if end == -1:  # unclosed: the rest is thoughts
            thoughts.append(text[start + len(THINK_OPEN) :])
            position = len(text)
            break
        thoughts.append(text[start + len(THINK_OPEN) : end])
        position = end + len(THINK_CLOSE)
    visible.append(text[position:])
    return "".join(visible).strip(), "\n".join(thought.strip() for thought in thoughts if thought.strip())


def tag_blocks(text: str, open_tag: str, close_tag: str) -> Iterator[tuple[int, int, int, int]]:
    """(start, body start, body end, end) of each ``open_tag ... close_tag`` block, left to right; an
    unclosed block runs to the end of the text. One pass: linear in ``len(text)``."""
    position = 0
    while (start := text.find(open_tag, position)) != -1:
        body_start = start + len(open_tag)
        close = text.find(close_tag, body_start)
        if close == -1:
            yield start, body_start, len(text), len(text)
            return
        position = close + len(close_tag)
        yield start, body_start, close, position


class _RepairBudget:
    def __init__(self, reads: int) -> None:
        self.left = reads


class _RepairBudgetSpent(Exception):
    pass


class _CountedText:
    """The text as ``json_repair`` sees it: every read is charged to the action's repair budget."""

    __slots__ = ("text", "budget")

    def __init__(self, text: str, budget: _RepairBudget) -> None:
        self.text, self.budget = text, budget

    def __len__(self) -> int:
        return len(self.text)

    def __getitem__(self, index: int | slice) -> str:
        value = self.text[index]
        self.budget.left -= len(value) if isinstance(index, slice) else 1
        if self.budget.left < 0:
            raise _RepairBudgetSpent
        return value


@contextmanager
def repair_budget(reads: int = REPAIR_BUDGET_READS) -> Iterator[None]:
    """Share one JSON-repair budget among every ``load_json_lenient`` call inside (one action)."""
    token = _repair_budget.set(_RepairBudget(reads))
    try:
        yield
    finally:
        _repair_budget.reset(token)


def load_json_lenient(text: str) -> tuple[Any, bool]:
    """Parse JSON, repairing near misses (trailing commas, single quotes, a missing brace).

    Returns (value, repaired). Raises ValueError when nothing sensible comes out, or when repair
    would exceed ``MAX_REPAIR_CHARS`` or the action's repair budget (see ``repair_budget``).
    """
    try:
        return json.loads(text), False
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    except (ValueError, TypeError):  # JSONDecodeError, or an integer too long to convert
        pass
    if not text.strip():
        raise ValueError("empty JSON")
    if len(text) > MAX_REPAIR_CHARS:
        raise ValueError(
            f"invalid JSON of {len(text):,} characters; repair is attempted only up to {MAX_REPAIR_CHARS:,}"
        )
    budget = _repair_budget.get() or _RepairBudget(REPAIR_BUDGET_READS)
    if budget.left <= 0:
        raise ValueError(f"invalid JSON: {_clip(text)} (not repaired: this action spent its JSON repair budget)")
    try:
        value = JSONParser(_CountedText(text, budget), None, False, try_valid_json_suffix=True).parse()  # type: ignore[arg-type]
    except _RepairBudgetSpent:
        raise ValueError(f"invalid JSON: {_clip(text)} (repair gave up: it would take too long)") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    except Exception as exc:  # json_repair has no stable exception type
        raise ValueError(f"invalid JSON: {exc}") from None
    if isinstance(value, tuple):  # logging mode returns (value, log); not used, but be exact
        value = value[0]
    if value in ("", None, [], {}) and text.strip() not in ('""', "null", "[]", "{}"):
        raise ValueError(f"invalid JSON: {_clip(text)}")
    return value, True


def unread_calls(count: int) -> ParsedCall:
    """The error entry standing for ``count`` calls a parser stopped before reading."""
    return ParsedCall(name="", arguments="", error="", unread=count)


def read_call_blocks(
    text: str, blocks: Iterable[tuple[int, int, _Block]], read: Callable[[_Block], ParsedCall], opener: str
) -> tuple[str, list[ParsedCall]]:
    """The text outside the call blocks (joined, not stripped) and the calls ``read`` makes of them.

    ``blocks`` yields ``(start, end, block)`` in text order and is consumed lazily: after
    ``MAX_CALLS_PER_ACTION`` calls the next block and everything after it are neither read nor
    kept as content, and the rest are counted by ``opener`` into one ``unread_calls`` entry.
    """
    calls: list[ParsedCall] = []
    content: list[str] = []
    position = 0
    for start, end, block in blocks:
        content.append(text[position:start])
        position = end
        if len(calls) == MAX_CALLS_PER_ACTION:  # count the rest, parse none of it
            calls.append(unread_calls(1 + text.count(opener, end)))
            position = len(text)
            break
        calls.append(read(block))
    content.append(text[position:])
    return "".join(content), calls


def bound_calls(calls: list[ParsedCall]) -> list[ParsedCall]:
    """The first ``MAX_CALLS_PER_ACTION`` calls, then one error call standing for the rest."""
    read = [call for call in calls if not call.unread]
    extra = max(len(read) - MAX_CALLS_PER_ACTION, 0) + sum(call.unread for call in calls)
    if not extra:
        return read
    error = f"{extra} more tool calls were not read: at most {MAX_CALLS_PER_ACTION} calls per action"
    return read[:MAX_CALLS_PER_ACTION] + [ParsedCall(name="", arguments="", error=error, unread=extra)]


def call_from_object(
    obj: Any, raw: str, repaired: bool = False, arguments_keys: tuple[str, ...] = ("arguments", "parameters")
) -> ParsedCall:
    """A call from a decoded ``{"name": ..., "arguments"|"parameters": ...}`` object, checked for shape."""
    if not isinstance(obj, Mapping):
        problem = (
            "is not valid JSON"
            if repaired
            else f"must be a JSON object with 'name' and 'arguments', got {type(obj).__name__}"
        )
        return ParsedCall(name="", arguments=raw, raw=raw, error=f"tool call {problem}: {_clip(raw)}")
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return ParsedCall(name="", arguments=raw, raw=raw, error=f"tool call has no 'name': {_clip(raw)}")
    key = next((k for k in arguments_keys if k in obj), None)
    arguments: Any = {} if key is None else obj[key]
    if isinstance(arguments, str):
        return arguments_from_string(name.strip(), arguments, raw, repaired)
    call = ParsedCall(name=name.strip(), arguments=arguments, raw=raw, repaired=repaired)
    if not isinstance(arguments, Mapping):
        call.error = f"arguments of {call.name} must be a JSON object, got {type(arguments).__name__}"
    return call


def arguments_from_string(name: str, text: str, raw: str, repaired: bool = False) -> ParsedCall:
    """A call whose arguments arrive as a JSON string (OpenAI style)."""
    if not text.strip():
        return ParsedCall(name=name, arguments={}, raw=raw, repaired=repaired)
    try:
        value, fixed = load_json_lenient(text)
    except ValueError as exc:
        return ParsedCall(name=name, arguments=text, raw=raw, error=f"arguments of {name} are not valid JSON ({exc})")
    if fixed and not isinstance(value, Mapping):  # repair guessed something that is not an object
        return ParsedCall(
            name=name, arguments=text, raw=raw, error=f"arguments of {name} are not valid JSON: {_clip(text)}"
        )
    call = ParsedCall(name=name, arguments=value, raw=raw, repaired=repaired or fixed)
    if not isinstance(value, Mapping):
        call.error = f"arguments of {name} must be a JSON object, got {type(value).__name__}"
    return call


def _clip(text: str, limit: int = 200) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "..."
