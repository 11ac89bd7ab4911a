"""Does every question's premise hold on its scene?

A question's wording assumes things about the document it is asked of: "which bar had the largest
increase?" assumes some bar rose and one rose the most; "which stop has the latest departure?" that
one stop departs last; "the ride from A to B" that both stops are on the board and B comes later.
An honest answer to a question whose premise fails ("C2 fell the least") fails its rubric, so the
generator (v3: ``Options.answerable``) must never ask one.

The check reads each prompt back as a reader would: it finds the question type (a template family
of ``templates``) whose wording the prompt is, takes the rows, towns and titles it names, and tests
that family's premise on the scene the turn shows. It works on blueprints, before anything is drawn,
so it runs over thousands of tasks in seconds (``tests/test_synth_premises.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Callable

from vtb_env.synth import reference_data as ref
from vtb_env.synth import templates
from vtb_env.synth.blueprints import ROW_WORDS, Blueprint
from vtb_env.synth.kinds import LAB_TESTS
from vtb_env.synth.scenes import Entry, Scene, route_towns


class PremiseFailure(Exception):
    """A question's premise does not hold on its scene."""


@dataclass(frozen=True)
class Question:
    """One turn of a blueprint as the premise check sees it: what it shows and what it names."""

    blueprint: Blueprint
    turn: int
    state: int  # the latest scene state shown by this turn
    fields: dict[str, str]

    @property
    def scene(self) -> Scene:
        return self.blueprint.states[self.state]

    def entry(self, name: str) -> Entry:
        """The entry ``fields[name]`` names, by its label or by the kind's phrase for it."""
        said = self.fields[name]
        found = [e for e in self.scene.entries if said in (e.label, self.scene.kind.phrase(e.label))]
        _require(len(found) == 1, f"{said!r} names {len(found)} entries of the {self.scene.kind.name}")
        return found[0]

    def distinct(self, *names: str) -> list[Entry]:
        entries = [self.entry(name) for name in names]
        _require(len({e.label for e in entries}) == len(entries), f"the rows asked are not distinct: {names}")
        return entries

    def top(self) -> Entry:
        """The one highest entry (latest departure, longest segment, ...)."""
        entries = self.scene.entries
        best = max(e.value for e in entries)
        _require(sum(e.value == best for e in entries) == 1, "no single highest entry")
        return max(entries, key=lambda e: e.value)


def _require(condition: bool, failure: str) -> None:
    if not condition:
        raise PremiseFailure(failure)


# --- premises, one per template family ----------------------------------------------------------


def _split(q: Question) -> None:
    _require(q.blueprint.split and q.state == 0, "the question says the document is split, the image is not")


def _split_pair(q: Question) -> None:
    _split(q)
    a, b = q.distinct("a", "b")
    half = len(q.scene.entries) // 2
    panel = {e.label: i >= half for i, e in enumerate(q.scene.entries)}
    _require(panel[a.label] != panel[b.label], "the two rows asked are on the same part")
    if "what" in q.fields:
        _require(q.fields["what"] == q.scene.kind.what, f"the document is a {q.scene.kind.what}")


def _later(q: Question, first: str, second: str) -> None:
    a, b = q.distinct(first, second)
    _require(b.value > a.value, f"{b.label} does not come after {a.label}")


def _route(q: Question, start: str = "start", end: str = "end") -> None:
    _require(q.scene.kind.style == "map", "a route is asked of a document that is no map")
    towns = route_towns(q.scene.entries)
    _require(len(set(towns)) == len(towns), "the route passes a town twice")
    s, e = q.fields[start], q.fields[end]
    _require(s in towns and e in towns and towns.index(s) < towns.index(e), f"no route from {s} to {e}")


def _ride(q: Question) -> None:
    _split_pair(q)
    _later(q, "a", "b")


def _ticket(q: Question) -> None:
    fields = q.scene.fields
    _require({"From", "To", "Date"} <= set(fields), "the ticket lacks its cities or date")
    _require(fields["From"] != fields["To"], "the ticket goes nowhere")
    try:
        ref.weather_on(fields["To"], fields["Date"])
    except KeyError as error:
        raise PremiseFailure(f"the archive has no weather for {fields['To']} on {fields['Date']}") from error


def _elevation(q: Question) -> None:
    fields = q.scene.fields
    _require(fields.get("From") != fields.get("To"), "the ticket goes nowhere")
    _require({fields.get("From"), fields.get("To")} <= set(ref.CITY_FACTS), "a city has no guide")


def _dividend(q: Question) -> None:
    _require(q.entry("ticker").label in ref.COMPANIES, "the holding's company has no published dividend")


def _order(q: Question) -> None:
    q.distinct("a", "b")
    _require(int(q.fields["qa"]) > 0 and int(q.fields["qb"]) > 0, "an order of nothing")


def _speed(q: Question) -> None:
    _later(q, "a", "b")
    _require(float(q.fields["km"]) > 0, "a track of no length")


def _share(q: Question) -> None:
    a, b = q.distinct("a", "b")
    _require(a.value + b.value > 0, "the combined total is zero")


def _limit(q: Question) -> None:
    _require(LAB_TESTS[q.entry("test").label][2] > 0, "the reference range has no upper limit")


def _titled(q: Question) -> None:
    """A question about every entry names its document by title: the decoy must carry another one."""
    _require(q.fields["title"] == q.scene.title, f"the document is titled {q.scene.title!r}")
    _require(len(q.scene.kind.titles) > 1, "a decoy of this kind would carry the same title")


def _founded(q: Question) -> None:
    _titled(q)
    _require(q.top().label in ref.COMPANY_FACTS, "the largest holding's company has no profile")


def _stdev(q: Question) -> None:
    _titled(q)
    _require(len(q.scene.entries) >= 2, "a sample standard deviation needs two values")


def _compound(q: Question) -> None:
    q.entry("phrase")
    _require(int(q.fields["years"]) >= 1, "growth over no years")


def _value(q: Question) -> None:
    q.entry("phrase")
    _require(q.fields["what"] == q.scene.kind.what, f"the document is a {q.scene.kind.what}")


def _changed_since(q: Question) -> None:
    _require(q.state >= 1, "no previous image to compare with")
    label = q.entry("phrase").label
    before, after = (q.blueprint.states[s].entry(label).value for s in (q.state - 1, q.state))
    _require(before != after, f"{label} did not change")


def _changed_most(q: Question) -> None:
    _require(q.state >= 1, "no first image to compare with")
    _require(q.fields["row"] == ROW_WORDS[q.scene.kind.name][0], "the rows are named as another kind's")
    first = q.blueprint.states[0]
    growth = [q.scene.entry(e.label).value - e.value for e in first.entries]
    _require(max(growth) > 0, "no entry rose")
    _require(growth.count(max(growth)) == 1, "several entries rose the most")


def _previous_value(q: Question) -> Entry:
    """The entry the previous turn asked about: a follow-on question says "that" of it."""
    _require(q.turn >= 1, "'that' refers to no earlier answer")
    reads = q.blueprint.asks[q.turn - 1].reads
    _require(len(reads) >= 1, "the previous turn read nothing")
    return q.scene.entry(reads[0][1]) if len(reads) == 1 else q.top()


def _in_range(q: Question) -> None:
    label = _previous_value(q).label
    _require(q.scene.kind.name == "lab" and label in LAB_TESTS, "'that' is no lab result with a reference range")


def _highest(q: Question) -> None:
    if "row" in q.fields:
        _require(q.fields["row"] == ROW_WORDS[q.scene.kind.name][0], "the rows are named as another kind's")
    q.top()


def _latest(q: Question) -> None:
    _require(q.scene.kind.name == "timetable", "a departure is asked of a document that is no timetable")
    q.top()


def _more_than_that(q: Question) -> None:
    """ "How much more is that than A?" / "How many minutes after A is that?": "that" (the highest) exceeds A."""
    top, a = _previous_value(q), q.entry("a")
    _require(top.label == q.top().label and top.value > a.value, f"'that' is not more than {a.label}")


def _mean(q: Question) -> None:
    q.distinct("a", "b", "c")


def _vague(q: Question) -> None:
    _require(len(q.scene.entries) >= 2, "only one entry: the question is not underspecified")
    _require(q.turn + 1 < len(q.blueprint.asks), "nobody supplies the missing detail")


def _supply(q: Question) -> None:
    """The user's reply to a clarifying question names entries that exist and fit the question."""
    kind = q.scene.kind.name
    names = [n for n in ("a", "b") if n in q.fields]
    if kind == "map":
        _route(q, "a", "b")
        return
    entries = q.distinct(*names)
    if kind == "timetable":
        _later(q, "a", "b")
    if kind in ("scoreboard", "league"):
        _require(entries[0].label != q.top().label, "the user's team is the leader")
    if kind == "lab":
        _require(entries[0].label in LAB_TESTS, "the test has no reference range")


PREMISES: dict[str, Callable[[Question], None]] = {
    "ROUTE": _route,
    "RIDE_SPLIT": _ride,
    "RESULTS_SPLIT": _split_pair,
    "TOTAL_SPLIT": _split_pair,
    "DIFFERENCE_SPLIT": _split_pair,
    "WEATHER": _ticket,
    "DIVIDEND": _dividend,
    "ORDER": _order,
    "SPEED": _speed,
    "SHARE": _share,
    "LIMIT": _limit,
    "CYCLING": _route,
    "MEAN": _mean,
    "WEATHER_LOW": _ticket,
    "RAIN": _ticket,
    "ELEVATION": _elevation,
    "FOUNDED": _founded,
    "COMPOUND": _compound,
    "MEDIAN": _titled,
    "STDEV": _stdev,
    "MILES": _route,
    "VALUE": _value,
    "CHANGED_SINCE": _changed_since,
    "CHANGED_MOST": _changed_most,
    "IN_RANGE": _in_range,
    "HIGHEST": _highest,
    "LATEST": _latest,
    "MORE_THAN_THAT": _more_than_that,
    "MINUTES_AFTER": _more_than_that,
    "VAGUE": _vague,
    "SUPPLY": _supply,
}


# --- reading a prompt back -----------------------------------------------------------------------


def template_families() -> dict[str, tuple[str, ...]]:
    """Every question type of ``templates`` (name: its wordings); VAGUE and SUPPLY per scene kind below."""
    return {
        name: value
        for name, value in vars(templates).items()
        if name.isupper() and isinstance(value, tuple) and value and all(isinstance(v, str) for v in value)
    }


@cache
def _pattern(wording: str) -> re.Pattern[str]:
    seen: set[str] = set()

    def field(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in seen:
            return f"(?P={name})"
        seen.add(name)
        return f'(?P<{name}>[^?,"]+?)'  # a name, phrase or title holds no question mark, comma or quote

    parts = re.split(r"(\{\w+\})", wording)
    body = "".join(field(re.match(r"\{(\w+)\}", p)) if re.fullmatch(r"\{\w+\}", p) else re.escape(p) for p in parts)
    return re.compile(body)


def _families_for(kind: str) -> dict[str, tuple[str, ...]]:
    wordings, _clarify, supply = templates.VAGUE.get(kind, ((), "", ""))
    families = dict(template_families())
    families["VAGUE"], families["SUPPLY"] = wordings, (supply,)
    return {name: w for name, w in families.items() if w}


def question_type(prompt: str, kind: str) -> tuple[str, dict[str, str]]:
    """The template family ``prompt`` is a wording of (asked of a ``kind`` document) and the fields it fills."""
    matches = {}
    for name, wordings in _families_for(kind).items():
        # the most specific wording that fits ("Which entry is {top}?" before "Which {row} is {highest}?")
        for wording in sorted(wordings, key=lambda w: -len(re.sub(r"\{\w+\}", "", w))):
            found = _pattern(wording).fullmatch(prompt)
            if found:
                matches[name] = found.groupdict()
                break
    _require(len(matches) == 1, f"the prompt {prompt!r} is a wording of {sorted(matches) or 'no question type'}")
    return next(iter(matches.items()))


def check_premises(blueprint: Blueprint) -> list[str]:
    """Every turn whose premise fails on its scene, as 'turn N (FAMILY): why'; empty when all hold."""
    failures, state = [], 0
    for t, ask in enumerate(blueprint.asks):
        state = max((state, *ask.new_states))
        family = "?"
        try:
            family, fields = question_type(ask.prompt, blueprint.states[state].kind.name)
            PREMISES[family](Question(blueprint, t, state, fields))
        except PremiseFailure as failure:
            failures.append(f"turn {t + 1} ({family}): {failure}")
    return failures


def question_types(blueprint: Blueprint) -> list[str]:
    """The template family of each turn's prompt."""
    state, names = 0, []
    for ask in blueprint.asks:
        state = max((state, *ask.new_states))
        names.append(question_type(ask.prompt, blueprint.states[state].kind.name)[0])
    return names
