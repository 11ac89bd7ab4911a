"""OcrBaselineAgent: each step, understand the turn, then ask, answer, look up, repair or give up."""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections import OrderedDict
from typing import Any

from vtb_agents.base import Action, BaseAgent, CallRecord, Observation
from vtb_agents.ocr_baseline.episode import EpisodeView
from vtb_agents.ocr_baseline.questions import Question, named_rows
from vtb_agents.ocr_baseline.rules import Missing, solve
from vtb_agents.ocr_baseline.vision import enhance_code, repair_plan
from vtb_env.image_names import TOOL_IMAGE_NAME
from vtb_env.ocr import TesseractEngine, is_available, read_text
from vtb_env.toolsets import VISION_TOOL

SECOND_PSM = 6  # Tesseract page mode of the second reading: one block of printed lines (a table's rows)
MAX_VISION_CALLS = 3  # per turn; each call repairs the regions of one image
_FIRST_PERSON = re.compile(r"\b(my|our|ours|mine|i|i'm|i've|me)\b", re.I)
# First-person questions that still say what they are about (a ticket, a named holding, an order, a route...).
_SELF_CONTAINED = re.compile(r"destination|dividend|ticket|i want \d|cycling|track from|route|which |mean of|total of")
_TICKER = re.compile(r"\b[A-Z]{3,5}\b")
_DETAIL_NOUNS = (  # what an underspecified question leaves open, by the words it uses
    (r"\bstock\b", "ticker"),
    (r"\bcompany\b", "company"),
    (r"\bteam\b", "team"),
    (r"\bclub\b", "club"),
    (r"\bresult\b", "test result"),
    (r"\bcondition\b", "condition"),
    (r"\bspecimen\b", "specimen"),
)


class OcrBaselineAgent(BaseAgent):
    """The non-LLM baseline (see the package docstring). ``engine``: any ``vtb_env.ocr`` engine (default Tesseract)."""

    name = "ocr-baseline"

    def __init__(self, engine: Any = None, cache_size: int = 256, second_engine: Any = None):
        super().__init__()
        self.engine = engine
        # A second reading of repaired regions in block mode (another segmentation, other slips), for the vote;
        # by default only with the default engine (a custom engine has no second configuration).
        self.second_engine = second_engine or (
            TesseractEngine(psm=SECOND_PSM) if engine is None and is_available() else None
        )
        self._cache: OrderedDict[str, list[Any]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "engine": type(self.engine).__name__ if self.engine else "tesseract"}

    def act(self, observation: Observation) -> Action:
        start = time.perf_counter()
        self._local.reads = 0
        try:
            second = self.second_ocr if self.second_engine is not None else None
            action = decide(EpisodeView(observation, self.ocr, second))
        except Exception as exc:  # a baseline must never crash a rollout: fail the turn honestly
            action, error = f"I could not work out an answer ({type(exc).__name__}).", f"{type(exc).__name__}: {exc}"
        else:
            error = None
        self.record(
            CallRecord(latency_s=time.perf_counter() - start, error=error, meta={"ocr_reads": self._local.reads})
        )
        return action

    def ocr(self, image: Any) -> list[Any]:
        """OCR words of ``image``, cached by pixel content (turns re-show the same images)."""
        return self._read(image, self.engine, "")

    def second_ocr(self, image: Any) -> list[Any]:
        """OCR words of ``image`` read with the second engine (cached like ``ocr``)."""
        return self._read(image, self.second_engine, "second")

    def _read(self, image: Any, engine: Any, tag: str) -> list[Any]:
        key = hashlib.blake2b(
            image.tobytes() + repr((image.size, image.mode, tag)).encode(), digest_size=16
        ).hexdigest()
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        words = read_text(image, engine)
        self._local.reads = getattr(self._local, "reads", 0) + 1
        with self._lock:
            self._cache[key] = words
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return words


def decide(ep: EpisodeView) -> Action:
    """Ask when the question is underspecified; else solve it, repairing images the answer still needs."""
    if underspecified(ep):
        return clarify(ep)
    outcome = solve(ep, ep.question)
    return repair_or_give_up(ep, outcome) if isinstance(outcome, Missing) else outcome


def underspecified(ep: EpisodeView) -> bool:
    """First person, no entry named, not a question about all entries, several candidates in sight."""
    q = ep.question
    if not sounds_vague(q):
        return False
    names = ep.in_view()
    rows = [r for n in names for r in ep.reading(n).rows] if names else []
    if named_rows(q.text, rows) or _TICKER.search(q.prompt):
        return False
    return len(rows) != 1  # several candidates (or none legible): which one is meant is unknown


def sounds_vague(q: Question) -> bool:
    """A first-person question that does not say what it is about (and does not answer our question)."""
    return not q.clarified and bool(_FIRST_PERSON.search(q.prompt)) and not _SELF_CONTAINED.search(q.low)


def clarify(ep: EpisodeView) -> str:
    """A clarifying question with no number in it (a number would be a guess)."""
    q = ep.question.low
    if re.search(r"\bride\b|get on|line\b", q):
        ask = "At which stops do you get on and off?"
    elif re.search(r"how far is it|going", q):
        ask = "Where are you starting from and where are you going?"
    elif re.search(r"\btwo items\b|returned", q):
        ask = "Which items do you mean?"
    elif re.search(r"dinner|order", q):
        ask = "Which dishes are you ordering?"
    else:  # name the missing detail: a generic "which one?" earns no clarify credit
        noun = next((word for pattern, word in _DETAIL_NOUNS if re.search(pattern, q)), "entry")
        ask = f"Which {noun} do you mean?"
    return f"Several entries could fit, so I need one detail before answering: {ask}"


def repair_or_give_up(ep: EpisodeView, missing: Missing) -> Action:
    """Call the vision tool on the first unrepaired image ``missing`` names (at most
    ``MAX_VISION_CALLS`` a turn); else admit the failure."""
    if VISION_TOOL in ep.offered and ep.vision_calls() < MAX_VISION_CALLS:
        names = [n for n in (missing.images or ep.current()) if n in ep.images and not ep.repaired(n)]
        if names:  # one image per call: the sandbox returns at most 16 files
            plan = repair_plan(names[0], ep.images[names[0]])
            start = sum(1 for n in ep.images if TOOL_IMAGE_NAME.fullmatch(n))
            return ep.call(VISION_TOOL, {"code": enhance_code(plan, start)})
    return f"I could not read {missing.what} in the image, so I cannot answer reliably."
