"""Decoy documents for generator v3: pages that look like the key document and carry digits,
but answer nothing the task asks.

A decoy is the key document's kind (style, paper, ink, header, number format, row count), so a
page that holds the decoy and a page that holds the key document have the same texture; its title
is another of the kind's titles and its labels come from vocabularies disjoint from every label a
question can name, so only reading tells which page is which (and a question that names an
entry points at one document).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from vtb_env.synth.scenes import Entry, Kind, Scene, make_scene

DECOY_LABELS: dict[str, tuple[str, ...]] = {  # kind: labels no question names (at least 9 each)
    "menu": (
        "Focaccia",
        "Ravioli",
        "Polenta",
        "Arancini",
        "Cannoli",
        "Frittata",
        "Ossobuco",
        "Panzanella",
        "Affogato",
        "Saltimbocca",
    ),
    "timetable": (
        "Quayside",
        "Library",
        "Town Hall",
        "Westfield",
        "Castle",
        "Depot",
        "Quarry Lane",
        "Bay View",
        "Fairground",
        "Southgate",
    ),
    "receipt": (
        "Vinegar",
        "Pasta",
        "Lentils",
        "Spinach",
        "Mustard",
        "Walnuts",
        "Granola",
        "Lemons",
        "Parsley",
        "Cocoa",
    ),
    "quotes": ("DRAX", "PELO", "BRIX", "PYXO", "HUXA", "LUMO", "MYRT", "QUBE", "WEXO", "DELK"),
    "portfolio": ("DRAX", "PELO", "BRIX", "PYXO", "HUXA", "LUMO", "MYRT", "QUBE", "WEXO", "DELK"),
    "scoreboard": ("Eagles", "Stallions", "Dragons", "Lions", "Storm", "Knights", "Raiders", "Bulls", "Jets"),
    "league": (
        "Westbury",
        "Harlow Town",
        "Lakeside",
        "Eastwood",
        "Fairhaven",
        "Brookfield",
        "Ravensby",
        "Highgate",
        "Pinecrest",
    ),
    "measurements": ("T-1", "T-2", "T-3", "T-4", "T-5", "T-6", "T-7", "T-8", "T-9"),
    "chart": ("K1", "K2", "K3", "K4", "K5", "K6", "K7", "K8", "K9"),
    "ticket": ("Carriage", "Platform", "Berth", "Class", "Ref", "Seat row", "Wagon", "Booking", "Check-in"),
}
DECOY_LAB_TESTS: dict[str, tuple[str, float, float, float]] = {  # name: (unit, low, high, step), as LAB_TESTS
    "Ferritin": ("ng/mL", 24.0, 336.0, 1.0),
    "Magnesium": ("mg/dL", 1.7, 2.2, 0.1),
    "Albumin": ("g/dL", 3.4, 5.4, 0.1),
    "Bilirubin": ("mg/dL", 0.1, 1.2, 0.1),
    "Phosphate": ("mg/dL", 2.5, 4.5, 0.1),
    "Chloride": ("mmol/L", 96.0, 106.0, 1.0),
    "Iron": ("ug/dL", 60.0, 170.0, 1.0),
    "Lactate": ("mmol/L", 0.5, 2.2, 0.1),
    "Lipase": ("U/L", 10.0, 140.0, 1.0),
}
DECOY_TOWNS = ("Ashby", "Brampton", "Carlow", "Deepdale", "Eskdale", "Foxton", "Glenrock", "Hatfield", "Ingleby")


def _decoy_lab_value(rng: np.random.Generator, label: str) -> float:
    _unit, low, high, step = DECOY_LAB_TESTS[label]
    span = high - low
    value = float(rng.uniform(max(step, low - 0.25 * span), high + 0.25 * span))
    return round(round(value / step) * step, 1)


def _decoy_lab_extra(label: str) -> str:
    unit, low, high, step = DECOY_LAB_TESTS[label]
    digits = 1 if step < 1 else 0
    return f"{unit}  ({low:.{digits}f}-{high:.{digits}f})"


def _decoy_kind(kind: Kind) -> Kind:
    if kind.name == "lab":
        return replace(kind, labels=tuple(DECOY_LAB_TESTS), draw_value=_decoy_lab_value, extra=_decoy_lab_extra)
    return replace(kind, labels=DECOY_LABELS[kind.name])


def _title(key: Scene, rng: np.random.Generator) -> str:
    others = [t for t in key.kind.titles if t != key.title] or [key.title]
    return str(others[int(rng.integers(0, len(others)))])


def _map_decoy(key: Scene, rng: np.random.Generator) -> Scene:
    n = len(key.entries)
    towns = [str(t) for t in rng.permutation(DECOY_TOWNS)[: n + 1]]
    entries = tuple(
        Entry(f"{a} to {b}", float(v), key.kind.fmt(float(v)))
        for (a, b), v in zip(zip(towns, towns[1:], strict=False), rng.integers(3, 49, size=n), strict=True)
    )
    return Scene(key.kind, _title(key, rng), entries)


def _ticket_decoy(key: Scene, rng: np.random.Generator) -> Scene:
    """A second ticket-like slip (seat reservation): the same look, fields no question asks about."""
    labels = [str(label) for label in rng.permutation(DECOY_LABELS["ticket"])[: len(key.entries)]]
    values = [f"{int(rng.integers(1, 99))}{'ABCDEF'[int(rng.integers(0, 6))]}" for _ in labels]
    return Scene(key.kind, "Seat reservation", tuple(Entry(lbl, 0.0, v) for lbl, v in zip(labels, values, strict=True)))


def decoy_scene(key: Scene, rng: np.random.Generator) -> Scene:
    """A look-alike of ``key`` (same kind and row count) that names none of its entries."""
    if key.kind.style == "map":
        return _map_decoy(key, rng)
    if key.kind.name == "ticket":
        return _ticket_decoy(key, rng)
    scene = make_scene(_decoy_kind(key.kind), rng, len(key.entries))
    return replace(scene, title=_title(key, rng))
