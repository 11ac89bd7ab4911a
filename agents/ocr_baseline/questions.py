"""The turn's question and the rows it names.

Row labels are matched in the question exactly, or fuzzily for OCR slips; words of the question
templates never name a row.
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass
from typing import Any, Sequence

from vtb_agents.ocr_baseline.reading import Row, label_key
from vtb_env.synth import templates

_STOP = frozenset(
    "a an and are as at be by do does for from how i in is it its me much many of on or per please shown show tell "
    "that the their there this to was what when where which who will with you your image images picture photo value "
    "number".split()
)
# Words of the question templates that never name a row (so a row label is never matched on them).
_TEMPLATE_WORDS = frozenset(
    "price last score points result results reading departure time bar shares held number total difference "
    "between mean share combined belongs percent percentage decimal upper limit reference range split two parts "
    "photo report pages menu receipt quote board statement scoreboard league table chart timetable lab document "
    "changed previous since here much more than after minutes ride take long track train average speed km "
    "cycling marked route map far following want order units plus tip sales tax broker commission highest most "
    "latest tallest longest upwards first one which specimen ticker team club stop dish item test holding "
    "company published annual dividend income pay year using week later quarter break rounds follow visit "
    "repeat run drying updated within outside if not".split()
)


_CODE = re.compile(r"[a-z]\d")  # a specimen's or a bar's code, as a label key
_CODE_WORD = re.compile(r"(?<![a-z0-9])[a-z][-.]?\d(?![a-z0-9])")


@dataclass
class Question:
    """The turn's question, with what the dialogue adds to it."""

    text: str  # the prompt (merged with the clarified question when this prompt answers ours)
    prompt: str  # the latest prompt as written
    previous_answer: str  # the agent's own previous final answer ("" on the first turn)
    clarified: bool  # the latest prompt answers the agent's clarifying question

    @property
    def low(self) -> str:
        return self.text.lower()


def named_rows(question: str, rows: Sequence[Row]) -> list[Row]:
    """Rows whose label the question names, in the order the question names them."""
    low = question.lower()
    qkey = label_key(question)
    words = re.findall(r"[a-z0-9][a-z0-9'-]*", low)
    hits: dict[str, tuple[int, Row, bool]] = {}
    for row in sorted(rows, key=lambda r: -r.confidence):
        label = label_key(row.label)
        if len(label) < 2 or label in hits:
            continue
        label_words = [w for w in re.findall(r"[a-z0-9][a-z0-9'-]*", row.label.lower())]
        if not label_words or all(w in _TEMPLATE_WORDS or w in _STOP for w in label_words):
            continue
        at = _find(low, qkey, words, row.label)
        if at is not None:
            hits[label] = (at, row, _exact(low, row.label))
    # A word the question names exactly is that row, not also a look-alike (ORVA is not ZORA).
    exact_at = {at for at, _row, exact in hits.values() if exact}
    kept = [(at, row) for at, row, exact in hits.values() if exact or at not in exact_at]
    return [row for _at, row in sorted(kept, key=lambda item: item[0])]


def names_exactly(question: str, label: str) -> bool:
    """Does ``question`` name ``label`` word for word (not only a look-alike)?"""
    return _exact(question.lower(), label)


def _exact(low: str, label: str) -> bool:
    return _exact_at(low, label) is not None


def _exact_at(low: str, label: str) -> int | None:
    """Where the question names ``label`` word for word; a code counts without its punctuation
    (``S4`` or ``S.4`` read for the asked ``S-4``)."""
    exact = re.search(r"(?<![a-z0-9])" + re.escape(label.lower()) + r"(?![a-z0-9])", low)
    if exact:
        return exact.start()
    key = label_key(label)
    if _CODE.fullmatch(key):
        code = next((m for m in _CODE_WORD.finditer(low) if label_key(m.group(0)) == key), None)
        return code.start() if code else None
    return None


def _find(low: str, qkey: str, words: Sequence[str], label: str) -> int | None:
    """Where ``label`` occurs in the question: exactly, or as a close match of as many words."""
    exact = _exact_at(low, label)
    if exact is not None:
        return exact
    n = len(label.split())
    target = label_key(label)
    if len(target) < 4:
        return None
    for i in range(len(words) - n + 1):
        if set(words[i : i + n]) <= wording_words():  # "does the train make": "make" is no slip of "Market"
            continue
        window = "".join(label_key(w) for w in words[i : i + n])
        if difflib.SequenceMatcher(None, window, target).ratio() >= 0.75:
            return low.find(words[i])
    return None


@functools.cache
def wording_words() -> frozenset[str]:
    """Every word the generator's question wordings print around the entries (``templates``, placeholders
    left out): a misread row label is never matched to one of them as a look-alike."""
    words: set[str] = set()

    def collect(value: Any) -> None:
        if isinstance(value, str):
            words.update(re.findall(r"[a-z0-9][a-z0-9'-]*", re.sub(r"\{[^}]*\}", " ", value).lower()))
        elif isinstance(value, (tuple, list)):
            for item in value:
                collect(item)
        elif isinstance(value, dict):
            for item in value.values():
                collect(item)

    for name, value in vars(templates).items():
        if name.isupper():
            collect(value)
    return frozenset(words)
