"""The names the synthetic documents print, to snap OCR slips of a row label to the name meant.

Small print misreads a letter or two (``Kingsbey``, ``Carbonare``); an answer about every entry
must name the row exactly. A label snaps only to the one printed name it is closest to, and only
when that is close; labels the generator never prints (the official benchmark) stay as read.
"""

from __future__ import annotations

import difflib
import functools
import re

from vtb_env.synth.decoys import DECOY_LAB_TESTS, DECOY_LABELS
from vtb_env.synth.kinds import KINDS, TOWNS

CLOSE = 0.8  # similarity (difflib ratio, case-blind) a misread needs to its name
MARGIN = 0.05  # ... and by how much it must beat the next closest name
# Letter pairs OCR reads as one letter in small print ("Hornets" -> "Homets", "Airport" -> "Ampor").
_MERGED = (("rn", "m"), ("cl", "d"), ("li", "h"), ("vv", "w"), ("ri", "n"), ("ir", "m"))


@functools.cache
def printed_names() -> dict[str, str]:
    """Every row name the generator prints (asked-about and decoy labels), by lower case; codes excluded."""
    names = [label for kind in KINDS.values() for label in kind.labels]
    names += [label for labels in DECOY_LABELS.values() for label in labels] + list(DECOY_LAB_TESTS) + list(TOWNS)
    return {name.lower(): name for name in names if len(name) >= 4 and not re.search(r"\d", name)}


def snap(label: str, close: float = CLOSE) -> str:
    """``label`` as the printed name it misreads (at least ``close`` alike; ties and distant labels stay as read)."""
    low = label.lower()
    names = printed_names()
    if len(low) < 4 or low in names:
        return names.get(low, label)
    scored = sorted(((_similarity(low, name), name) for name in names), reverse=True)
    if scored[0][0] >= close and scored[1][0] <= scored[0][0] - MARGIN:
        return names[scored[0][1]]
    return label


def _similarity(read: str, name: str) -> float:
    """How close a reading is to a name, also to the name with letter pairs OCR merges read merged."""
    merged = name
    for pair, one in _MERGED:
        merged = merged.replace(pair, one)
    forms = {(read, name), (read, merged)}
    if " " in name:  # a name of two words also read with its space lost or moved ("Coesarsoled")
        forms |= {(_letters(read), _letters(name)), (_letters(read), _letters(merged))}
    return max(difflib.SequenceMatcher(None, a, b).ratio() for a, b in forms)


def _letters(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text)
