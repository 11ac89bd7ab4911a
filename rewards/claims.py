"""The claim model: how the exact checks read an answer, as claims rather than wording.

An LLM judge reads what an answer *claims*; the exact checks (``vtb_rewards.checks``) read it the same way,
in three parts:

- **Statements and working.** A table (a line with two or more ``|``) and a list (lines that start with a
  bullet or an enumerator, two or more lines ``Name: value`` that start with a printed name, or a sentence
  that only lists two or more printed names with their own values) are the answer's *working*: what it read
  and compared. A true fact in parentheses is working too (an aside:
  "Magnesium is 2.0 (the page also lists Urea, 18.0)"), unless the parenthesis computes ("(39 km + 7 km)"
  states its values); any other value or word in parentheses is a statement ("Budapest (102 m)").
  Everything else is a *statement*; so is a line that gives the answer (``Answer:``, ``\\boxed{}``)
  wherever it stands.
- **Attributions.** A value belongs to the printed name (the world's ``facts``: every row label the pages
  shown so far print) that stands last before it in its sentence, line or table row. The attribution is a
  *true fact* when that name prints the value (on any snapshot shown so far, or in its printed extra: a
  lab test's reference range), or the name that follows it in its sentence does ("28 at Brookfield"). It
  is *false* when the value is told of a name directly ("Pinecrest has 28", "| Pinecrest | 28 |") that
  prints another value of its kind, while a third name prints it and the turn's computation does not.
- **Commitment.** A check is met by what the answer states, not negated, in a statement: working commits
  to nothing, so a transcription of the page (a table, a list, every row in parentheses) answers no question.

What follows for every check (docs/rewards.md, "The claim model"):

- Working may state any value of the world and any true fact. A statement may state only values of the
  world (the turn's closed world: docs/rewards.md, rule 3). So a true fact about a row the question does not
  ask is context in working and a second candidate in a statement: a reader who transcribes the page
  without reading the question either commits to nothing or states rivals, and meets nothing.
- A value in working that is neither in the world nor a true fact (a guess hidden in a table) fails the
  checks of its kind, as a statement's would; so does a false attribution, wherever it stands (one row's
  value given to another is a misreading, whether the answer or its working says it).
- A name check reads the name the answer commits to first; a rival name counts for nothing where it is
  working: in a table or list, or with its own printed value in parentheses or in a later sentence than
  the answer (a runner-up: "Jets have the highest score, 82. The runner-up is Dragons at 75.").
- A direction or verdict word is a claim only where it states one: not as a particle or a pointer
  ("summing up", "shown above"), and in a sentence that states a value or a clause that is the word alone.
"""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from vtb_env.answer_values import NUMBER, TIME, Value, accounted_for, allowed_values, fold, scan

_LINE = re.compile(r"[^\n]*")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,2}[.)])\s+")
_ANSWER_MARK = re.compile(r"(?i)(?:^[\s*_#>-]*(?:final\s+)?answer\s*[*_]*\s*:)|\\boxed\{")
_SENTENCE_END = re.compile(r"[.!?;](?=\s|$)|\n")
_LIST_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")  # a list may run on with ";" ("Dragons: 75; Comets: 60")
_PARENS = re.compile(r"\([^()\n]*\)")
# a parenthesis that computes ("(39 km + 7 km + 27 km)") states its values; one that lists them is an aside
_COMPUTES = re.compile(r"\d\s*(?:[a-z%]+\s*)?(?:[+*/=]|\sx\s)\s*\$?\d", re.I)
_WORD = re.compile(r"[A-Za-z0-9]+(?:[-'][A-Za-z0-9]+)*")
BOUND_GAP_WORDS = 4  # "Pinecrest, with a total of 28": a value this close after its name is told of that name


@dataclass(frozen=True)
class Mention:
    """A printed name the answer mentions: where, and which name."""

    start: int
    end: int
    name: str


class _Spans:
    """Disjoint ``(start, end)`` spans, sorted: which one holds a position, by bisection."""

    def __init__(self, spans: Iterable[tuple[int, int]]) -> None:
        self.spans = sorted(spans)
        self.starts = [start for start, _ in self.spans]

    def __contains__(self, position: int) -> bool:
        i = bisect.bisect_right(self.starts, position) - 1
        return i >= 0 and position < self.spans[i][1]


class Claims:
    """An answer (already folded and unquoted) read as claims: its working spans, the printed names it
    mentions, and what each name prints. Every look-up bisects an index built once, so reading an answer costs
    O(n log n) in its length, whatever it holds (a policy's reply may be a table of thousands of rows)."""

    def __init__(self, text: str, values: list[Value], world: Mapping[str, Any]) -> None:
        facts = world.get("facts") or {}
        self.text, self.values = text, sorted(values, key=lambda v: v.start)
        self.value_starts = [v.start for v in self.values]
        self.printed = {name: _printed(tuple(str(t) for t in texts)) for name, texts in facts.items()}
        self.all_printed = _printed(tuple(str(t) for texts in facts.values() for t in texts))
        self.computed = allowed_values(world.get("working") or (), NUMBER)
        self.mentions = _mentions(text, list(facts))
        self.mention_starts = [m.start for m in self.mentions]
        self.mention_at = {m.start: m for m in self.mentions}
        self.sentence_ends = [m.end() for m in _SENTENCE_END.finditer(text)]
        self.asides = _Spans(
            m.span()
            for m in _PARENS.finditer(text)
            if not (_ANSWER_MARK.search(m.group()) or _COMPUTES.search(m.group()))
        )
        self.working = _Spans([*_working_spans(text, self.mentions, self.mention_starts), *self._prose_lists()])

    def _prose_lists(self) -> list[tuple[int, int]]:
        """Sentences that only list rows with their own printed values ("Comparing: Dragons (75), Comets (60) and
        Jets (82).", "Dragons: 75; Comets: 60; Jets: 82."): two or more printed names, each told with a value it
        prints, every value a true fact. A list written as prose is working, as a bulleted one is; names in
        parentheses do not count ("The Jets lead with 82 (Dragons 75)" is one row's statement with an aside)."""
        spans, start = [], 0
        for end in [m.end() for m in _LIST_SENTENCE_END.finditer(self.text)] + [len(self.text)]:
            i, j = bisect.bisect_left(self.mention_starts, start), bisect.bisect_left(self.mention_starts, end)
            values = self.values_between(start, end)
            if (
                sum(m.start not in self.asides for m in self.mentions[i:j]) >= 2
                and values
                and not _ANSWER_MARK.search(self.text[start:end])
                and all(self.true_fact(v) for v in values)
                and all(self.carries_own_value(m) for m in self.mentions[i:j])
                and self._only_items(self.mentions[i:j], self.mentions[i].start, end)
            ):
                spans.append((start, end))
            start = end
        return spans

    def _only_items(self, mentions: list[Mention], start: int, end: int) -> bool:
        """Does ``[start, end)`` (holding ``mentions``) hold only names and values, a unit word after a value, "and"
        and punctuation (a list, not a statement: "Pinecrest (30) leads, ahead of 28 at Brookfield" compares)?"""
        marks = sorted(
            [(m.start, m.end, "name") for m in mentions]
            + [(v.start, v.end, "value") for v in self.values_between(start, end)]
        )
        previous, position = None, start
        for mark_start, mark_end, kind in [*marks, (end, end, None)]:
            for word in _WORD.findall(self.text[position:mark_start]):
                if word.lower() != "and" and previous != "value":
                    return False
                previous = word
            previous, position = kind, max(position, mark_end)
        return True

    def in_working(self, position: int) -> bool:
        """Is ``position`` in a table or a list (where no word is a claim)?"""
        return position in self.working

    def aside(self, position: int) -> bool:
        """Is ``position`` in working or in parentheses (where no value is a claim)?"""
        return position in self.working or position in self.asides

    def sentence_of(self, position: int) -> int:
        """Where the sentence holding ``position`` starts."""
        i = bisect.bisect_right(self.sentence_ends, position) - 1
        return self.sentence_ends[i] if i >= 0 else 0

    def sentence_end(self, position: int) -> int:
        """Where the sentence holding ``position`` ends (its last character's index + 1, or the text's end)."""
        i = bisect.bisect_right(self.sentence_ends, position)
        return self.sentence_ends[i] if i < len(self.sentence_ends) else len(self.text)

    def values_between(self, start: int, end: int) -> list[Value]:
        """The values that start in ``[start, end)``."""
        return self.values[bisect.bisect_left(self.value_starts, start) : bisect.bisect_left(self.value_starts, end)]

    def attributed_to(self, value: Value) -> str | None:
        """The printed name that stands last before ``value`` in its sentence (or line, or table row)."""
        i = bisect.bisect_right(self.mention_starts, value.start) - 1
        while i >= 0 and self.mentions[i].end > value.start:  # a name that holds the value ("T-5") is no attribution
            i -= 1
        if i < 0 or self.mentions[i].start < self.sentence_of(value.start):
            return None
        return self.mentions[i].name

    def named_after(self, value: Value) -> str | None:
        """The printed name that follows ``value`` first in its sentence ("28 at Brookfield")."""
        i = bisect.bisect_left(self.mention_starts, value.end)
        if i == len(self.mentions) or self.mentions[i].start >= self.sentence_end(value.start):
            return None
        return self.mentions[i].name

    def _prints(self, name: str | None, value: Value) -> bool:
        return name is not None and accounted_for(value, self.printed[name][value.kind])

    def true_fact(self, value: Value) -> bool:
        """Does ``value`` stand beside a name that prints it: the name before it in its sentence, or the one
        after it ("ahead of 28 at Brookfield")?"""
        if value.kind not in (NUMBER, TIME):
            return False
        return self._prints(self.attributed_to(value), value) or self._prints(self.named_after(value), value)

    def _bound_name(self, value: Value) -> str | None:
        """The name ``value`` is told of directly: its attributed name with at most ``BOUND_GAP_WORDS`` words and
        no other value between them ("Pinecrest has 28", "| Pinecrest | 28 |"; not the 2 of "Pinecrest is 30 in
        image 2")."""
        i = bisect.bisect_right(self.mention_starts, value.start) - 1
        name = self.attributed_to(value)
        if name is None or i < 0:
            return None
        gap = self.text[self.mentions[i].end : value.start]
        between = self.values_between(self.mentions[i].end, value.start)
        return name if not between and len(_WORD.findall(gap)) <= BOUND_GAP_WORDS else None

    def misattributed(self, value: Value) -> bool:
        """Does ``value`` give one row's printed value to another row? The name it is told of (``_bound_name``)
        prints values of its kind but not this one, neither name beside it prints it, some other name does, and
        it is no value of the turn's computation (``working``: "Pinecrest is 30, 2 more" states no row's 2)."""
        name = self._bound_name(value)
        if name is None or value.kind not in (NUMBER, TIME) or not self.printed[name][value.kind]:
            return False
        return (
            not self.true_fact(value)
            and accounted_for(value, self.all_printed[value.kind])
            and not accounted_for(value, self.computed)
        )

    def carries_own_value(self, mention: Mention) -> bool:
        """Does the name at ``mention`` come with a value it prints (in its sentence): a runner-up with its score,
        told after the name ("Dragons at 75") or before it ("next comes 75 at Dragons")?"""
        i = bisect.bisect_right(self.mention_starts, mention.start)
        following = self.mention_starts[i] if i < len(self.mention_starts) else len(self.text)
        end = min(following, self.sentence_end(mention.start))
        if any(self.true_fact(v) for v in self.values_between(mention.end, end)):
            return True
        # before it: back to the sentence's start or the name before it, whichever is nearer
        before = self.mentions[i - 2].end if i >= 2 else 0
        start = max(before, self.sentence_of(mention.start))
        return any(
            v.kind in (NUMBER, TIME) and self._prints(mention.name, v)
            for v in self.values_between(start, mention.start)
        )


@functools.lru_cache(maxsize=4096)
def _printed(texts: tuple[str, ...]) -> dict[str, Any]:
    """What one name prints (its value texts), by kind, in ``allowed_values`` form."""
    found = [v for text in texts for v in scan(fold(text))]
    return {kind: allowed_values([v.value for v in found if v.kind == kind], kind) for kind in (NUMBER, TIME)}


@functools.lru_cache(maxsize=4096)
def _name_pattern(name: str) -> re.Pattern[str] | None:
    words = _WORD.findall(fold(name).lower())
    if not words:
        return None
    return re.compile(r"(?<![A-Za-z0-9])" + r"[\s*_|:-]+".join(map(re.escape, words)) + r"(?![A-Za-z0-9])")


def _mentions(text: str, names: Iterable[str]) -> list[Mention]:
    """Every whole-word occurrence of a printed name, longest names first where two overlap."""
    lower, found, taken = text.lower(), [], bytearray(len(text))
    for name in sorted(names, key=len, reverse=True):
        pattern = _name_pattern(name)
        for match in pattern.finditer(lower) if pattern else ():
            if not any(taken[match.start() : match.end()]):
                found.append(Mention(match.start(), match.end(), name))
                taken[match.start() : match.end()] = b"\x01" * (match.end() - match.start())
    return sorted(found, key=lambda m: m.start)


def _working_spans(text: str, mentions: list[Mention], mention_starts: list[int]) -> list[tuple[int, int]]:
    """The answer's tables and lists (see the module docstring); an answer line is never working."""
    lines = [m for m in _LINE.finditer(text) if m.group().strip()]

    def starts_with_name(line: re.Match[str]) -> bool:
        i = bisect.bisect_left(mention_starts, line.start())
        return i < len(mentions) and ":" in line.group() and not text[line.start() : mentions[i].start].strip(" *_#>")

    named = {line.start() for line in lines if starts_with_name(line)}
    spans = []
    for line in lines:
        body = line.group()
        if _ANSWER_MARK.search(body):
            continue
        table = body.count("|") >= 2
        listed = bool(_LIST_ITEM.match(body)) or (line.start() in named and len(named) >= 2)
        if table or listed:
            spans.append(line.span())
    return spans
