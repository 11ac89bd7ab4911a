"""OCR post-processing: the words OCR found, grouped into printed lines, then into rows.

A row is one printed entry (a table row, a bar with its value, a lab test with its reference
range); a ``Reading`` is every row of one image with how legible it was.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Sequence

from vtb_agents.ocr_baseline.lexicon import snap

_VALUE = re.compile(r"^[-−]?\$?\d[\d,]*(?:\.\d+)?%?$|^\d{1,2}:\d{2}$")
_RANGE = re.compile(r"(\d+(?:\.\d+)?)\s*[-–]\s*(\d+(?:\.\d+)?)")
_DOLLAR_CODE = re.compile(r"^\$[-.]?\d$")  # "S-7" read as "$-7" (a price has cents)


@dataclass(frozen=True)
class Row:
    """One printed entry: its label, its value as printed and as a number, where it is."""

    label: str
    text: str
    value: float
    extra: tuple[float, ...] = ()  # further numbers on the line (a lab row's reference range)
    confidence: float = 0.0
    center: tuple[float, float] = (0.0, 0.0)
    votes: int = 1  # readings of the document that agree on this row (``voting.vote``)
    guessed: bool = False  # the value had letters read for digits (``i181``): a weaker vote


@dataclass
class Reading:
    """What the agent read in one image (or the best variants of its regions)."""

    rows: list[Row] = field(default_factory=list)
    text: str = ""
    quality: float = 0.0  # summed confidence of real words: how legible the image was
    legible: bool = False  # real words read with high confidence: no need to try other orientations

    def merged(self, other: "Reading") -> "Reading":
        known = {label_key(r.label) for r in self.rows}
        rows = self.rows + [r for r in other.rows if label_key(r.label) not in known]
        return Reading(
            rows, (self.text + "\n" + other.text).strip(), self.quality + other.quality, self.legible or other.legible
        )


def label_key(label: str) -> str:
    return re.sub(r"[^a-z0-9]", "", label.lower())


def parse_number(text: str) -> float | None:
    if re.fullmatch(r"\d{1,2}:\d{2}", text):
        hours, minutes = text.split(":")
        return float(int(hours) * 60 + int(minutes))
    try:
        return float(text.replace("−", "-").replace("$", "").replace(",", "").rstrip("%"))
    except ValueError:
        return None


def group_lines(words: Sequence[Any]) -> list[list[Any]]:
    """OCR words grouped into printed lines, each left to right: by vertical overlap once the photo's
    tilt is taken out (a tilted page's line climbs or falls a text height across a wide page)."""
    slope = _text_slope(_group(words, 0.0))
    return _group(words, slope) if slope else _group(words, 0.0)


def _group(words: Sequence[Any], slope: float) -> list[list[Any]]:
    """Lines by vertical overlap of the words' boxes, their heights shifted by ``-slope * x``."""
    rows: list[list[Any]] = []
    level = lambda w, y: y - slope * (w.box[0] + w.box[2]) / 2  # noqa: E731
    for word in sorted(words, key=lambda w: (level(w, (w.box[1] + w.box[3]) / 2), w.box[0])):
        center = level(word, (word.box[1] + word.box[3]) / 2)
        for row in rows:
            top, bottom = min(level(w, w.box[1]) for w in row), max(level(w, w.box[3]) for w in row)
            if top <= center <= bottom:
                row.append(word)
                break
        else:
            rows.append([word])
    for row in rows:
        row.sort(key=lambda w: w.box[0])
    return rows


def _text_slope(lines: Sequence[Sequence[Any]]) -> float:
    """The median rise per pixel between neighbouring words of a line (0 with too few to tell)."""
    slopes = []
    for line in lines:
        for a, b in zip(line, line[1:], strict=False):
            dx = (b.box[0] + b.box[2]) / 2 - (a.box[0] + a.box[2]) / 2
            height = max(a.box[3] - a.box[1], b.box[3] - b.box[1])
            if dx > 2 * height and abs((a.box[3] - a.box[1]) - (b.box[3] - b.box[1])) < 0.3 * height:
                slopes.append(((b.box[1] + b.box[3]) - (a.box[1] + a.box[3])) / 2 / dx)
    return float(sorted(slopes)[len(slopes) // 2]) if len(slopes) >= 5 else 0.0


def _is_label_word(text: str) -> bool:
    return bool(re.search(r"[A-Za-z]", text)) and not _VALUE.match(text)


def parse_reading(words: Sequence[Any]) -> Reading:
    """Rows of a table (label words, then a value), bar charts (label under a value) and maps."""
    lines = group_lines(words)
    rows: list[Row] = []
    loose_labels: list[Any] = []
    loose_values: list[Any] = []
    for line in lines:
        found = _line_rows(line)
        rows += found
        if not found and all(_is_label_word(w.text) for w in line):
            loose_labels.extend(line)
        loose_values.extend(w for w in line if _VALUE.match(w.text) and "." in w.text)
    rows += _chart_rows(loose_labels, loose_values, rows)
    text = "\n".join(" ".join(w.text for w in line) for line in lines)
    real = [w.confidence for w in words if re.fullmatch(r"[A-Za-z]{3,}", w.text)]
    quality = sum(c for c in real if c >= 0.5)
    legible = len(real) >= 3 and sum(real) / len(real) >= 0.8 and len(rows) >= 2
    return Reading(rows, text, quality, legible)


def _line_rows(line: Sequence[Any]) -> list[Row]:
    """Every ``label words, value`` pair on a printed line (side-by-side panels share lines).

    Text between a value and the next label (units, a reference range) belongs to the first row.
    """
    pairs: list[tuple[list[Any], Any, int]] = []
    label_words: list[Any] = []
    for i, word in enumerate(line):
        text = _digits(word.text.strip(".,;:")) if label_words else word.text.strip(".,;:")
        if not label_words and _DOLLAR_CODE.match(text) and i + 1 < len(line) and "." in line[i + 1].text:
            label_words = [_as_code(word)]
            continue
        if _VALUE.match(text) and label_words:
            if not (i + 1 < len(line) and line[i + 1].text.lower().startswith("km")):  # a map distance is no row
                pairs.append((label_words, word, i))
            label_words = []
        elif _is_label_word(text) and not re.search(r"/|\(", text):
            if label_words and word.box[0] - label_words[-1].box[2] > 2 * (word.box[3] - word.box[1]):
                label_words = []  # far from the previous word: another column or page, not one label
            label_words.append(word)
        else:
            label_words = []
    rows = []
    for n, (label_words, word, i) in enumerate(pairs):
        end = pairs[n + 1][2] - len(pairs[n + 1][0]) if n + 1 < len(pairs) else len(line)  # labels precede values
        span = _RANGE.search(" ".join(w.text for w in line[i + 1 : end]))
        text = _digits(word.text.strip(".,;:"))
        value = parse_number(text)
        if value is None:
            continue
        label = snap(_code(" ".join(w.text.strip("$()|") for w in label_words)))
        conf = min(w.confidence for w in [*label_words, word])
        rows.append(
            Row(
                label,
                text,
                value,
                _range(span),
                conf,
                words_center([*label_words, word]),
                guessed=text != word.text.strip(".,;:"),
            )
        )
    return rows


def _range(span: re.Match[str] | None) -> tuple[float, ...]:
    """A reference range ``low-high`` as read; none when misread out of order (``150-9`` for 150-400)."""
    if span is None or float(span.group(1)) >= float(span.group(2)):
        return ()
    return (float(span.group(1)), float(span.group(2)))


def _as_code(word: Any) -> Any:
    """The OCR word ``$-7`` as the code ``S-7`` it shows."""
    return SimpleNamespace(text="S-" + word.text[-1], box=word.box, confidence=word.confidence)


def _digits(text: str) -> str:
    """A value where OCR read ``1`` as ``i`` or ``l`` (``ii`` -> ``11``, ``i9`` -> ``19``, ``$l2.50``)."""
    if re.fullmatch(r"\$?(?=.*\d)[\diIl|oO.,:]+|[iIl|]{2,}", text):
        return text.translate(str.maketrans({"i": "1", "I": "1", "l": "1", "|": "1", "o": "0", "O": "0"}))
    return text


def words_center(words: Sequence[Any]) -> tuple[float, float]:
    return (
        sum((w.box[0] + w.box[2]) / 2 for w in words) / len(words),
        sum((w.box[1] + w.box[3]) / 2 for w in words) / len(words),
    )


def _chart_rows(labels: Sequence[Any], values: Sequence[Any], taken: Sequence[Row]) -> list[Row]:
    """Bar labels under the axis paired with the value printed above the same bar."""
    used = {r.text for r in taken}
    rows = []
    for word in labels:
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]{0,3}", word.text):
            continue
        lx, ly = words_center([word])
        width = max(8.0, (word.box[2] - word.box[0]) * 1.5)
        above = [
            v
            for v in values
            if v.text not in used and abs(words_center([v])[0] - lx) <= width and words_center([v])[1] < ly
        ]
        if above:
            best = min(above, key=lambda v: abs(words_center([v])[0] - lx))
            value = parse_number(best.text)
            if value is not None:
                rows.append(
                    Row(_code(word.text), best.text, value, (), min(word.confidence, best.confidence), (lx, ly))
                )
    return rows


_DIGIT_LOOKALIKES = str.maketrans(
    {
        "T": "7",
        "l": "1",
        "I": "1",
        "i": "1",
        "O": "0",
        "o": "0",
        "S": "5",
        "s": "5",
        "B": "8",
        "Z": "2",
        "é": "6",
        "G": "6",
    }
)


def _code(text: str) -> str:
    """Short codes like ``C7`` or ``S-3`` that OCR misreads (``CT``, ``S$-3``): a letter, then digit look-alikes."""
    text = re.sub(r"^([A-Za-z])[.,_~=–—]+(\d)$", r"\1-\2", text.replace("$", ""))  # "S.4" is "S-4"
    if len(text) <= 4 and text[:1].isalpha() and not text[1:].isalpha():
        return text[0].upper() + text[1:].translate(_DIGIT_LOOKALIKES)
    if len(text) == 2 and text[:1].isalpha():
        return text[0].upper() + text[1:].translate(_DIGIT_LOOKALIKES)
    return text


def map_distances(words: Sequence[Any]) -> tuple[list[tuple[str, float]], list[tuple[float, float]]]:
    """A route map: the town names with their x positions, and the ``N km`` labels with theirs."""
    towns, distances = [], []
    for line in group_lines(words):
        for i, word in enumerate(line):
            if i + 1 < len(line) and line[i + 1].text.lower().startswith("km") and re.fullmatch(r"\d+", word.text):
                distances.append((words_center([word])[0], float(word.text)))
            elif re.fullmatch(r"[A-Z][a-z]{3,}", word.text) and word.confidence >= 0.5:
                towns.append((word.text, words_center([word])[0]))
    return towns, distances
