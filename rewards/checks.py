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

import functools
import math
import re
from typing import Any, Iterable, Mapping

from text_to_num import alpha2digit

from vtb_env.answer_values import (
    DATE,
    FALL_WORDS,
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
from vtb_rewards.claims import Claims

VERDICT_ALONE = 3  # a clause of this many words states its verdict word alone ("Yes.", "then down")
# words after which "up"/"down" is a phrasal verb's particle ("summing up", "break it down") and "above"/"below"
# points at text ("shown above", "see below"): no direction, no verdict
_UP_PARTICLE = re.compile(
    "sum|summing|add|adding|wrap|wrapping|break|breaking|look|looking|set|setting|follow|following|write|writing|"
    "back|backing|it|them|this|that|these|those"
)
_POINTER = re.compile("shown|seen|see|as|the|listed|noted|mentioned|given|stated|described|explained|written|computed")
_PARTICLE_BEFORE = {"up": _UP_PARTICLE, "down": _UP_PARTICLE, "above": _POINTER, "below": _POINTER}
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
    """An answer folded, its quotes of the dialogue blanked, its number words as digits, and its claims
    (``vtb_rewards.claims``). ``whole``: the whole answer when this is its slot (a verdict's evidence may
    stand in the working outside the slot)."""

    def __init__(self, answer: str, world: Mapping[str, Any], whole: "_Answer | None" = None) -> None:
        self.text = _digits(_unquote(fold(answer), [fold(p) for p in world.get("dialogue", ())]))
        self.slot = world.get("slot")  # answer_format="slot": how many values of each kind the slot may hold
        self.lower = self.text.lower()
        self.values = scan(self.text)
        self.world = world
        self.claims = Claims(self.text, self.values, world)
        self.whole = whole or self
        self._signed: dict[tuple[str, ...], list[int]] = {}
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

    def outside_world(self, kind: str, commitment: int | None = None) -> bool:
        """Some value of ``kind`` that the world does not account for (or more than the slot may hold), nor a
        true fact that is context: in working, or in a sentence after the ``commitment``'s."""
        allowed, stated = allowed_values(self.world.get(WORLD_KEYS[kind], ()), kind), self.stated(kind)
        if self.slot is not None and len({v.value for v in stated}) > self.slot.get(kind, 0):
            return True
        return any(not accounted_for(v, allowed) and not self.context(v, commitment) for v in stated)

    def context(self, value: Value, commitment: int | None) -> bool:
        """Is ``value`` a true fact told as context: in working, or in a sentence after the answer committed?"""
        claims = self.claims
        later = commitment is not None and claims.sentence_of(value.start) > claims.sentence_of(commitment)
        return (claims.aside(value.start) or later) and claims.true_fact(value)

    def committed(self, value: Value) -> bool:
        """Stated, not negated, in a statement: not in working, and not a true fact in parentheses (an aside)."""
        return self.states_at(value.start) and not (self.claims.aside(value.start) and self.claims.true_fact(value))

    def value_at(self, start: int) -> Value | None:
        return next((v for v in self.claims.values_between(start, start + 1)), None)

    def states_at(self, start: int) -> bool:
        return not _negated(self.text, start) and not self.claims.in_working(start)

    def verdict_clause(self, start: int) -> bool:
        """Does the word at ``start`` state a verdict: not as a particle or pointer ("summing up", "shown above"),
        in a sentence that states a value or in a clause that is the word alone ("Yes.", "then down")?"""
        before = self.text[max(0, start - 200) : start]
        ends = list(_CLAUSE_END.finditer(before))
        clause_start = start - len(before) + (ends[-1].end() if ends else 0)
        after = _CLAUSE_END.search(self.text, start)
        clause_end = after.start() if after else len(self.text)
        words = _WORD.findall(self.lower[clause_start:start])
        word = _WORD.match(self.lower, start)
        particle = _PARTICLE_BEFORE.get(word.group() if word else "")
        if words and particle is not None and particle.fullmatch(words[-1]):
            return False
        if len(words) + len(_WORD.findall(self.lower[start:clause_end])) <= VERDICT_ALONE:
            return True
        sentence = self.claims.values_between(self.claims.sentence_of(start), self.claims.sentence_end(start))
        return any(v.kind in (NUMBER, TIME) for v in sentence)

    def signed(self, family: tuple[str, ...]) -> list[int]:
        """Where a signed change states a direction of ``family``: "-2.75" a fall, "+50" a rise, for a change
        the turn's evidence holds (read once per family)."""
        if family not in self._signed:
            evidence = allowed_values((self.world.get("evidence") or self.world).get("numbers", ()), NUMBER)
            rise = family == RISE_WORDS
            self._signed[family] = [
                v.start
                for v in self.stated(NUMBER)
                if accounted_for(Value(NUMBER, abs(float(v.value)), v.start, v.end, v.decimals), evidence)
                and ((float(v.value) < 0 and not rise) or (rise and self.text[v.start - 1 : v.start] == "+"))
                and self.states_at(v.start)
            ]
        return self._signed[family]


def _digits(text: str) -> str:
    """Numbers written in words as digits ("seventeen points" -> "17 points"; ``text2num``, whose default
    threshold leaves "one" and "two" as words: "one detail" is no value)."""
    try:
        return alpha2digit(text, "en")
    except (ValueError, OverflowError):  # a string the parser cannot take stays as written
        return text


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


def _commits_to_phrase(answer: _Answer, phrase: str) -> bool:
    return any(not _negated(answer.text, start) for start in answer.phrase_starts(phrase))


def _verdict_word(phrase: str) -> bool:
    return fold(phrase).lower().strip() in OPPOSITES


def _claims_of(answer: _Answer, phrase: str) -> list[int]:
    """Where the answer claims ``phrase``: stated, not negated, in a statement; a verdict word only in a
    verdict's clause; a direction also by a signed change."""
    starts = [start for start in answer.phrase_starts(phrase) if answer.states_at(start)]
    if _values_of_phrase(phrase):  # a value spelled as a phrase ("11:00") is a value: a true fact aside is no claim
        starts = [start for start in starts if (value := answer.value_at(start)) is None or answer.committed(value)]
    if _verdict_word(phrase):
        starts = [start for start in starts if answer.verdict_clause(start)]
        word = fold(phrase).lower().strip()
        starts += next((answer.signed(family) for family in (RISE_WORDS, FALL_WORDS) if word in family), [])
    return sorted(starts)


# --- the rules -------------------------------------------------------------------------------------------


def _matches(value: Value, target: float, abs_tol: float, rel_tol: float, falling: bool) -> bool:
    """``value`` is the target, or a signed change whose size is the target ("-2.75" for a fall of 2.75) when
    the answer claims no rise."""
    close = math.isclose(float(value.value), target, rel_tol=rel_tol, abs_tol=abs_tol)
    return close or (
        falling and math.isclose(-float(value.value), target, rel_tol=rel_tol, abs_tol=abs_tol) and target > 0
    )


def _check_number(answer: _Answer, spec: Mapping[str, Any]) -> bool:
    target = float(spec["value"])
    abs_tol, rel_tol = float(spec.get("abs_tol", 1e-6)), float(spec.get("rel_tol", 0.0))
    falling = not any(_claims_of(answer, word) for word in RISE_WORDS)
    hits = [v for v in answer.stated(NUMBER) if answer.committed(v) and _matches(v, target, abs_tol, rel_tol, falling)]
    return bool(hits) and not answer.outside_world(NUMBER, hits[0].start)


def _phrase_values(phrases: Iterable[str]) -> list[Value]:
    return [v for phrase in phrases for v in _values_of_phrase(str(phrase))]


@functools.lru_cache(maxsize=4096)
def _values_of_phrase(phrase: str) -> tuple[Value, ...]:
    """The values a check's phrase states (checks repeat their phrases: read each once)."""
    return tuple(scan(fold(phrase)))


def _has_evidence(answer: _Answer) -> bool:
    evidence = answer.world.get("evidence")
    if not evidence:
        return True
    return any(
        accounted_for(v, allowed_values(evidence.get(WORLD_KEYS[v.kind], ()), v.kind))
        and not _negated(answer.text, v.start)
        for v in answer.values
        if v.kind in (NUMBER, TIME)
    )


def _refused(answer: _Answer, phrase: str, commitment: int) -> bool:
    """Does the answer claim a refused ``phrase``? Not when negated, in working, or (a verdict word) outside a
    verdict's clause; not a name with its own printed value in parentheses or in a sentence after the
    commitment's (a runner-up)."""
    claims = answer.claims
    for start in _claims_of(answer, phrase):
        mention = claims.mention_at.get(start)
        aside = claims.aside(start) or claims.sentence_of(start) > claims.sentence_of(commitment)
        if not (aside and mention is not None and claims.carries_own_value(mention)):
            return True
    return False


def _check_text(answer: _Answer, spec: Mapping[str, Any]) -> bool:
    any_of = [str(p) for p in spec.get("any_of") or []]
    if not any_of:
        raise CheckSpecError("text check needs a non-empty 'any_of'")
    wanted = {fold(p).lower().strip() for p in any_of}
    verdict = bool(wanted & OPPOSITES.keys())
    claimed = [start for p in any_of for start in (*_claims_of(answer, p), *_same_value_starts(answer, p))]
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


def _same_value_starts(answer: _Answer, phrase: str) -> list[int]:
    """A date or time phrase matches the same date or time however the answer spells it: where it does."""
    targets = [v for v in _phrase_values([phrase]) if v.kind in (DATE, TIME)]
    if len(targets) != 1:
        return []
    return [
        v.start
        for v in answer.values
        if v.kind == targets[0].kind and v.value == targets[0].value and answer.committed(v)
    ]


def _check_choice(answer: _Answer, spec: Mapping[str, Any]) -> bool:
    right = spec["answer"]
    return _check_text(answer, {"any_of": [right], "none_of": [o for o in spec.get("options", ()) if o != right]})


def _check_clarify(answer: _Answer, spec: Mapping[str, Any]) -> bool:
    if "?" not in answer.text or any(answer.outside_world(kind) for kind in (NUMBER, TIME, DATE)):
        return False
    stated = [
        start
        for phrase in (*spec.get("none_of", ()), *answer.world.get("clarify_rivals", ()))
        for start in answer.phrase_starts(phrase)
    ]
    if any(not answer.claims.aside(start) and not _negated(answer.text, start) for start in stated):
        return False  # a value of the page as a guess; the same value in working (a table of the page) is none
    asks_for = spec.get("asks_for")
    return asks_for is None or any(_commits_to_phrase(answer, phrase) for phrase in asks_for)


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
        for value in _phrase_values(check.get("any_of", ()) or ()):
            asked[value.kind].add(value.value)
        verdicts += any(_verdict_word(str(p)) for p in check.get("any_of", ()) or ())
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
        whole = _Answer(answer or "", world)
        met = rule(_Answer(answer_slot(answer or "") or "", world, whole) if slot_mode else whole, spec)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, CheckSpecError):
            raise
        raise CheckSpecError(f"malformed {kind} check {dict(spec)!r}: {exc}") from exc
    return all([met, *(run_check(check, answer, world) for check in given)])  # every given check is validated


def numbers_in(text: str) -> list[float]:
    """All numbers written in ``text`` (folded; thousands separators and currency signs removed)."""
    return [float(v.value) for v in scan(fold(text)) if v.kind == NUMBER]
