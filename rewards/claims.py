"""The claim model: how the exact checks read an answer, as claims rather than wording.

An LLM judge reads what an answer *claims*; the exact checks (``vtb_rewards.checks``) read it the same way,
in three parts:

- **Statements and working.** A table (a line with two or more ``|``) and a list (lines that start with a
  bullet or an enumerator, or two or more lines ``Name: value`` that start with a printed name) are the
  answer's *working*: what it read and compared. A true fact in parentheses is working too (an aside:
  "Magnesium is 2.0 (the page also lists Urea, 18.0)"), unless the parenthesis computes ("(39 km + 7 km)"
  states its values); any other value or word in parentheses is a statement ("Budapest (102 m)").
  Everything else is a *statement*; so is a line that gives the answer (``Answer:``, ``\\boxed{}``)
  wherever it stands.
- **Attributions.** A value belongs to the printed name (the world's ``facts``: every row label the pages
  shown so far print) that stands last before it in its sentence, line or table row. The attribution is a
  *true fact* when that name prints the value (on any snapshot shown so far, or in its printed extra: a
  lab test's reference range).
- **Commitment.** A check is met by what the answer states, not negated, in a statement: working commits
  to nothing, so a transcription of the page (a table, a list, every row in parentheses) answers no question.

What follows for every check (docs/rewards.md, "The claim model"):

- Working may state any value of the world and any true fact. A statement may state only values of the
  world (the turn's closed world: docs/rewards.md, rule 3). So a true fact about a row the question does not
  ask is context in working and a second candidate in a statement: a reader who transcribes the page
  without reading the question either commits to nothing or states rivals, and meets nothing.
- A value in working that is neither in the world nor a true fact (a guess hidden in a table) fails the
  checks of its kind, as a statement's would.
- A name check reads the name the answer commits to first; a rival name counts for nothing where it is
  working: in a table or list, or with its own printed value in parentheses or in a later sentence than
  the answer (a runner-up: "Jets have the highest score, 82. The runner-up is Dragons at 75.").
- A direction or verdict word is a claim only where it states one: not as a particle or a pointer
  ("summing up", "shown above"), and in a sentence that states a value or a clause that is the word alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from vtb_env.answer_values import NUMBER, TIME, Value, accounted_for, allowed_values, fold, scan

_LINE = re.compile(r"[^\n]*")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,2}[.)])\s+")
_ANSWER_MARK = re.compile(r"(?i)(?:^[\s*_#>-]*(?:final\s+)?answer\s*[*_]*\s*:)|\\boxed\{")
_SENTENCE_END = re.compile(r"[.!?;](?=\s|$)|\n")
_PARENS = re.compile(r"\([^()\n]*\)")
# a parenthesis that computes ("(39 km + 7 km + 27 km)") states its values; one that lists them is an aside
_COMPUTES = re.compile(r"\d\s*(?:[a-z%]+\s*)?(?:[+*/=]|\sx\s)\s*\$?\d", re.I)
_WORD = re.compile(r"[A-Za-z0-9]+(?:[-'][A-Za-z0-9]+)*")


@dataclass(frozen=True)
class Mention:
    """A printed name the answer mentions: where, and which name."""

    start: int
    end: int
    name: str


@dataclass
class Claims:
    """An answer (already folded and unquoted) read as claims: its working spans, the printed names it
    mentions, and what each name prints."""

    text: str
    values: list[Value]
    working: list[tuple[int, int]] = field(default_factory=list)  # tables and lists: lines
    asides: list[tuple[int, int]] = field(default_factory=list)  # parentheses: working for values, not for words
    mentions: list[Mention] = field(default_factory=list)
    printed: dict[str, Any] = field(default_factory=dict)  # name -> its printed values, ``allowed_values`` form

    @classmethod
    def read(cls, text: str, values: list[Value], world: Mapping[str, Any]) -> "Claims":
        facts = world.get("facts") or {}
        printed = {}
        for name, texts in facts.items():
            found = [v for t in texts for v in scan(fold(str(t)))]
            printed[name] = {
                kind: allowed_values([v.value for v in found if v.kind == kind], kind) for kind in (NUMBER, TIME)
            }
        mentions = _mentions(text, list(facts))
        asides = [
            m.span()
            for m in _PARENS.finditer(text)
            if not (_ANSWER_MARK.search(m.group()) or _COMPUTES.search(m.group()))
        ]
        return cls(text, values, _working_spans(text, mentions), asides, mentions, printed)

    def in_working(self, position: int) -> bool:
        """Is ``position`` in a table or a list (where no word is a claim)?"""
        return any(start <= position < end for start, end in self.working)

    def aside(self, position: int) -> bool:
        """Is ``position`` in working or in parentheses (where no value is a claim)?"""
        return self.in_working(position) or any(start <= position < end for start, end in self.asides)

    def sentence_of(self, position: int) -> int:
        """Where the sentence holding ``position`` starts."""
        return max((m.end() for m in _SENTENCE_END.finditer(self.text, 0, position)), default=0)

    def attributed_to(self, value: Value) -> str | None:
        """The printed name that stands last before ``value`` in its sentence (or line, or table row)."""
        sentence_start = self.sentence_of(value.start)
        before = [m for m in self.mentions if sentence_start <= m.start and m.end <= value.start]
        return before[-1].name if before else None

    def true_fact(self, value: Value) -> bool:
        """Does ``value`` attribute to its name a value that name prints?"""
        name = self.attributed_to(value)
        if name is None or value.kind not in (NUMBER, TIME):
            return False
        return accounted_for(value, self.printed[name][value.kind])

    def carries_own_value(self, mention: Mention) -> bool:
        """Does the name at ``mention`` come with a value it prints (in its sentence): a runner-up with its score?"""
        return any(
            v.start >= mention.end and self.attributed_to(v) == mention.name and self.true_fact(v) for v in self.values
        )


def _mentions(text: str, names: Iterable[str]) -> list[Mention]:
    """Every whole-word occurrence of a printed name, longest names first where two overlap."""
    lower, found, taken = text.lower(), [], []
    for name in sorted(names, key=len, reverse=True):
        words = _WORD.findall(fold(name).lower())
        if not words:
            continue
        pattern = re.compile(r"(?<![A-Za-z0-9])" + r"[\s*_|:-]+".join(map(re.escape, words)) + r"(?![A-Za-z0-9])")
        for match in pattern.finditer(lower):
            if all(match.end() <= a or match.start() >= b for a, b in taken):
                found.append(Mention(match.start(), match.end(), name))
                taken.append(match.span())
    return sorted(found, key=lambda m: m.start)


def _working_spans(text: str, mentions: list[Mention]) -> list[tuple[int, int]]:
    """The answer's tables and lists (see the module docstring); an answer line is never working."""
    lines = [m for m in _LINE.finditer(text) if m.group().strip()]
    starts_with_name = {
        line.start()
        for line in lines
        if ":" in line.group()
        and any(line.start() <= m.start and not text[line.start() : m.start].strip(" *_#>") for m in mentions)
    }
    spans = []
    for line in lines:
        body = line.group()
        if _ANSWER_MARK.search(body):
            continue
        table = body.count("|") >= 2
        listed = bool(_LIST_ITEM.match(body)) or (line.start() in starts_with_name and len(starts_with_name) >= 2)
        if table or listed:
            spans.append(line.span())
    return spans
