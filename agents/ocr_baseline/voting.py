"""Several readings of one document reconciled row by row.

The vision tool returns each small-print region in four quarter turns, and the agent reads the
turn that parses best a second time with another Tesseract page mode. Small print is misread
differently each time (``Kingsbay 62`` read with confidence 0.2 in one reading and 0.59 in the
next, ``1181`` for ``118`` once), so a row's value is the one most readings agree on, and a row
two readings agree on is no OCR noise whatever its confidence.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections import Counter, defaultdict
from typing import Sequence

from vtb_agents.ocr_baseline.lexicon import printed_names, snap
from vtb_agents.ocr_baseline.reading import Reading, Row, label_key

SAME_LABEL = 0.8  # similarity of two readings of a label (not a printed name) that are one row
GUESSED_VOTE = 0.4  # the weight of a value read with letters for digits
SAME_VALUE_LABEL = 0.5  # ... and of two labels read with the same value ("Pwates 93" and "Pirates 93")
LOOSE_SNAP = 0.7  # a label several readings agree on snaps to a printed name this close (``Fakons``: Falcons)
KEEP_SHARE = 0.5  # a reading takes part in the vote when its quality is at least this share of the best


def vote(readings: Sequence[Reading]) -> Reading:
    """One reading of a document from several readings of it: per row, the value most readings
    agree on (ties: the more confident), the label most readings give (a printed name first).

    Readings far less legible than the best that share no row with it (a wrong quarter turn read as noise)
    take no part.
    """
    readings = [r for r in readings if r.rows]
    if len(readings) <= 1:
        return readings[0] if readings else Reading()
    best = max(readings, key=lambda r: (r.quality, len(r.rows)))
    voters = [r for r in readings if r.quality >= KEEP_SHARE * best.quality or _shares_row(r, best)]
    clusters: list[list[Row]] = []
    for reading in voters:
        for row in reading.rows:
            home = next((c for c in clusters if _same_row(c[0], row)), None)
            if home is None:
                clusters.append([row])
            else:
                home.append(row)
    rows = [_consensus(c) for c in clusters]
    return Reading(rows, "\n".join(r.text for r in voters), best.quality, any(r.legible for r in voters))


def _shares_row(a: Reading, b: Reading) -> bool:
    return any(_same_row(x, y) for x in a.rows for y in b.rows)


def _same_row(a: Row, b: Row) -> bool:
    """Two readings of one row: the same label key; or close labels when neither is a name the generator
    prints; or one decimal value under labels with the same first letter (``S83`` and ``S-3`` at 204.18)."""
    ka, kb = label_key(a.label), label_key(b.label)
    if ka == kb:
        return True
    if a.value == b.value and (
        ("." in a.text and ka[:1] == kb[:1]) or difflib.SequenceMatcher(None, ka, kb).ratio() >= SAME_VALUE_LABEL
    ):
        return True
    names = printed_names()
    if a.label.lower() in names or b.label.lower() in names or min(len(ka), len(kb)) < 4:
        return False
    return difflib.SequenceMatcher(None, ka, kb).ratio() >= SAME_LABEL


def _consensus(rows: Sequence[Row]) -> Row:
    """The row most readings of one label agree on, with how many agree (``votes``)."""
    by_value: dict[float, list[Row]] = defaultdict(list)
    for row in rows:
        by_value[row.value].append(row)
    agreeing = max(by_value.values(), key=lambda rs: (_weight(rs), max(r.confidence for r in rs)))
    labels: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        labels[row.label].append(row)
    names = printed_names()
    label = max(
        labels, key=lambda lab: (lab.lower() in names, len(labels[lab]), max(r.confidence for r in labels[lab]))
    )
    if len(agreeing) >= 2 and label.lower() not in names:  # read alike twice: a slip too far for one reading's
        # snap still names the row (``Fakons``), by the reading of the label that comes closest to a name
        snapped = (snap(lab, LOOSE_SNAP) for lab in sorted(labels, key=lambda lab: -len(labels[lab])))
        label = next((lab for lab in snapped if lab.lower() in names), label)
    top = max(agreeing, key=lambda r: r.confidence)
    ranges = Counter(r.extra for r in agreeing if r.extra)  # a lab row's reference range: the most read one
    extra = max(ranges, key=lambda e: (ranges[e], max(r.confidence for r in agreeing if r.extra == e)), default=())
    return dataclasses.replace(top, label=label, extra=extra, votes=len(agreeing))


def _weight(rows: Sequence[Row]) -> float:
    """A value's votes: a reading that had letters read as digits (``i181``, ``181i``: a rule beside the
    print) counts less than one that read digits."""
    return sum(GUESSED_VOTE if r.guessed else 1.0 for r in rows)


def same_documents(regions: Sequence[Sequence[Reading]], original: Reading | None = None) -> list[list[Reading]]:
    """The readings of each region, regions that show one document joined (their votes share at least
    two rows, label and value): a sheet found by its outline and again as a text region is one document.
    The ``original`` picture's reading joins every document it shares two rows with (large print read twice)."""
    keys = [_keys(vote(readings).rows) for readings in regions]
    docs: list[tuple[set, list[Reading]]] = []
    for key, readings in zip(keys, regions, strict=True):
        home = next((d for d in docs if len(d[0] & key) >= 2), None)
        if home is None:
            docs.append((set(key), list(readings)))
        else:
            home[0].update(key)
            home[1].extend(readings)
    if original is not None:
        for key, readings in docs:
            if len(key & _keys(original.rows)) >= 2:
                readings.append(original)
    return [readings for _key, readings in docs]


def _keys(rows: Sequence[Row]) -> set[tuple[str, float]]:
    return {(label_key(r.label), r.value) for r in rows}
