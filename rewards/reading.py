"""How the exact checks read an answer (``vtb_rewards.checks``): folded, its quotes of the dialogue blanked,
its number words as digits, its claims (``vtb_rewards.claims``), negation scope and the clauses where a verdict
word states a verdict. The rules that decide a check live in ``vtb_rewards.checks``."""

from __future__ import annotations

import functools
import re
from typing import Any, Iterable, Mapping

from text_to_num import alpha2digit

from vtb_env.answer_values import (
    FALL_WORDS,
    NUMBER,
    OPPOSITES,
    RISE_WORDS,
    TIME,
    WORLD_KEYS,
    Value,
    accounted_for,
    allowed_values,
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


class ReadAnswer:
    """An answer folded, its quotes of the dialogue blanked, its number words as digits, and its claims
    (``vtb_rewards.claims``). ``whole``: the whole answer when this is its slot (a verdict's evidence may
    stand in the working outside the slot)."""

    def __init__(self, answer: str, world: Mapping[str, Any], whole: "ReadAnswer | None" = None) -> None:
        self.text = _digits(_unquote(fold(answer), [fold(p) for p in world.get("dialogue", ())]))
        self.slot = world.get("slot")  # answer_format="slot": how many values of each kind the slot may hold
        self.lower = self.text.lower()
        numbers = allowed_values(world.get("numbers", ()), NUMBER)
        self.values = [v for v in scan(self.text) if not is_reference(self.text, v, world.get("pictures"), numbers)]
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
        true fact that is context: in working, or in a sentence after the ``commitment``'s; or a value given to
        the wrong row (``Claims.misattributed``), wherever it stands."""
        allowed, stated = allowed_values(self.world.get(WORLD_KEYS[kind], ()), kind), self.stated(kind)
        if self.slot is not None and len({v.value for v in stated}) > self.slot.get(kind, 0):
            return True
        return any(
            (not accounted_for(v, allowed) and not self.context(v, commitment))
            or (self.claims.misattributed(v) and not negated(self.text, v.start))
            for v in stated
        )

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
        return not negated(self.text, start) and not self.claims.in_working(start)

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


_PICTURE_BEFORE = re.compile(
    r"\b(?:image|picture|photo|photograph|page|snapshot|screenshot|figure|pic)s?\s*(?:#|no\.?|number)?\s*$", re.I
)
_COUNT_AFTER = re.compile(r"\s+(?:[a-z]+\s+)?([a-z]+)", re.I)  # "6 rows", "6 printed rows"
_ROW_NOUNS = ("row", "entry", "item", "line", "record")


def is_reference(text: str, value: Value, pictures: Mapping[str, Any] | None, numbers: Any) -> bool:
    """Is ``value`` a reference to the pictures, not a value: a picture's ordinal ("image 2", "page #1") or a
    shown picture's row count before a noun that counts rows ("6 rows", "7 printed items"), by the world's
    ``pictures``? A reference is no claim: it neither answers nor rivals, and a hedge cannot offer it as a
    candidate ("0.0 (or 1.0) mm" offers 1.0, not image 1). A count the world's ``numbers`` (``allowed_values``
    form) hold stays a value (the asked number of stops may be a page's row count)."""
    if not pictures or value.kind != NUMBER or value.decimals or not float(value.value).is_integer():
        return False
    n = int(float(value.value))
    if 1 <= n <= int(pictures.get("count", 0)) and _PICTURE_BEFORE.search(text[max(0, value.start - 40) : value.start]):
        return True
    counted = _COUNT_AFTER.match(text, value.end)
    if not counted or n not in pictures.get("row_counts", ()):
        return False
    if accounted_for(value, numbers):
        return False
    noun = counted.group(1).lower()
    return any(
        noun in (row, row + "s", row + "es", row[:-1] + "ies") for row in (*_ROW_NOUNS, *pictures.get("row_nouns", ()))
    )


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


def negated(text: str, start: int) -> bool:
    """A negation among the few words before ``start``, in the same clause (looked for in a bounded window)."""
    before = text[max(0, start - 200) : start].lower()
    ends = list(_CLAUSE_END.finditer(before))
    clause = before[ends[-1].end() :] if ends else before
    words = re.findall(r"[a-z']+", clause)[-NEGATION_WINDOW:]
    return bool(_NEGATION.search(" ".join(words)))


def commits_to_phrase(answer: ReadAnswer, phrase: str) -> bool:
    return any(not negated(answer.text, start) for start in answer.phrase_starts(phrase))


def is_verdict_word(phrase: str) -> bool:
    return fold(phrase).lower().strip() in OPPOSITES


def claims_of(answer: ReadAnswer, phrase: str) -> list[int]:
    """Where the answer claims ``phrase``: stated, not negated, in a statement; a verdict word only in a
    verdict's clause; a direction also by a signed change."""
    starts = [start for start in answer.phrase_starts(phrase) if answer.states_at(start)]
    if values_of_phrase(phrase):  # a value spelled as a phrase ("11:00") is a value: a true fact aside is no claim
        starts = [start for start in starts if (value := answer.value_at(start)) is None or answer.committed(value)]
    if is_verdict_word(phrase):
        starts = [start for start in starts if answer.verdict_clause(start)]
        word = fold(phrase).lower().strip()
        starts += next((answer.signed(family) for family in (RISE_WORDS, FALL_WORDS) if word in family), [])
    return sorted(starts)


def phrase_values(phrases: Iterable[str]) -> list[Value]:
    return [v for phrase in phrases for v in values_of_phrase(str(phrase))]


@functools.lru_cache(maxsize=4096)
def values_of_phrase(phrase: str) -> tuple[Value, ...]:
    """The values a check's phrase states (checks repeat their phrases: read each once)."""
    return tuple(scan(fold(phrase)))
