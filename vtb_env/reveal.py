"""What a tool call revealed of what the task hides: the judgement the mode reward's credit reads.

A synthetic task knows the facts it asks for (``metadata["key_facts"]``: a value, the printed names of its
row, the picture and the turn) and hides some of them from the reader that decides its mode label
(Tesseract, ``vtb_env.synth.probe``). A call earns the mode credit only when its output shows one:

- a vision call (``python_image_processing``) that did visual work (``image_work_done``) reveals a fact
  when one of the images it returned shows what the task's picture, as shown, does not: the reader finds
  the fact's value in the output where it finds it nowhere in the picture, or the value with its row's
  names where the picture lacks one of them (``revealed_by``). Only facts asked on the call's turn or a later
  one count: a crop made after the turn that needed the fact was answered reveals nothing in time;
- a lookup call (``LOOKUP_TOOLS``) reveals a value when its result holds a number the task's answer uses
  (the turn's ``world["working"]`` from this turn on) that no picture prints (``lookup_values``).

So a blank crop, a whole-picture rotation or grey copy (the reader sees in it what it saw as shown), a
printed size (no image) and a search that finds nothing of the answer reveal nothing. The judgement is made
here, where the images are, and recorded on the call (``ToolCallRecord.revealed``: the values revealed);
the reward only reads it (``vtb_rewards.mode.credited_calls``). ``None`` means "not judged": a task without
key facts (official data), a tool that is neither, or (a vision call) no reader installed; the reward then keeps
the "did visual work" rule. A completion scored from its text is judged the same way (``vtb_env.replay``): a
lookup from the result its text holds (``lookup_revealed``), a vision call by replaying it in the env.

Cost is bounded by construction: only vision calls that did visual work on tasks with key facts are read,
at most ``MAX_READ_PIXELS`` of their images per call, and every reading is cached by the image's sha256
(``MAX_CACHED_READINGS`` entries, least recently used first out).
"""

from __future__ import annotations

import io
import logging
import re
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from PIL import Image

from vtb_env import ocr
from vtb_env.answer_values import NUMBER, values_of
from vtb_env.observation import ImageAsset
from vtb_env.synth.probe import fact_read
from vtb_env.tasks import Task
from vtb_env.toolsets import LOOKUP_TOOLS, VISION_TOOL
from vtb_env.trajectory import ToolCallRecord, image_work_done

if TYPE_CHECKING:
    from vtb_env.episode import EpisodeState

logger = logging.getLogger(__name__)

MAX_READ_PIXELS = 12_000_000  # per call: ~4 s of Tesseract; the reference's rows are a few hundred thousand
MAX_CACHED_READINGS = 4096


def numbers_in(text: str) -> set[float]:
    """The numbers a text states, read as the exact checks read them (``vtb_env.answer_values``: "$0.90" and
    "0.9" are one number; a date's or a clock time's digits are none)."""
    return {float(value) for value in values_of(text, NUMBER)}


MIN_DOTLESS_DIGITS = 3  # "77.4" read as "774" still shows the fact; "7.5" as "75" is too common a number


def _spellings(fact: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The fact as printed, and its value with the decimal point lost (Tesseract often drops a small point:
    "77.4" reads "774"). The same spellings are looked for in the picture as shown and in the output, so a
    call that only re-shows the picture still reveals nothing."""
    text = str(fact["text"])
    dotless = re.sub(r"(?<=\d)\.(?=\d)", "", text)
    if dotless == text or sum(c.isdigit() for c in dotless) < MIN_DOTLESS_DIGITS:
        return [fact]
    return [fact, {**fact, "text": dotless}]


def revealed_by(fact: Mapping[str, Any], shown: str, output: str) -> bool:
    """Does ``output`` (the reader's text of a returned image) show ``fact`` in a way ``shown`` (its text of the
    task's picture) does not? Its value where the picture shows it nowhere, or value and names where the
    picture lacks some of them (each in any of the fact's ``_spellings``)."""
    spellings = _spellings(fact)
    value_shown = any(ocr.contains(shown, f["text"]) for f in spellings)
    if not value_shown and any(ocr.contains(output, f["text"]) for f in spellings):
        return True
    return not any(fact_read(shown, f) for f in spellings) and any(fact_read(output, f) for f in spellings)


def lookup_values(task: Task, turn: int) -> set[float]:
    """The numbers the answer uses from ``turn`` on (its worlds' ``working``; else its golden answers) that
    no picture prints (no key fact's value): what only a lookup can bring."""
    used: set[float] = set()
    for later in task.turns[turn:]:
        working = (later.world or {}).get("working")
        used |= {abs(float(v)) for v in working} if working else {abs(v) for v in numbers_in(later.golden_answer)}
    printed = {abs(v) for fact in task.metadata.get("key_facts", ()) for v in numbers_in(fact["text"])}
    return used - printed


def lookup_revealed(task: Task, turn: int, call: ToolCallRecord) -> list[str] | None:
    """The values a lookup ``call`` on ``turn`` revealed: the numbers of its result (``call.output``) that the
    answer uses and no picture prints (``lookup_values``); None when not judged (a task without key facts or
    without a lookup need, or another tool). Judged from the result's text alone, so the env and a completion's
    text (``vtb_env.replay``) judge a lookup alike."""
    if call.name not in LOOKUP_TOOLS or not task.metadata.get("key_facts") or not task.metadata.get("needs_lookup"):
        return None
    if not call.ok:
        return []
    found = lookup_values(task, turn) & {abs(v) for v in numbers_in(call.output)}
    return [f"{value:g}" for value in sorted(found)]


class RevealJudge:
    """Judges calls for one or more envs (thread-safe): ``judge(task, turn, call, images)`` -> values or None."""

    def __init__(self, reader: Callable[[Image.Image], str] | None = None) -> None:
        self._reader = reader
        self._readings: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()
        self._unavailable = False

    def judge(
        self, task: Task, turn: int, call: ToolCallRecord, images: Sequence[ImageAsset], shown: Iterable[ImageAsset]
    ) -> list[str] | None:
        """The values ``call`` revealed (``images``: what it returned; ``shown``: the task's pictures so far), or
        None when it is not judged (module doc)."""
        facts = task.metadata.get("key_facts")
        if call.name in LOOKUP_TOOLS:
            return lookup_revealed(task, turn, call)
        if not facts or self._unavailable or call.name != VISION_TOOL:
            return None
        return self._vision(facts, turn, call, images, {asset.name: asset for asset in shown})

    def _vision(
        self,
        facts: Sequence[Mapping[str, Any]],
        turn: int,
        call: ToolCallRecord,
        images: Sequence[ImageAsset],
        shown: Mapping[str, ImageAsset],
    ) -> list[str] | None:
        due = [fact for fact in facts if fact["turn"] >= turn and fact["image"] in shown]
        if not due or not image_work_done(call.image_work):
            return []
        try:
            outputs = [self.read(asset) for asset in _within_budget(images)]
            pictures = {name: self.read(shown[name]) for name in {fact["image"] for fact in due}}
        except ocr.OcrUnavailable as exc:
            logger.warning("no reader for the mode credit's judgement (%s): vision calls are not judged", exc)
            self._unavailable = True
            return None
        return list(
            dict.fromkeys(
                fact["text"]
                for fact in due
                if any(revealed_by(fact, pictures[fact["image"]], text) for text in outputs)
            )
        )

    def forget(self) -> None:
        """Drop every cached reading (a benchmark's cold start: ``scripts/bench_mode_credit.py --text``)."""
        with self._lock:
            self._readings.clear()

    def read(self, asset: ImageAsset) -> str:
        """The reader's text of one image, cached by its sha256."""
        with self._lock:
            if asset.sha256 in self._readings:
                self._readings.move_to_end(asset.sha256)
                return self._readings[asset.sha256]
        with _open(asset) as image:
            image.load()
            text = self._reader(image) if self._reader else ocr.text_of(image)
        with self._lock:
            self._readings[asset.sha256] = text
            while len(self._readings) > MAX_CACHED_READINGS:
                self._readings.popitem(last=False)
        return text


def _within_budget(images: Sequence[ImageAsset]) -> list[ImageAsset]:
    """The call's images in order while their pixels stay within ``MAX_READ_PIXELS`` (read from the header)."""
    kept, total = [], 0
    for asset in images:
        with _open(asset) as image:  # the header only: pixels are decoded when read
            total += image.width * image.height
        if total > MAX_READ_PIXELS:
            break
        kept.append(asset)
    return kept


def _open(asset: ImageAsset) -> Image.Image:
    """A fresh image object per reading (an asset's own ``pil`` is shared between steps and threads)."""
    return Image.open(io.BytesIO(asset.data))


_shared: RevealJudge | None = None
_shared_lock = threading.Lock()


def shared_judge() -> RevealJudge:
    """The process-wide judge (one reading cache for every env of the process)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = RevealJudge()
        return _shared


def episode_judge(episode: "EpisodeState") -> Callable[[ToolCallRecord, list[ImageAsset]], list[str] | None]:
    """The judgement of one round of ``episode`` (``tool_round.run_calls``'s ``judge``): its task, its turn, and
    the pictures its dialogue shows, read by the shared judge."""
    judge, turn = shared_judge(), episode.turn_index
    return lambda call, images: judge.judge(episode.task, turn, call, images, episode.dialogue.assets)
