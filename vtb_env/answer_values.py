"""The values a text states: dates, clock times and numbers, read the same way by the generator (which
writes each turn's closed world of allowed values) and by the exact checks (which compare an answer
against it).

Text is folded first (``fold``): Unicode compatibility forms (NFKC: full-width digits, ligatures, the
fraction slash) and look-alikes (a Cyrillic "о", a division slash "∕") become the ASCII a reader sees,
so a rule written for "or" or "/" applies to every spelling of it. Then ``scan`` reads, left to right,
dates (``2024-03-17``, ``17/03/2024``, ``17 March 2024``, ``March 17, 2024``), clock times (``19:30``,
``7:30 pm``) and numbers (``$1,234.50``, ``-4``, ``12%``), each only once: the year of a date is no
number of its own, nor the hour of a time.
"""

from __future__ import annotations

import bisect
import calendar
import datetime as dt
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from anyascii import anyascii

DATE, TIME, NUMBER = "date", "time", "number"
KINDS = (DATE, TIME, NUMBER)

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_NAMES = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DAY = r"\d{1,2})(?:st|nd|rd|th)?"
_DATE = re.compile(
    r"\b(?P<iso_y>\d{4})-(?P<iso_m>\d{1,2})-(?P<iso_d>\d{1,2})\b"
    r"|\b(?P<dmy_d>\d{1,2})[/.](?P<dmy_m>\d{1,2})[/.](?P<dmy_y>\d{4})\b"
    rf"|\b(?P<day_first>{_DAY}\s+(?:of\s+)?(?P<month_name>{_NAMES})\.?\s*,?\s*(?P<y1>\d{{4}})\b"
    rf"|\b(?P<month_first>{_NAMES})\.?\s+(?P<day_second>{_DAY}\s*,?\s*(?P<y2>\d{{4}})\b",
    re.IGNORECASE,
)
# a time is HH:MM, not followed by a digit or ":SS" ("20:02: done" is 20:02); with am/pm also "2.14pm", "2 pm"
_AMPM = r"\s*(?P<ampm>[ap])\.?m\b\.?"
_TIME = re.compile(
    r"(?<![\d.:])(?P<h>[01]?\d|2[0-3]):(?P<m>[0-5]\d)(?!\d|:\d)(?:" + _AMPM + ")?"
    r"|(?<![\d.:])(?P<h12>1[0-2]|0?[1-9])(?:\.(?P<m12>[0-5]\d))?" + _AMPM.replace("ampm", "ampm12"),
    re.I,
)
# a number stands alone: not glued to a word ("R4"), nor a code's digits after a letter and a hyphen ("S-6"), nor
# an ordinal ("3rd": a position, not a value)
_NUMBER = re.compile(r"(?<![\w.])(?<![A-Za-z]-)[-]?\$?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?!(?:st|nd|rd|th)\b)")
# "1. ..." or "Step 2:" at the start of a line: a list marker or a step's number, no value
_ENUMERATOR = re.compile(r"(?im)^\s*\d{1,2}[.)](?=\s)|^[\s*_#]*(?:step|part)\s+\d{1,2}\b")


def fold(text: str) -> str:
    """NFKC, then every look-alike to the ASCII it looks like (``anyascii``)."""
    return anyascii(unicodedata.normalize("NFKC", text or ""))


@dataclass(frozen=True)
class Value:
    """One value stated in a text: its kind, its normal form, where it stands and, for a number, how
    many decimals it was written with (its precision)."""

    kind: str
    value: float | str
    start: int
    end: int
    decimals: int = 0


def _date(match: re.Match[str]) -> str | None:
    g = match.groupdict()
    if g["iso_y"]:
        year, month, day = g["iso_y"], g["iso_m"], g["iso_d"]
    elif g["dmy_y"]:
        year, month, day = g["dmy_y"], g["dmy_m"], g["dmy_d"]
    elif g["y1"]:
        year, month, day = g["y1"], _MONTHS[g["month_name"].lower()], g["day_first"]
    else:
        year, month, day = g["y2"], _MONTHS[g["month_first"].lower()], g["day_second"]
    try:
        return dt.date(int(year), int(month), int(day)).isoformat()
    except ValueError:
        return None


def _time(match: re.Match[str]) -> int:
    if match["h12"]:  # "2.14pm", "2 pm"
        hour, minute, ampm = int(match["h12"]), int(match["m12"] or 0), match["ampm12"].lower()
    else:
        hour, minute, ampm = int(match["h"]), int(match["m"]), (match["ampm"] or "").lower()
    if ampm == "p" and hour < 12:
        hour += 12
    elif ampm == "a" and hour == 12:
        hour = 0
    return hour * 60 + minute


def _free(taken: list[tuple[int, int]], start: int, end: int) -> bool:
    return all(end <= a or start >= b for a, b in taken)


def scan(text: str) -> list[Value]:
    """Every date, clock time and number in ``text`` (already folded), in order of position."""
    found: list[Value] = []
    taken: list[tuple[int, int]] = [m.span() for m in _ENUMERATOR.finditer(text)]
    for match in _DATE.finditer(text):
        iso = _date(match)
        if iso is not None:
            found.append(Value(DATE, iso, *match.span()))
            taken.append(match.span())
    for match in _TIME.finditer(text):
        if _free(taken, *match.span()):
            found.append(Value(TIME, _time(match), *match.span()))
            taken.append(match.span())
    for match in _NUMBER.finditer(text):
        if not _free(taken, *match.span()):
            continue
        token = match.group().replace("$", "").replace(",", "")
        try:
            number = float(token)
        except ValueError:
            continue
        decimals = len(token.split(".")[1]) if "." in token else 0
        found.append(Value(NUMBER, number, *match.span(), decimals=decimals))
    return sorted(found, key=lambda v: v.start)


def values_of(text: str, kind: str) -> list[float | str]:
    """The values of one kind that ``text`` states (folded first)."""
    return [v.value for v in scan(fold(text)) if v.kind == kind]


WORLD_KEYS = {NUMBER: "numbers", TIME: "times", DATE: "dates"}  # where a closed world keeps each kind


def allowed_values(values: Iterable[Any], kind: str) -> Any:
    """A world's values of ``kind`` ready for ``accounted_for``: numbers sorted, the rest in a set."""
    return sorted(float(v) for v in values) if kind == NUMBER else set(values)


def accounted_for(value: Value, allowed: Any) -> bool:
    """Is ``value`` in ``allowed`` (``allowed_values``'s form)? A number stands for every value it rounds:
    "106" for 105.71, "27.50" for 27.5."""
    if value.kind != NUMBER:
        return value.value in allowed
    half_unit = 0.5 * 10.0 ** (-value.decimals) + 1e-9
    i = bisect.bisect_left(allowed, float(value.value) - half_unit)
    return i < len(allowed) and allowed[i] <= float(value.value) + half_unit


# Direction and verdict words come in families that exclude each other: a verdict is a value a text states too.
_EXCLUSIVE = (
    (
        ("increase", "increased", "increases", "increasing", "rose", "rise", "risen", "rising", "up", "grew", "gained"),
        ("decrease", "decreased", "decreases", "decreasing", "fell", "fall", "fallen", "falling", "down", "dropped",
         "declined", "shrank"),
    ),
    (("higher",), ("lower",)),
    (("above",), ("below",)),
    (("within",), ("outside", "above", "below")),
    (("yes",), ("no",)),
    (("true",), ("false",)),
)  # fmt: skip


RISE_WORDS, FALL_WORDS = _EXCLUSIVE[0]  # a direction: a signed change ("-2.75", "+50") states one too


def _opposites_table() -> dict[str, tuple[str, ...]]:
    """Each word of a pair of families refuses every word of the other family."""
    table: dict[str, set[str]] = {}
    for side_a, side_b in _EXCLUSIVE:
        for words, others in ((side_a, side_b), (side_b, side_a)):
            for word in words:
                table.setdefault(word, set()).update(others)
    return {word: tuple(sorted(opposites)) for word, opposites in table.items()}


OPPOSITES: dict[str, tuple[str, ...]] = _opposites_table()


def checked_kinds(check: Mapping[str, Any]) -> set[str]:
    """The kinds of value an exact check asks about: a number check's number; a text check's phrases' values
    (a date, a clock time); a verdict's evidence (numbers and times decide a direction or a verdict). A name
    check asks about none."""
    if check.get("type") == "number":
        return {NUMBER}
    phrases = [str(p) for p in check.get("any_of", ()) or ()]
    kinds = {v.kind for p in phrases for v in scan(fold(p))}
    if any(fold(p).lower().strip() in OPPOSITES for p in phrases):
        kinds |= {NUMBER, TIME}
    return kinds
