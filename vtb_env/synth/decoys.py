"""Decoy documents for generator v3: pages that look like the key document and carry digits,
but answer nothing the task asks.

A decoy is the key document's kind (style, paper, ink, header, number format, row count), so a
page that holds the decoy and a page that holds the key document have the same texture; its title
is another of the kind's titles. Twins 3.1: its labels come from the same vocabulary as the key
document's (``vocabulary_kind``), less every label the key document prints, so a reader who does not
know the question cannot tell the two apart (before, decoys drew from vocabularies no question named,
and the words on the large page gave the label away), and a question that names an entry points at
one document.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from vtb_env.synth.kinds import KINDS, LAB_TESTS, TOWNS, Kind, positive_lab_value
from vtb_env.synth.scenes import Entry, Scene, make_scene

# The second half of each kind's vocabulary (v3, twins 3.1: key documents draw from both halves, see
# ``vocabulary_kind``); each kind's two halves hold at least 18 labels, twice the most rows a document has.
DECOY_LABELS: dict[str, tuple[str, ...]] = {
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
    "scoreboard": ("Eagles", "Stallions", "Dragons", "Lions", "Storm", "Knights", "Raiders", "Bulls", "Jets", "Sharks"),
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
        "Thornbury",
    ),
    "measurements": ("T-1", "T-2", "T-3", "T-4", "T-5", "T-6", "T-7", "T-8", "T-9"),
    "chart": ("K1", "K2", "K3", "K4", "K5", "K6", "K7", "K8", "K9", "C9"),
    "ticket": ("Carriage", "Platform", "Berth", "Class", "Ref", "Seat row", "Wagon", "Booking", "Check-in"),
}
# The lab tests v3's decoy reports printed before twins 3.1; now the second half of the lab vocabulary (LAB_TESTS).
DECOY_LAB_TESTS: dict[str, tuple[str, float, float, float]] = {name: LAB_TESTS[name] for name in tuple(LAB_TESTS)[10:]}
DECOY_TOWNS = (
    "Ashby",
    "Brampton",
    "Carlow",
    "Deepdale",
    "Eskdale",
    "Foxton",
    "Glenrock",
    "Hatfield",
    "Ingleby",
    "Lindale",
)


def vocabulary_kind(name: str) -> Kind:
    """Generator v3's ``name`` kind (twins 3.1): key and decoy documents draw their labels from one
    vocabulary, the kind's labels and the decoy ones (lab tests: all of ``LAB_TESTS``; maps: both town
    lists), so a reader who does not know the question cannot tell a key document from a decoy."""
    kind = KINDS[name]
    if name == "lab":
        return replace(kind, labels=tuple(LAB_TESTS), draw_value=positive_lab_value)
    if kind.style == "map":
        return replace(kind, labels=TOWNS + DECOY_TOWNS)
    return replace(kind, labels=kind.labels + DECOY_LABELS[name])


def _title(key: Scene, rng: np.random.Generator) -> str:
    others = [t for t in key.kind.titles if t != key.title] or [key.title]
    return str(others[int(rng.integers(0, len(others)))])


def _ticket_decoy(key: Scene, rng: np.random.Generator) -> Scene:
    """A second ticket-like slip (seat reservation): the same look, fields no question asks about."""
    labels = [str(label) for label in rng.permutation(DECOY_LABELS["ticket"])[: len(key.entries)]]
    values = [f"{int(rng.integers(1, 99))}{'ABCDEF'[int(rng.integers(0, 6))]}" for _ in labels]
    return Scene(key.kind, "Seat reservation", tuple(Entry(lbl, 0.0, v) for lbl, v in zip(labels, values, strict=True)))


def decoy_scene(key: Scene, rng: np.random.Generator) -> Scene:
    """A look-alike of ``key`` (same kind and row count) drawn from the kind's whole vocabulary
    (``vocabulary_kind``) less every label ``key`` prints: it names none of the key document's entries."""
    if key.kind.name == "ticket":
        return _ticket_decoy(key, rng)
    kind = vocabulary_kind(key.kind.name)
    printed = {name for e in key.entries for name in (e.label, *e.towns)}  # a map's towns too
    scene = make_scene(replace(kind, labels=tuple(x for x in kind.labels if x not in printed)), rng, len(key.entries))
    return replace(scene, title=_title(key, rng))
