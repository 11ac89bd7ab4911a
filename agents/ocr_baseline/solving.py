"""What every question rule is built on: the outcome types, the tables read so far, the rows a question
names, and how answers format numbers."""

from __future__ import annotations

import difflib
import functools
import math
import re
import statistics
from dataclasses import dataclass
from typing import Callable, Sequence, Union

from vtb_agents.base import Action
from vtb_agents.ocr_baseline.episode import EpisodeView
from vtb_agents.ocr_baseline.questions import Question, named_rows, names_exactly
from vtb_agents.ocr_baseline.reading import Reading, Row

SURE = 0.75  # OCR confidence below which a value the question needs is not trusted without the vision tool
STRAY_DISTANCE = 3.0  # a row this many times farther from every other row than rows usually lie is a stray mark


@dataclass(frozen=True)
class Missing:
    """What the question needs that was not read (clearly enough) yet, and the images it is in."""

    what: str
    images: tuple[str, ...] = ()


Outcome = Union[Action, Missing]  # an answer text, a tool-call message, or what is still missing


@dataclass(frozen=True)
class Rule:
    """A kind of question: its cue (a test of the lowercased question) and its solver."""

    kind: str
    cue: Callable[[str], bool]
    solve: Callable[[EpisodeView, Question], Outcome]


@dataclass(frozen=True)
class Table:
    """The rows read in some images, and which images they are (the ones to repair if rows are missing)."""

    images: tuple[str, ...]
    rows: list[Row]

    def missing(self, what: str) -> Missing:
        return Missing(what, self.images)


def read_table(ep: EpisodeView, names: Sequence[str]) -> Table:
    """Every row read in ``names`` (a label read in an earlier image wins)."""
    rows: list[Row] = []
    for name in names:
        rows = Reading(rows).merged(ep.reading(name)).rows
    return Table(tuple(names), rows)


@dataclass(frozen=True)
class Named:
    """The rows the question names (in its order), and the table they were found in."""

    rows: list[Row]
    table: Table


def find_named(ep: EpisodeView, q: Question, count: int, text: str | None = None) -> Named | Missing:
    """At least ``count`` rows named in ``text`` (default: the question) among the rows in view,
    each read with confidence unless the vision tool can no longer help."""
    table = read_table(ep, ep.in_view())
    asked = text if text is not None else q.text
    found = named_rows(asked, table.rows)
    exact = [row for row in found if names_exactly(asked, row.label)]
    if len(found) > count and len(exact) >= count:  # a look-alike of another word ("measures") is no entry
        found = exact
    if len(found) < count:
        return table.missing("the entries the question names")
    if any(row.confidence < SURE for row in found[:count]) and ep.can_repair(table.images):
        return table.missing("the entries the question names clearly")
    return Named(found, table)


def clarified_text(q: Question) -> str | None:
    """Entries are named in the user's clarifying reply when there is one."""
    return q.prompt if q.clarified else None


NamedSolver = Callable[[EpisodeView, Question, Named], Outcome]


def on_named(
    count: int, *, in_reply: bool = False
) -> Callable[[NamedSolver], Callable[[EpisodeView, Question], Outcome]]:
    """A rule on the ``count`` entries the question names (in the user's clarifying reply, when
    ``in_reply`` and there is one): it returns ``Missing`` while they cannot be read, else
    ``solve(ep, q, named)``."""

    def wrap(solve: NamedSolver) -> Callable[[EpisodeView, Question], Outcome]:
        @functools.wraps(solve)
        def rule(ep: EpisodeView, q: Question) -> Outcome:
            named = find_named(ep, q, count, text=clarified_text(q) if in_reply else None)
            return named if isinstance(named, Missing) else solve(ep, q, named)

        return rule

    return wrap


# --- formatting ---------------------------------------------------------------------------------


def fmt(value: float, money: bool = False) -> str:
    if money:
        return f"${value:,.2f}"
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.2f}".rstrip("0").rstrip(".") if abs(value - round(value, 2)) < 1e-9 else f"{value:.2f}"


def fmt_change(value: float) -> str:
    return f"{abs(value):.2f}"


def is_money(rows: Sequence[Row]) -> bool:
    return any(r.text.startswith("$") for r in rows)


def is_clock(rows: Sequence[Row]) -> bool:
    return any(":" in r.text for r in rows)


def say(row: Row) -> str:
    return f"{row.label} is {row.text}"


_TITLE = re.compile(r'"([^"]+)"')


def titled_rows(ep: EpisodeView, q: Question) -> list[Row] | Missing:
    """The rows of the document a question about every entry names by its printed title ("..."): the
    reading (an image in view, or a region the vision tool repaired) whose text holds the title, else the
    largest repaired region's. A v3 photo also shows a look-alike decoy document of the same kind."""
    names = tuple(ep.in_view())
    readings = [(i > 0, r) for n in names for i, r in enumerate(ep.region_readings(n))]
    title = _TITLE.search(q.text)
    titled = [(repaired, r) for repaired, r in readings if title and holds_title(r.text, title.group(1))]
    repaired, best = max(
        titled or [(True, r) for repaired, r in readings if repaired],
        key=lambda rr: len(rr[1].rows),
        default=(False, Reading()),
    )
    # The title line with a stray mark read as a number ("City Basketball League 6") is no entry.
    rows = [r for r in best.rows if not (title and holds_title(r.label, title.group(1)))]
    rows = rows if repaired else without_strays(rows)
    return rows if len(rows) >= 3 else Missing("every entry of the document the question names", names)


def without_strays(rows: list[Row]) -> list[Row]:
    """The rows of a photo's reading without strays: a mark read as a row ("We 300" beside a scoreboard,
    "Ot 2" beside a receipt) lies much farther from every other row than the document's rows lie from
    their neighbours (a table's next line, a chart's next bar). Only for one image's reading: a voted
    reading of a repaired region mixes the coordinates of its quarter turns."""
    if len(rows) < 4:
        return rows
    nearest = [min(math.dist(r.center, o.center) for o in rows if o is not r) for r in rows]
    typical = statistics.median(nearest)
    return [r for r, d in zip(rows, nearest, strict=True) if d <= STRAY_DISTANCE * typical]


def holds_title(text: str, title: str) -> bool:
    """``title`` occurs in ``text``, allowing OCR slips (a close match of as many words)."""
    words, target = re.findall(r"[a-z0-9#%]+", text.lower()), re.findall(r"[a-z0-9#%]+", title.lower())
    n, wanted = len(target), " ".join(target)
    return any(
        difflib.SequenceMatcher(None, " ".join(words[i : i + n]), wanted).ratio() >= 0.8
        for i in range(len(words) - n + 1)
    )
