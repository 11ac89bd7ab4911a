"""Exact programmatic rubric checks: a verdict without an LLM judge, that a hedge cannot pass.

A rubric's ``check`` is a JSON object; ``type`` selects the rule:

- ``{"type": "number", "value": 13.5, "abs_tol": 0.01, "rel_tol": 0.0}``: the answer *commits* to a
  number equal to ``value`` within tolerance (``1,234.5``, ``$13``, ``-4``, ``12%`` all parse).
- ``{"type": "text", "any_of": ["Lisbon"], "none_of": ["Porto"]}``: one of ``any_of`` occurs as a
  whole word/phrase (case and spacing insensitive), committed to, and none of ``none_of`` occurs.
- ``{"type": "choice", "answer": "B", "options": ["A", "B", "C"]}``: the answer names the right
  option and no other.
- ``{"type": "clarify", "none_of": ["42"], "asks_for": ["which ticker"], "echo_of": "..."}``: the
  answer asks a question, commits to none of the values that would only be right with the missing
  information, names the missing detail (one of ``asks_for``, when given) and is not the user's
  question repeated back (``echo_of``, when given).

What "commits to" means (one rule for numbers and text):

- **Negation**: a mention counts for nothing when one of the (up to) four words before it in the
  same clause is a negation ("It does not cost 16 dollars", "not within the range").
- **Alternatives**: a number counts for nothing inside a *list* that offers alternatives. A list is
  a run of numbers joined only by commas, semicolons, slashes, whitespace, ``and``/``or``/``either``/
  ``nor``/``maybe``/``perhaps``/``possibly``/``probably`` and at most one unit word between two numbers.
  It offers alternatives when any joint has ``or``, ``nor``, ``either``, a slash or a maybe-word, or
  when it holds more than ``MAX_LISTED`` numbers (a spray), or when it follows "between" (a range).
  "$15, $16 or $17" and "between 15 and 17" commit to none of
  them; "3.5, 4.2 and 5.1" (readings listed) and "$13 plus $3 for the crust makes $16" (working
  shown: ``plus`` and ``makes`` are no list joints) commit to each. A text mention joined to its
  neighbour by ``or`` ("increased or decreased", "19:30 or 19:45") counts for nothing too.
- **Opposites**: a text check whose ``any_of`` holds a direction or yes/no word also refuses that
  word's opposites (``OPPOSITES``), whether or not the spec lists them in ``none_of``: "it
  increased or decreased" fails a check for "increased".
- **Spray backstop**: an answer with more than ``MAX_NUMBERS`` distinct numbers fails every number check.

Honest answers that show their working still pass: the rules look at how a value is stated, never
at how many other values the working needs (up to ``MAX_NUMBERS``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

MAX_NUMBERS = 12  # distinct numbers; the synthetic golden answers state at most 9
MAX_LISTED = 4  # numbers in one list before the list counts as a spray of candidates
NEGATION_WINDOW = 4  # words before a mention, within its clause
ECHO_OVERLAP = 0.7  # share of the prompt's distinct words an answer repeats to count as an echo of it

_NUMBER = re.compile(r"(?<![\w.])[-−]?\$?\d[\d,]*(?:\.\d+)?|(?<![\w.])[-−]?\$?\.\d+")
_WORD = re.compile(r"\d+(?:\.\d+)?%?|[a-z0-9]+(?:-[a-z0-9]+)*")  # "follow-up" is one word, not "up"
_CLAUSE_END = re.compile(r"[;!?]|[.,:](?=\s|$)|\bbut\b|\bwhereas\b")
_NEGATION = re.compile(
    r"\b(?:not|no|never|neither|nor|without|cannot|isn't|wasn't|aren't|weren't|doesn't|didn't|don't|won't|"
    r"hasn't|haven't|can't|couldn't|shouldn't|rather than|instead of|other than|except)\b"
)
_LIST_CONNECTIVES = {"and", "or", "either", "nor", "maybe", "perhaps", "possibly", "probably"}
_ALTERNATIVE_WORDS = {"or", "either", "nor", "maybe", "perhaps", "possibly", "probably"}
_LIST_PUNCTUATION = set(",;/|%&")
_BETWEEN = re.compile(r"\bbetween\s*$", re.IGNORECASE)  # "between 15 and 17": a range, no value committed
_OR_BEFORE = re.compile(r"(?:\bor|\beither|/)\s*$")
_OR_AFTER = re.compile(r"^\s*(?:or\b|/)")

_INCREASE = (
    "increase",
    "increased",
    "increases",
    "increasing",
    "rose",
    "rise",
    "risen",
    "rising",
    "up",
    "grew",
    "gained",
)
_DECREASE = (
    "decrease",
    "decreased",
    "decreases",
    "decreasing",
    "fell",
    "fall",
    "fallen",
    "falling",
    "down",
    "dropped",
    "declined",
    "shrank",
)
_EXCLUSIVE = (
    (_INCREASE, _DECREASE),
    (("higher",), ("lower",)),
    (("above",), ("below",)),
    (("within",), ("outside", "above", "below")),
    (("yes",), ("no",)),
    (("true",), ("false",)),
)  # fmt: skip


def _opposites_table() -> dict[str, tuple[str, ...]]:
    """Each word of a pair of families refuses every word of the other family."""
    table: dict[str, set[str]] = {}
    for side_a, side_b in _EXCLUSIVE:
        for words, others in ((side_a, side_b), (side_b, side_a)):
            for word in words:
                table.setdefault(word, set()).update(others)
    return {word: tuple(sorted(opposites)) for word, opposites in table.items()}


OPPOSITES: dict[str, tuple[str, ...]] = _opposites_table()


class CheckSpecError(ValueError):
    """A rubric's check object is malformed."""


@dataclass(frozen=True)
class _Mention:
    value: float
    start: int
    end: int


def _number_mentions(text: str) -> list[_Mention]:
    mentions = []
    for match in _NUMBER.finditer(text):
        token = match.group().replace("−", "-").replace("$", "").replace(",", "")
        try:
            mentions.append(_Mention(float(token), match.start(), match.end()))
        except ValueError:
            continue
    return mentions


def numbers_in(text: str) -> list[float]:
    """All numbers written in ``text``, thousands separators and currency signs removed."""
    return [mention.value for mention in _number_mentions(text)]


def _negated(text: str, start: int) -> bool:
    """A negation among the few words before ``start``, in the same clause."""
    before = text[:start].lower()
    ends = list(_CLAUSE_END.finditer(before))
    clause = before[ends[-1].end() :] if ends else before
    words = re.findall(r"[a-z']+", clause)[-NEGATION_WINDOW:]
    return bool(_NEGATION.search(" ".join(words)))


def _joint(gap: str) -> str | None:
    """How the text between two numbers joins them: "alternative", "list", or None (not a list joint)."""
    words = re.findall(r"[a-z]+", gap.lower())
    others = [w for w in words if w not in _LIST_CONNECTIVES]
    symbols = {ch for ch in gap if not ch.isspace() and not ch.isalpha()}
    if len(others) > 1 or not symbols <= _LIST_PUNCTUATION:
        return None
    return "alternative" if "/" in symbols or _ALTERNATIVE_WORDS.intersection(words) else "list"


def _hedged_numbers(text: str, mentions: list[_Mention]) -> set[int]:
    """Indices of the mentions that sit in a list offering alternatives (see the module docstring)."""
    hedged: set[int] = set()
    run, alternative = [0] if mentions else [], False
    for i in range(1, len(mentions) + 1):
        joint = _joint(text[mentions[i - 1].end : mentions[i].start]) if i < len(mentions) else None
        if joint is not None:
            run.append(i)
            alternative = alternative or joint == "alternative"
            continue
        if alternative or len(run) > MAX_LISTED or _BETWEEN.search(text[: mentions[run[0]].start]):
            hedged.update(run)
        run, alternative = [i], False
    return hedged


def _check_number(answer: str, spec: Mapping[str, Any]) -> bool:
    target = float(spec["value"])
    abs_tol = float(spec.get("abs_tol", 1e-6))
    rel_tol = float(spec.get("rel_tol", 0.0))
    mentions = _number_mentions(answer)
    if len({m.value for m in mentions}) > MAX_NUMBERS:
        return False
    hedged = _hedged_numbers(answer, mentions)
    return any(
        math.isclose(m.value, target, rel_tol=rel_tol, abs_tol=abs_tol)
        and i not in hedged
        and not _negated(answer, m.start)
        for i, m in enumerate(mentions)
    )


def _phrase_spans(answer: str, phrase: str) -> Iterable[tuple[int, int]]:
    """Where ``phrase`` occurs in ``answer`` as whole words (case and spacing insensitive)."""
    words = [(m.group(), m.start(), m.end()) for m in _WORD.finditer(answer.lower())]
    target = _WORD.findall(phrase.lower())
    if not target:
        return
    for i in range(len(words) - len(target) + 1):
        if [w for w, _, _ in words[i : i + len(target)]] == target:
            yield words[i][1], words[i + len(target) - 1][2]


def _mentions(answer: str, phrase: str) -> bool:
    return any(True for _ in _phrase_spans(answer, phrase))


def _committed(answer: str, phrase: str) -> bool:
    """``phrase`` occurs, neither negated nor offered as one of two alternatives."""
    for start, end in _phrase_spans(answer, phrase):
        if _negated(answer, start):
            continue
        if _OR_BEFORE.search(answer[max(0, start - 12) : start].lower()) or _OR_AFTER.search(answer[end:].lower()):
            continue
        return True
    return False


def _refused(any_of: Iterable[str], none_of: Iterable[str]) -> list[str]:
    """``none_of`` plus the opposites of every direction or yes/no word in ``any_of``."""
    wanted = {phrase.lower().strip() for phrase in any_of}
    extra = [word for phrase in wanted for word in OPPOSITES.get(phrase, ()) if word not in wanted]
    return [*none_of, *extra]


def _check_text(answer: str, spec: Mapping[str, Any]) -> bool:
    any_of = spec.get("any_of") or []
    if not any_of:
        raise CheckSpecError("text check needs a non-empty 'any_of'")
    if not any(_committed(answer, phrase) for phrase in any_of):
        return False
    return not any(_mentions(answer, phrase) for phrase in _refused(any_of, spec.get("none_of", ())))


def _check_choice(answer: str, spec: Mapping[str, Any]) -> bool:
    right = spec["answer"]
    wrong = [option for option in spec.get("options", ()) if option != right]
    return _check_text(answer, {"any_of": [right], "none_of": wrong})


def _echoes(answer: str, prompt: str) -> bool:
    """The answer repeats most of the prompt's words (a question handed back is not a clarifying question)."""
    prompt_words = set(_WORD.findall(prompt.lower()))
    if not prompt_words:
        return False
    repeated = prompt_words & set(_WORD.findall(answer.lower()))
    return len(repeated) >= ECHO_OVERLAP * len(prompt_words)


def _check_clarify(answer: str, spec: Mapping[str, Any]) -> bool:
    if "?" not in answer or any(_mentions(answer, phrase) for phrase in spec.get("none_of", ())):
        return False
    asks_for = spec.get("asks_for")
    if asks_for is not None and not any(_committed(answer, phrase) for phrase in asks_for):
        return False
    echo_of = spec.get("echo_of")
    return not (echo_of and _echoes(answer, str(echo_of)))


_CHECKS = {"number": _check_number, "text": _check_text, "choice": _check_choice, "clarify": _check_clarify}


def run_check(spec: Mapping[str, Any], answer: str) -> bool:
    """Evaluate one check against a final answer; raises CheckSpecError for a bad spec."""
    kind = spec.get("type") if isinstance(spec, Mapping) else None
    rule = _CHECKS.get(kind)  # type: ignore[arg-type]
    if rule is None:
        raise CheckSpecError(f"unknown check type {kind!r}; known: {sorted(_CHECKS)}")
    try:
        return rule(answer or "", spec)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, CheckSpecError):
            raise
        raise CheckSpecError(f"malformed {kind} check {dict(spec)!r}: {exc}") from exc
