"""Exact programmatic rubric checks against a closed world: a verdict without an LLM judge that pays only
for the work.

A rubric's ``check`` is a JSON object; ``type`` selects the rule:

- ``{"type": "number", "value": 13.5, "abs_tol": 0.01, "rel_tol": 0.0}``: the answer commits to a number
  equal to ``value`` within tolerance (``1,234.5``, ``$13``, ``-4``, ``12%`` all parse).
- ``{"type": "text", "any_of": ["Lisbon"], "none_of": ["Porto"]}``: one of ``any_of`` occurs as a whole
  word or phrase (case and spacing insensitive), committed to, and none of ``none_of`` occurs. A phrase
  that is a date or a clock time matches the same date or time in any common spelling. A name check
  (no value, no direction) also refuses every name of the world's ``rival_names``.
- ``{"type": "choice", "answer": "B", "options": ["A", "B", "C"]}``: the right option and no other.
- ``{"type": "clarify", "none_of": ["42"], "asks_for": ["which ticker"]}``: a question that names the
  missing detail (one of ``asks_for``), no detail of another scene (the world's ``clarify_rivals``) and
  commits to none of ``none_of``.

Any check may carry ``"given": [check, ...]``: it is Met only when those checks are Met on the same answer.
The generator binds a value that a transcription of the page would state (the page prints no rival of its
kind outside the turn's world: a ticket's one date, every row of a superlative) to the turn's critical
checks: credit for reading it comes with the answer it leads to (``vtb_env.synth.world.bind_giveaways``).

Every rule reads the answer the same way:

1. **Fold** (``vtb_env.answer_values.fold``): NFKC, then look-alikes to ASCII; a Cyrillic "о" is an "o".
2. **Quotes state nothing**: a run of ``QUOTE_WORDS`` or more words copied from the user's prompts
   (the world's ``dialogue``) is blanked, so restating the question neither passes nor fails a check.
3. **Closed world**: every date, clock time and number the answer states must be in the turn's world
   (``vtb_env.synth.world``: the dialogue's values, the facts read, the expected values and the
   intermediate values of sound computations). A number written with *d* decimals stands for any world
   value it rounds (``105.7`` for 105.714...). One value outside the world fails every check of its
   kind in that turn: a hedge ("16 (or 17)"), a spray of candidates or a guess has nowhere to hide.
   Without a world (a task that has none) the world is the turn's own prompt, golden answer and checks
   (``implied_world``).
4. **Commitment**: a value or phrase counts for nothing when one of the four words before it in its
   clause is a negation ("It does not cost 16 dollars").
5. **Coin flips need their evidence**: a direction or verdict word (``OPPOSITES``: increased/decreased,
   above/below/within, yes/no...) counts only when the answer also states a value that decides it (the
   world's ``evidence``: a fact read in this turn or an expected number), never beside an opposite, and
   never beside a number or time outside the world (its evidence's kinds are closed, as a value's are).

What stays possible (documented in docs/rewards.md): two values that are both in the world (a right
value and the working that leads to it) can still be written as alternatives; neither can be wrong.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Mapping

from vtb_env.answer_values import (
    DATE,
    NUMBER,
    OPPOSITES,
    TIME,
    WORLD_KEYS,
    Value,
    accounted_for,
    allowed_values,
    checked_kinds,
    fold,
    scan,
)

QUOTE_WORDS = 4  # a run this long copied from the user's prompts is a quote, not a statement
NEGATION_WINDOW = 4  # words before a mention, within its clause

_WORD = re.compile(r"\d+(?:\.\d+)?%?|[a-z0-9]+(?:-[a-z0-9]+)*")  # "follow-up" is one word, not "up"
_CLAUSE_END = re.compile(r"[;!?]|[.,:](?=\s|$)|\bbut\b|\bwhereas\b")
_NEGATION = re.compile(
    r"\b(?:not|no|never|neither|nor|without|cannot|isn't|wasn't|aren't|weren't|doesn't|didn't|don't|won't|"
    r"hasn't|haven't|can't|couldn't|shouldn't|rather than|instead of|other than|except)\b"
)


class CheckSpecError(ValueError):
    """A rubric's check object is malformed."""


# --- reading the answer ----------------------------------------------------------------------------------


class _Answer:
    """An answer folded, its quotes of the dialogue blanked, and the values it states."""

    def __init__(self, answer: str, world: Mapping[str, Any]) -> None:
        self.text = _unquote(fold(answer), [fold(p) for p in world.get("dialogue", ())])
        self.slot = world.get("slot")  # answer_format="slot": how many values of each kind the slot may hold
        self.lower = self.text.lower()
        self.values = scan(self.text)
        self.world = world
        self.words = [(m.group(), m.start()) for m in _WORD.finditer(self.lower)]
        self._starts: dict[str, list[int]] = {}  # word -> its indices in ``words``: phrase look-ups stay linear
        for index, (word, _) in enumerate(self.words):
            self._starts.setdefault(word, []).append(index)

    def phrase_starts(self, phrase: str) -> Iterable[int]:
        """Where ``phrase`` occurs as whole words (spacing insensitive): the start offsets."""
        target = _WORD.findall(fold(phrase).lower())
        for i in self._starts.get(target[0], ()) if target else ():
            if [w for w, _ in self.words[i : i + len(target)]] == target:
                yield self.words[i][1]

    def stated(self, kind: str) -> list[Value]:
        return [v for v in self.values if v.kind == kind]

    def outside_world(self, kind: str) -> bool:
        """Some value of ``kind`` that the world does not account for (or more than the slot may hold)."""
        allowed, stated = allowed_values(self.world.get(WORLD_KEYS[kind], ()), kind), self.stated(kind)
        if self.slot is not None and len({v.value for v in stated}) > self.slot.get(kind, 0):
            return True
        return any(not accounted_for(v, allowed) for v in stated)

    def committed(self, value: Value) -> bool:
        return not _negated(self.text, value.start)


def _unquote(text: str, dialogue: list[str]) -> str:
    """Blank every run of ``QUOTE_WORDS`` or more words that the user's prompts contain in that order."""
    grams = set()
    for prompt in dialogue:
        prompt_words = _WORD.findall(prompt.lower())
        grams.update(tuple(prompt_words[i : i + QUOTE_WORDS]) for i in range(len(prompt_words) - QUOTE_WORDS + 1))
    if not grams:
        return text
    words = list(_WORD.finditer(text.lower()))
    quoted_until, chars = -1, list(text)
    for i in range(len(words) - QUOTE_WORDS + 1):
        if tuple(w.group() for w in words[i : i + QUOTE_WORDS]) in grams:
            quoted_until = i + QUOTE_WORDS - 1
        if i <= quoted_until:
            start, end = words[i].span()
            chars[start:end] = " " * (end - start)
    for i in range(max(0, len(words) - QUOTE_WORDS + 1), min(len(words), quoted_until + 1)):
        start, end = words[i].span()
        chars[start:end] = " " * (end - start)
    return "".join(chars)


def _negated(text: str, start: int) -> bool:
    """A negation among the few words before ``start``, in the same clause (looked for in a bounded window)."""
    before = text[max(0, start - 200) : start].lower()
    ends = list(_CLAUSE_END.finditer(before))
    clause = before[ends[-1].end() :] if ends else before
    words = re.findall(r"[a-z']+", clause)[-NEGATION_WINDOW:]
    return bool(_NEGATION.search(" ".join(words)))


def _mentions(answer: _Answer, phrase: str) -> bool:
    return any(True for _ in answer.phrase_starts(phrase))


def _commits_to_phrase(answer: _Answer, phrase: str) -> bool:
    return any(not _negated(answer.text, start) for start in answer.phrase_starts(phrase))


# --- the rules -------------------------------------------------------------------------------------------


def _check_number(answer: _Answer, spec: Mapping[str, Any]) -> bool:
    target = float(spec["value"])
    abs_tol, rel_tol = float(spec.get("abs_tol", 1e-6)), float(spec.get("rel_tol", 0.0))
    if answer.outside_world(NUMBER):
        return False
    return any(
        math.isclose(float(v.value), target, rel_tol=rel_tol, abs_tol=abs_tol) and answer.committed(v)
        for v in answer.stated(NUMBER)
    )


def _phrase_values(phrases: Iterable[str]) -> list[Value]:
    return [v for phrase in phrases for v in scan(fold(str(phrase)))]


def _has_evidence(answer: _Answer) -> bool:
    evidence = answer.world.get("evidence")
    if not evidence:
        return True
    return any(
        accounted_for(v, allowed_values(evidence.get(WORLD_KEYS[v.kind], ()), v.kind)) and answer.committed(v)
        for v in answer.values
        if v.kind in (NUMBER, TIME)
    )


def _check_text(answer: _Answer, spec: Mapping[str, Any]) -> bool:
    any_of = [str(p) for p in spec.get("any_of") or []]
    if not any_of:
        raise CheckSpecError("text check needs a non-empty 'any_of'")
    wanted = {fold(p).lower().strip() for p in any_of}
    verdict = bool(wanted & OPPOSITES.keys())
    kinds = checked_kinds(spec)  # a verdict is decided by values: its evidence's kinds are closed too
    if any(answer.outside_world(kind) for kind in kinds):
        return False
    refused = [*spec.get("none_of", ()), *(w for p in wanted for w in OPPOSITES.get(p, ()) if w not in wanted)]
    if any(_mentions(answer, phrase) for phrase in refused):
        return False
    if verdict and not _has_evidence(answer):
        return False
    if not kinds and not verdict:  # a name: no other name of the vocabulary beside it
        if any(_mentions(answer, name) for name in answer.world.get("rival_names", ())):
            return False
    return any(_commits_to_phrase(answer, p) or _states_same_value(answer, p) for p in any_of)


def _states_same_value(answer: _Answer, phrase: str) -> bool:
    """A date or time phrase matches the same date or time however the answer spells it."""
    targets = [v for v in _phrase_values([phrase]) if v.kind in (DATE, TIME)]
    if len(targets) != 1:
        return False
    return any(v.kind == targets[0].kind and v.value == targets[0].value and answer.committed(v) for v in answer.values)


def _check_choice(answer: _Answer, spec: Mapping[str, Any]) -> bool:
    right = spec["answer"]
    return _check_text(answer, {"any_of": [right], "none_of": [o for o in spec.get("options", ()) if o != right]})


def _check_clarify(answer: _Answer, spec: Mapping[str, Any]) -> bool:
    if "?" not in answer.text or any(answer.outside_world(kind) for kind in (NUMBER, TIME, DATE)):
        return False
    if any(_mentions(answer, phrase) for phrase in (*spec.get("none_of", ()), *answer.world.get("clarify_rivals", ()))):
        return False
    asks_for = spec.get("asks_for")
    return asks_for is None or any(_commits_to_phrase(answer, phrase) for phrase in asks_for)


# --- the answer slot (answer_format="slot") ----------------------------------------------------------------

ANSWER_FORMATS = ("free", "slot")
_BOXED = re.compile(r"\\boxed\{")
_ANSWER_LINE = re.compile(r"(?im)^[\s*_#>-]*(?:final\s+)?answer\s*[*_]*\s*:[*_]*(.*)$")


def answer_slot(answer: str) -> str | None:
    """The answer's slot, the common RLVR convention: the last ``\\boxed{...}`` (balanced braces), else the
    last line that starts with ``Answer:``; None when it has neither."""
    text = fold(answer)
    boxes = list(_BOXED.finditer(text))
    if boxes:
        start = depth = boxes[-1].end()
        depth = 1
        for i in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                return text[start:i]
        return None
    lines = _ANSWER_LINE.findall(text)
    return lines[-1].strip() if lines else None


def slot_capacity(checks: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many distinct values of each kind a turn's slot may hold: one per value its checks ask for."""
    asked: dict[str, set[Any]] = {NUMBER: set(), TIME: set(), DATE: set()}
    for check in checks:
        if check.get("type") == "number":
            asked[NUMBER].add(float(check["value"]))
        for value in _phrase_values(check.get("any_of", ()) or ()):
            asked[value.kind].add(value.value)
    return {kind: len(values) for kind, values in asked.items()}


_CHECKS = {"number": _check_number, "text": _check_text, "choice": _check_choice, "clarify": _check_clarify}


# --- worlds ----------------------------------------------------------------------------------------------


def _world_of(texts: Iterable[str], checks: Iterable[Mapping[str, Any]], dialogue: list[str]) -> dict[str, Any]:
    numbers, times, dates = set(), set(), set()
    phrases = []
    for check in checks:
        if isinstance(check, Mapping) and check.get("type") == "number" and "value" in check:
            numbers.add(float(check["value"]))
        if isinstance(check, Mapping):
            phrases += [str(p) for p in check.get("any_of", ()) or ()] + [str(check.get("answer", ""))]
    for value in (v for text in [*texts, *phrases] for v in scan(fold(text))):
        {NUMBER: numbers, TIME: times, DATE: dates}[value.kind].add(value.value)
    numbers |= {-n for n in numbers}
    return {"numbers": sorted(numbers), "times": sorted(times), "dates": sorted(dates), "dialogue": dialogue}


def implied_world(
    prompt: str = "", golden_answer: str = "", checks: Iterable[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """The world of a turn that carries none: the values of its prompt, golden answer and checks."""
    return _world_of([prompt, golden_answer], list(checks), [prompt] if prompt else [])


def run_check(spec: Mapping[str, Any], answer: str, world: Mapping[str, Any] | None = None) -> bool:
    """Evaluate one check against a final answer in the turn's closed ``world`` (``Turn.world``; None: the
    check's own values, ``implied_world``). Raises CheckSpecError for a bad spec."""
    kind = spec.get("type") if isinstance(spec, Mapping) else None
    rule = _CHECKS.get(kind)  # type: ignore[arg-type]
    if rule is None:
        raise CheckSpecError(f"unknown check type {kind!r}; known: {sorted(_CHECKS)}")
    world = world if world is not None else implied_world(checks=[spec])
    given = spec.get("given") or ()
    if not isinstance(given, list | tuple):
        raise CheckSpecError(f"'given' must be a list of checks, got {given!r}")
    read = answer_slot(answer or "") or "" if world.get("slot") is not None and kind != "clarify" else answer
    try:  # a clarifying question is no value: the slot rule reads it whole
        met = rule(_Answer(read or "", world), spec)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, CheckSpecError):
            raise
        raise CheckSpecError(f"malformed {kind} check {dict(spec)!r}: {exc}") from exc
    return all([met, *(run_check(check, answer, world) for check in given)])  # every given check is validated


def numbers_in(text: str) -> list[float]:
    """All numbers written in ``text`` (folded; thousands separators and currency signs removed)."""
    return [float(v.value) for v in scan(fold(text)) if v.kind == NUMBER]
