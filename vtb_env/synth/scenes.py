"""Content scenes: the facts of a document (menu, receipt, timetable, ...); `scene_drawing` draws them.

The document kinds (what a menu or a lab report lists, how its values read and change) are ``kinds``.

A scene's facts are drawn first from a fact RNG and rendered later at any text size, so a
tool-required task and its tool-redundant twin show exactly the same facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np

from vtb_env.synth.kinds import KINDS, TOWNS, Kind, clock_text

LEG = " to "  # a map leg's label joins its two towns: "Alder to Glenrock"


@dataclass(frozen=True)
class Entry:
    """One labelled fact: ``text`` is what is printed, ``value`` the number it means."""

    label: str
    value: float
    text: str
    extra: str = ""

    @property
    def towns(self) -> list[str]:
        """A map leg's two towns (the label split at ``LEG``; a label without it, as other kinds' are, stays whole)."""
        return self.label.split(LEG)


def route_towns(legs: Sequence[Entry]) -> list[str]:
    """The towns a run of consecutive map legs passes, in order: the first leg's start, then each leg's end."""
    return [legs[0].towns[0]] + [leg.towns[-1] for leg in legs]


@dataclass(frozen=True)
class Scene:
    kind: Kind
    title: str
    entries: tuple[Entry, ...]
    fields: dict[str, str] = field(default_factory=dict)  # extra printed facts (tickets)

    def entry(self, label: str) -> Entry:
        return next(e for e in self.entries if e.label == label)

    def evolved(self, rng: np.random.Generator) -> "Scene":
        """The same document later: every value moves by the kind's rule."""
        entries = tuple(
            replace(e, value=(v := self.kind.evolve(rng, e.value)), text=self.kind.fmt(v)) for e in self.entries
        )
        return replace(self, entries=entries)

    def stepped(self, size: int) -> "Scene":
        """The same document later, every value up by a distinct multiple of ``size`` tenths."""
        entries = tuple(
            replace(e, value=(v := round(e.value + 0.1 * size * (i + 1), 2)), text=self.kind.fmt(v))
            for i, e in enumerate(self.entries)
        )
        return replace(self, entries=entries)


def make_scene(kind: str | Kind, rng: np.random.Generator, n_entries: int) -> Scene:
    """Draw a scene's facts: ``n_entries`` distinct labels with values (``kind``: a ``KINDS`` name or a Kind)."""
    kind = KINDS[kind] if isinstance(kind, str) else kind
    title = str(rng.choice(kind.titles))
    if kind.style == "map":  # a map's labels are its towns (v1, v2: TOWNS; v3 names its own vocabulary)
        towns = [str(t) for t in rng.permutation(kind.labels or TOWNS)[: n_entries + 1]]
        labels = [f"{a}{LEG}{b}" for a, b in zip(towns, towns[1:], strict=False)]
    else:
        labels = [str(label) for label in rng.permutation(kind.labels)[:n_entries]]
    if kind.name == "timetable":
        clock = float(rng.integers(6 * 12, 21 * 12)) * 5
        values = []
        for _ in labels:
            values.append(clock)
            clock += float(rng.integers(3, 15))
    else:
        values = [kind.draw_value(rng, label) for label in labels]
        # Distinct values keep every question's answer unique.
        while len(set(values)) < len(values):
            values = [kind.draw_value(rng, label) for label in labels]
    entries = tuple(
        Entry(label, v, kind.fmt(v), kind.extra(label) if kind.extra else "")
        for label, v in zip(labels, values, strict=False)
    )
    return Scene(kind, title, entries)


TICKET_CITIES = ("Lisbon", "Madrid", "Vienna", "Oslo", "Dublin", "Prague", "Zurich", "Warsaw", "Athens", "Helsinki")


def make_ticket(rng: np.random.Generator, dates: Sequence[str], cities: Sequence[str] = TICKET_CITIES) -> Scene:
    """A train ticket: its destination and date are the facts a weather lookup needs."""
    origin, destination = (str(c) for c in rng.permutation(list(cities))[:2])
    date = str(rng.choice(list(dates)))
    fields = {
        "From": origin,
        "To": destination,
        "Date": date,
        "Departs": clock_text(float(rng.integers(6 * 12, 21 * 12)) * 5),
        "Coach": str(int(rng.integers(1, 12))),
        "Seat": f"{int(rng.integers(1, 80))}{'ABCD'[int(rng.integers(0, 4))]}",
    }
    entries = tuple(Entry(k, 0.0, v) for k, v in fields.items())
    ticket_kind = replace(KINDS["menu"], name="ticket", domain="Generalist", header=("", ""), what="ticket")
    return Scene(ticket_kind, "EuroRail e-ticket", entries, fields)
