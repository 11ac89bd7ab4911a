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
2. **Quotes state nothing**: a run of ``reading.QUOTE_WORDS`` or more words copied from the user's prompts
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
    RISE_WORDS,
    TIME,
    WORLD_KEYS,
    Value,
    accounted_for,
    allowed_values,
    checked_kinds,
    fold,
    scan,
)
from vtb_rewards.reading import (
    ReadAnswer,
    claims_of,
    commits_to_phrase,
    is_verdict_word,
    negated,
    phrase_values,
)


class CheckSpecError(ValueError):
    """A rubric's check object is malformed."""


# --- the rules -------------------------------------------------------------------------------------------


def _matches(value: Value, target: float, abs_tol: float, rel_tol: float, falling: bool) -> bool:
    """``value`` is the target, or a signed change whose size is the target ("-2.75" for a fall of 2.75) when
    the answer claims no rise."""
    close = math.isclose(float(value.value), target, rel_tol=rel_tol, abs_tol=abs_tol)
    return close or (
        falling and math.isclose(-float(value.value), target, rel_tol=rel_tol, abs_tol=abs_tol) and target > 0
    )


def _check_number(answer: ReadAnswer, spec: Mapping[str, Any]) -> bool:
    target = float(spec["value"])
    abs_tol, rel_tol = float(spec.get("abs_tol", 1e-6)), float(spec.get("rel_tol", 0.0))
    falling = not any(claims_of(answer, word) for word in RISE_WORDS)
    hits = [v for v in answer.stated(NUMBER) if answer.committed(v) and _matches(v, target, abs_tol, rel_tol, falling)]
    return bool(hits) and not answer.outside_world(NUMBER, hits[0].start)


def _has_evidence(answer: ReadAnswer) -> bool:
    evidence = answer.world.get("evidence")
    if not evidence:
        return True
    return any(
        accounted_for(v, allowed_values(evidence.get(WORLD_KEYS[v.kind], ()), v.kind))
        and not negated(answer.text, v.start)
        for v in answer.values
        if v.kind in (NUMBER, TIME)
    )


def _refused(answer: ReadAnswer, phrase: str, commitment: int) -> bool:
    """Does the answer claim a refused ``phrase``? Not when negated, in working, or (a verdict word) outside a
    verdict's clause; not a name with its own printed value in parentheses or in a sentence after the
    commitment's (a runner-up)."""
    claims = answer.claims
    for start in claims_of(answer, phrase):
        mention = claims.mention_at.get(start)
        aside = claims.aside(start) or claims.sentence_of(start) > claims.sentence_of(commitment)
        if not (aside and mention is not None and claims.carries_own_value(mention)):
            return True
    return False


def _check_text(answer: ReadAnswer, spec: Mapping[str, Any]) -> bool:
    any_of = [str(p) for p in spec.get("any_of") or []]
    if not any_of:
        raise CheckSpecError("text check needs a non-empty 'any_of'")
    wanted = {fold(p).lower().strip() for p in any_of}
    verdict = bool(wanted & OPPOSITES.keys())
    claimed = [start for p in any_of for start in (*claims_of(answer, p), *_same_value_starts(answer, p))]
    if not claimed:
        return False
    commitment = min(claimed)
    kinds = checked_kinds(spec)  # a verdict is decided by values: its evidence's kinds are closed too
    if any(answer.outside_world(kind, commitment) for kind in kinds):
        return False
    refused = [*spec.get("none_of", ()), *(w for p in wanted for w in OPPOSITES.get(p, ()) if w not in wanted)]
    if not kinds and not verdict:  # a name: no other name of the vocabulary claimed beside it
        refused += answer.world.get("rival_names", ())
    if any(_refused(answer, phrase, commitment) for phrase in refused):
        return False
    return not verdict or _has_evidence(answer.whole)


def _same_value_starts(answer: ReadAnswer, phrase: str) -> list[int]:
    """A date or time phrase matches the same date or time however the answer spells it: where it does."""
    targets = [v for v in phrase_values([phrase]) if v.kind in (DATE, TIME)]
    if len(targets) != 1:
        return []
    return [
        v.start
        for v in answer.values
        if v.kind == targets[0].kind and v.value == targets[0].value and answer.committed(v)
    ]


def _check_choice(answer: ReadAnswer, spec: Mapping[str, Any]) -> bool:
    right = spec["answer"]
    return _check_text(answer, {"any_of": [right], "none_of": [o for o in spec.get("options", ()) if o != right]})


def _check_clarify(answer: ReadAnswer, spec: Mapping[str, Any]) -> bool:
    if "?" not in answer.text or any(answer.outside_world(kind) for kind in (NUMBER, TIME, DATE)):
        return False
    stated = [
        start
        for phrase in (*spec.get("none_of", ()), *answer.world.get("clarify_rivals", ()))
        for start in answer.phrase_starts(phrase)
    ]
    if any(not answer.claims.aside(start) and not negated(answer.text, start) for start in stated):
        return False  # a value of the page as a guess; the same value in working (a table of the page) is none
    asks_for = spec.get("asks_for")
    return asks_for is None or any(commits_to_phrase(answer, phrase) for phrase in asks_for)


# --- the answer slot (answer_format="slot") ----------------------------------------------------------------

ANSWER_FORMATS = ("free", "slot")
_BOXED = re.compile(r"\\boxed\{")
_ANSWER_LINE = re.compile(r"(?im)^[\s*_#>-]*(?:final\s+)?answer\s*[*_]*\s*:[*_]*(.*)$")


def _boxes(text: str) -> list[str]:
    """The contents of every ``\\boxed{...}`` (balanced braces; an unclosed one holds nothing)."""
    found = []
    for box in _BOXED.finditer(text):
        depth = 1
        for i in range(box.end(), len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                found.append(text[box.end() : i])
                break
    return found


def answer_slot(answer: str) -> str | None:
    """The answer's slot, the common RLVR convention: a ``\\boxed{...}`` (balanced braces), else a line that
    starts with ``Answer:``; None when it has neither, and None when it has two that differ (a hedge: "\\boxed{16}
    ... \\boxed{17}"). Repeating the same slot is no hedge."""
    text = fold(answer)
    slots = [slot.strip() for slot in (_boxes(text) or _ANSWER_LINE.findall(text))]
    if not slots or len({re.sub(r"[\s$*_.,;]+", "", slot.lower()) for slot in slots}) > 1:
        return None
    return slots[-1]


def slot_capacity(checks: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many distinct values of each kind a turn's slot may hold: one per value its checks ask for, and one
    number for a verdict (the value it is decided by: "\\boxed{7, within}")."""
    asked: dict[str, set[Any]] = {NUMBER: set(), TIME: set(), DATE: set()}
    verdicts = 0
    for check in checks:
        if check.get("type") == "number":
            asked[NUMBER].add(float(check["value"]))
        for value in phrase_values(check.get("any_of", ()) or ()):
            asked[value.kind].add(value.value)
        verdicts += any(is_verdict_word(str(p)) for p in check.get("any_of", ()) or ())
    capacity = {kind: len(values) for kind, values in asked.items()}
    capacity[NUMBER] += min(verdicts, 1)
    return capacity


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
    slot_mode = world.get("slot") is not None and kind != "clarify"  # a clarifying question is read whole
    if kind == "clarify":
        world = {key: value for key, value in world.items() if key != "slot"}
    try:
        whole = ReadAnswer(answer or "", world)
        met = rule(ReadAnswer(answer_slot(answer or "") or "", world, whole) if slot_mode else whole, spec)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, CheckSpecError):
            raise
        raise CheckSpecError(f"malformed {kind} check {dict(spec)!r}: {exc}") from exc
    return all([met, *(run_check(check, answer, world) for check in given)])  # every given check is validated


def numbers_in(text: str) -> list[float]:
    """All numbers written in ``text`` (folded; thousands separators and currency signs removed)."""
    return [float(v.value) for v in scan(fold(text)) if v.kind == NUMBER]
