"""What a task is made of before it is drawn: blueprints, turns (asks), exact rubrics and the
helpers the category builders share.

A blueprint holds only facts and words; how its images look (tool-required or
tool-redundant) is decided later in ``twins``, so both renderings share every question.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vtb_env.synth.decoys import vocabulary_kind
from vtb_env.synth.kinds import KINDS, Kind
from vtb_env.synth.scenes import Entry, Scene
from vtb_env.synth.templates import Wording


@dataclass(frozen=True)
class RubricSpec:
    description: str
    weight: int
    categories: tuple[str, ...]
    check: dict[str, Any]
    critical: bool = False


@dataclass(frozen=True)
class Ask:
    """One turn: its prompt, golden answer, rubrics, what must be read and what comes after."""

    prompt: str
    golden: str
    rubrics: tuple[RubricSpec, ...]
    new_states: tuple[int, ...] = ()  # scene states whose image arrives with this turn
    reads: tuple[tuple[int, str], ...] = ()  # (state, label) facts to read from the images
    steps: tuple[str, ...] = ()  # reasoning key steps after the reading
    tool_calls: tuple[dict[str, Any], ...] = ()  # non-vision reference calls (lookup, calculator)
    # intermediate values of sound ways to compute the answer that the golden answer and the reference
    # calculator calls do not state (a tip on its own, a share as a fraction): part of the turn's closed world
    working: tuple[float, ...] = ()


@dataclass(frozen=True)
class Blueprint:
    domain: str
    category: str
    variant: str
    states: tuple[Scene, ...]
    asks: tuple[Ask, ...]
    split: bool = False  # the first image splits its entries over two distant panels
    needs_lookup: bool = False  # a fact comes from the corpus or weather archive


# --- wording ---------------------------------------------------------------------------------

ROW_WORDS = {  # kind: (row noun, "highest ..." phrase)
    "menu": ("dish", "the most expensive dish"),
    "receipt": ("item", "the most expensive item"),
    "quotes": ("ticker", "the ticker with the highest last price"),
    "portfolio": ("ticker", "the holding with the most shares"),
    "scoreboard": ("team", "the team with the highest score"),
    "league": ("club", "the club with the most points"),
    "chart": ("bar", "the tallest bar"),
    "measurements": ("specimen", "the specimen with the highest reading"),
    "map": ("segment", "the longest segment of the route"),
    "timetable": ("stop", "the stop with the latest departure"),
    "lab": ("test", "the test with the highest value"),
}


def say(scene: Scene, value: float) -> str:
    unit = scene.kind.unit
    if unit == "$":
        return f"${value:,.2f}"
    if unit == "%":
        return f"{value:.1f}%"
    if unit in ("minutes", "points", "shares", "km"):
        return f"{value:g} {unit}"
    return f"{value:g}"


def number(value: float, tol: float = 0.011) -> dict[str, Any]:
    return {"type": "number", "value": round(float(value), 4), "abs_tol": tol}


def text(*any_of: str, none_of: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "text", "any_of": list(any_of), "none_of": list(none_of)}


def read_rubric(scene: Scene, entry: Entry) -> RubricSpec:
    check = (
        text(entry.text)
        if scene.kind.name == "timetable"
        else number(entry.value, 0.006 if scene.kind.unit == "$" else 0.05)
    )
    return RubricSpec(
        f"The response reads {scene.kind.phrase(entry.label)} as {entry.text}.", 3, ("visual understanding",), check
    )


def final_rubric(what: str, value: float, shown: str, tol: float = 0.011) -> RubricSpec:
    return RubricSpec(
        f"The response states that {what} is {shown}.", 5, ("truthfulness", "reasoning"), number(value, tol), True
    )


def label_rubric(what: str, label: str, others: list[str]) -> RubricSpec:
    return RubricSpec(
        f"The response identifies {label} as {what}.",
        5,
        ("visual understanding", "truthfulness"),
        text(label, none_of=tuple(o for o in others if o != label and label not in o)),
        True,
    )


def page_lookup(query: str, url: str, find: str, read: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A web search for ``query`` and the opening of the result at ``url`` (purposes ``find``, ``read``)."""
    return (
        {"tool": "web_search", "arguments": {"query": query, "num_results": 5}, "purpose": find},
        {"tool": "browser_get_page_text", "arguments": {"url": url}, "purpose": read},
    )


def calculator(expression: str, purpose: str) -> dict[str, Any]:
    return {"tool": "calculator", "arguments": {"expression": expression}, "purpose": purpose}


def running_sums(values: list[float]) -> tuple[float, ...]:
    """The partial sums of adding ``values`` in their printed order, or from the other end."""
    forward = [sum(values[: i + 1]) for i in range(len(values))]
    backward = [sum(values[i:]) for i in range(len(values))]
    return tuple(forward + backward)


def pick(rng: np.random.Generator, entries: tuple[Entry, ...], k: int) -> list[Entry]:
    return [entries[int(i)] for i in sorted(rng.choice(len(entries), size=k, replace=False))]


def n_entries(difficulty: float, rng: np.random.Generator) -> int:
    return int(5 + round(3 * difficulty) + rng.integers(0, 2))


@dataclass(frozen=True)
class Options:
    """What a generator version changes in the blueprints: v1 and v2 take every question's first wording
    and the original hybrids; v3 draws wordings for the pair, adds lookups and Python computations, asks
    only questions whose premise holds on the scene (``answerable``; ``premises`` checks it) and draws
    every document's labels from the kind's whole vocabulary (``shared_vocabulary``, twins 3.1)."""

    wording: Wording = field(default_factory=Wording)
    richer: bool = False
    answerable: bool = False
    shared_vocabulary: bool = False

    def kind(self, name: str) -> Kind:
        """The kind a builder draws a ``name`` document from (v3: the vocabulary it shares with decoys)."""
        return vocabulary_kind(name) if self.shared_vocabulary else KINDS[name]
