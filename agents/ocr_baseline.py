"""OcrBaselineAgent: a real non-LLM policy (no GPU, no API key), the default agent of command 1.

It acts only through the observation (the dialogue, the images it was shown, the tools offered);
it never sees answers, rubrics, metadata or reference trajectories. Each step:

1. Understand the turn: the latest prompt, read with rules for the kinds of questions the
   benchmark asks (a lookup, a total, a difference, a mean, an order with tip, a share, a speed,
   a route, "which is highest", "how much more than that", "changed since", a weather or
   dividend lookup). A prompt that answers the agent's own clarifying question is merged with
   the question it clarifies; "that" is resolved from the agent's previous answer (its memory
   is the dialogue).
2. Underspecified question (first person, no entry named, several candidate entries): ask a
   clarifying question instead of guessing.
3. Perceive: OCR of the original images (``vtb_env.ocr``), parsed into a table of rows
   (label, value). If the entries the question needs are not all found and the vision tool is
   offered, call ``python_image_processing`` once per turn with concrete code: crops of the
   text-dense regions it located, deskewed by the angle it measured, upscaled, auto-contrasted
   (gamma for dark frames), denoised, in eight orientations (quarter turns,
   mirrored or not). Then read the transformed images the env sends back, keep the best-read variant of
   each region and answer.
4. Lookups (weather archive, company pages) go through ``historical_weather``, ``web_search`` and
   ``browser_get_page_text``; arithmetic is done by the agent itself (it is exact).
5. Still missing what it needs: say so plainly (an honest failure, graded as such).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from agents.base import Action, BaseAgent, CallRecord, Observation
from vtb_env.toolsets import VISION_TOOL

MAX_VISION_CALLS = 3  # per turn; each call repairs the regions of one image
SURE = 0.75  # OCR confidence below which a value the question needs is not trusted without the vision tool
_LABEL = re.compile(r"^\[([^\[\]]+\.(?:png|jpe?g|webp|gif))\]$", re.I)
_VALUE = re.compile(r"^[-−]?\$?\d[\d,]*(?:\.\d+)?%?$|^\d{1,2}:\d{2}$")
_RANGE = re.compile(r"(\d+(?:\.\d+)?)\s*[-–]\s*(\d+(?:\.\d+)?)")
_FIRST_PERSON = re.compile(r"\b(my|our|ours|mine|i|i'm|i've|me)\b", re.I)
_STOP = frozenset(
    "a an and are as at be by do does for from how i in is it its me much many of on or per please shown show tell that the "
    "their there this to was what when where which who will with you your image images picture photo value number".split()
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


# --- perception: words -> lines -> rows --------------------------------------------------------

@dataclass(frozen=True)
class Row:
    """One printed entry: its label, its value as printed and as a number, where it is."""

    label: str
    text: str
    value: float
    extra: tuple[float, ...] = ()  # further numbers on the line (a lab row's reference range)
    confidence: float = 0.0
    center: tuple[float, float] = (0.0, 0.0)


@dataclass
class Reading:
    """What the agent read in one image (or the best variants of its regions)."""

    rows: list[Row] = field(default_factory=list)
    text: str = ""
    quality: float = 0.0  # summed confidence of real words: how legible the image was
    legible: bool = False  # real words read with high confidence: no need to try other orientations

    def merged(self, other: "Reading") -> "Reading":
        known = {_key(r.label) for r in self.rows}
        rows = self.rows + [r for r in other.rows if _key(r.label) not in known]
        return Reading(rows, (self.text + "\n" + other.text).strip(), self.quality + other.quality, self.legible or other.legible)


def _key(label: str) -> str:
    return re.sub(r"[^a-z0-9]", "", label.lower())


def _number(text: str) -> float | None:
    if re.fullmatch(r"\d{1,2}:\d{2}", text):
        hours, minutes = text.split(":")
        return float(int(hours) * 60 + int(minutes))
    try:
        return float(text.replace("−", "-").replace("$", "").replace(",", "").rstrip("%"))
    except ValueError:
        return None


def _group_lines(words: Sequence[Any]) -> list[list[Any]]:
    """OCR words grouped into printed lines by vertical overlap, each left to right."""
    rows: list[list[Any]] = []
    for word in sorted(words, key=lambda w: ((w.box[1] + w.box[3]) / 2, w.box[0])):
        center = (word.box[1] + word.box[3]) / 2
        for row in rows:
            top, bottom = min(w.box[1] for w in row), max(w.box[3] for w in row)
            if top <= center <= bottom:
                row.append(word)
                break
        else:
            rows.append([word])
    for row in rows:
        row.sort(key=lambda w: w.box[0])
    return rows


def _is_label_word(text: str) -> bool:
    return bool(re.search(r"[A-Za-z]", text)) and not _VALUE.match(text)


def parse_reading(words: Sequence[Any]) -> Reading:
    """Rows of a table (label words, then a value), bar charts (label under a value) and maps."""
    lines = _group_lines(words)
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
        if _VALUE.match(text) and label_words:
            if not (i + 1 < len(line) and line[i + 1].text.lower().startswith("km")):  # a map distance is no row
                pairs.append((label_words, word, i))
            label_words = []
        elif _is_label_word(text) and not re.search(r"/|\(", text):
            label_words.append(word)
        else:
            label_words = []
    rows = []
    for n, (label_words, word, i) in enumerate(pairs):
        end = line.index(pairs[n + 1][0][0]) if n + 1 < len(pairs) else len(line)
        span = _RANGE.search(" ".join(w.text for w in line[i + 1:end]))
        text = _digits(word.text.strip(".,;:"))
        value = _number(text)
        if value is None:
            continue
        label = _code(" ".join(w.text.strip("$()|") for w in label_words))
        conf = min(w.confidence for w in [*label_words, word])
        rows.append(Row(label, text, value, (float(span.group(1)), float(span.group(2))) if span else (), conf,
                        _center([*label_words, word])))
    return rows


def _digits(text: str) -> str:
    """A value where OCR read ``1`` as ``i`` or ``l`` (``ii`` -> ``11``, ``i9`` -> ``19``, ``$l2.50``)."""
    if re.fullmatch(r"\$?(?=.*\d)[\diIl|oO.,:]+|[iIl|]{2,}", text):
        return text.translate(str.maketrans({"i": "1", "I": "1", "l": "1", "|": "1", "o": "0", "O": "0"}))
    return text


def _center(words: Sequence[Any]) -> tuple[float, float]:
    return (sum((w.box[0] + w.box[2]) / 2 for w in words) / len(words), sum((w.box[1] + w.box[3]) / 2 for w in words) / len(words))


def _chart_rows(labels: Sequence[Any], values: Sequence[Any], taken: Sequence[Row]) -> list[Row]:
    """Bar labels under the axis paired with the value printed above the same bar."""
    used = {r.text for r in taken}
    rows = []
    for word in labels:
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]{0,3}", word.text):
            continue
        lx, ly = _center([word])
        width = max(8.0, (word.box[2] - word.box[0]) * 1.5)
        above = [v for v in values if v.text not in used and abs(_center([v])[0] - lx) <= width and _center([v])[1] < ly]
        if above:
            best = min(above, key=lambda v: abs(_center([v])[0] - lx))
            value = _number(best.text)
            if value is not None:
                rows.append(Row(_code(word.text), best.text, value, (), min(word.confidence, best.confidence), (lx, ly)))
    return rows


_DIGIT_LOOKALIKES = str.maketrans({"T": "7", "l": "1", "I": "1", "i": "1", "O": "0", "o": "0", "S": "5", "s": "5", "B": "8", "Z": "2", "é": "6", "G": "6"})


def _code(text: str) -> str:
    """Short codes like ``C7`` or ``S-3`` that OCR misreads (``CT``, ``S$-3``): a letter, then digit look-alikes."""
    text = text.replace("$", "")
    if len(text) <= 4 and text[:1].isalpha() and not text[1:].isalpha():
        return text[0].upper() + text[1:].translate(_DIGIT_LOOKALIKES)
    if len(text) == 2 and text[:1].isalpha():
        return text[0].upper() + text[1:].translate(_DIGIT_LOOKALIKES)
    return text


def map_distances(words: Sequence[Any]) -> tuple[list[tuple[str, float]], list[tuple[float, float]]]:
    """A route map: the town names with their x positions, and the ``N km`` labels with theirs."""
    towns, distances = [], []
    for line in _group_lines(words):
        for i, word in enumerate(line):
            if i + 1 < len(line) and line[i + 1].text.lower().startswith("km") and re.fullmatch(r"\d+", word.text):
                distances.append((_center([word])[0], float(word.text)))
            elif re.fullmatch(r"[A-Z][a-z]{3,}", word.text) and word.confidence >= 0.5:
                towns.append((word.text, _center([word])[0]))
    return towns, distances


# --- where the text is: regions for the vision tool ------------------------------------------

def text_regions(image: Any, max_regions: int = 3) -> list[tuple[int, int, int, int]]:
    """Boxes ``(x0, y0, x1, y1)`` of text-dense regions: many fine strokes close together.

    Shapes and large lettering give few fine strokes per area; small print gives many.
    """
    import cv2

    gray = np.asarray(image.convert("L"), dtype=np.float32)
    gray = (gray - gray.min()) / max(1.0, float(gray.max() - gray.min())) * 255
    strokes = np.abs(gray - cv2.GaussianBlur(gray, (0, 0), 1.0))
    ink = (strokes > max(6.0, float(np.percentile(strokes, 95)) * 0.5)).astype(np.float32)
    mask = (cv2.boxFilter(ink, -1, (25, 25)) > 0.18).astype(np.uint8)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(cv2.dilate(mask, np.ones((15, 15), np.uint8)))
    found = []
    for i in range(1, count):
        x, y, w, h, _area = (int(v) for v in stats[i])
        if w >= 30 and h >= 30:
            found.append((float(ink[labels == i].sum()), (x, y, x + w, y + h)))
    found.sort(reverse=True)
    if not found:
        return []
    return [box for score, box in found[:max_regions] if score >= 0.3 * found[0][0]]


def skew_angle(image: Any, box: tuple[int, int, int, int]) -> float:
    """Degrees to rotate the region (counter-clockwise) so its text lines run horizontally.

    Projection profile: the angle whose row sums of stroke pixels vary most.
    """
    import cv2

    gray = np.asarray(image.convert("L").crop(box), dtype=np.float32)
    strokes = np.abs(gray - cv2.GaussianBlur(gray, (0, 0), 1.0))
    ink = (strokes > max(4.0, float(np.percentile(strokes, 90)))).astype(np.float32)
    h, w = ink.shape
    center = (w / 2, h / 2)
    side = int(np.hypot(w, h))

    def spread(angle: float) -> float:
        matrix = cv2.getRotationMatrix2D(center, angle, 1.0)
        matrix[:, 2] += ((side - w) / 2, (side - h) / 2)
        rotated = cv2.warpAffine(ink, matrix, (side, side))
        return float(np.var(rotated.sum(axis=1)))

    coarse = max(np.arange(-90, 90, 3.0), key=spread)
    return float(max(np.arange(coarse - 3, coarse + 3.1, 0.5), key=spread))


ENHANCE_CODE = '''import json
from PIL import Image, ImageFilter, ImageOps
# Regions to read, located in the original images: (image, crop box, deskew angle in degrees).
plan = {plan!r}
index, made = {start}, {{}}
for name, box, angle in plan:
    region = Image.open(name).convert("L").crop(box)
    scale = min(3, max(2, 1200 // max(region.size)))
    region = region.resize((region.width * scale, region.height * scale), Image.LANCZOS)
    region = region.filter(ImageFilter.MedianFilter(3))
    region = ImageOps.autocontrast(region, cutoff=1)
    if sum(region.histogram()[:100]) > 0.6 * region.width * region.height:  # under-exposed: lift the shadows
        region = region.point(lambda v: int(255 * (v / 255) ** 0.6))
    region = region.rotate(angle, resample=Image.BICUBIC, expand=True, fillcolor=255)
    side = region.rotate(90, expand=True)
    # The measured angle is known up to quarter turns, and the region may be mirrored.
    for turned in (region, region.rotate(180), side, side.rotate(180),
                   ImageOps.mirror(region), ImageOps.flip(region), ImageOps.mirror(side), ImageOps.flip(side)):
        turned.save(f"transformed_image_{{index}}.png")
        made[f"transformed_image_{{index}}.png"] = [name, list(box)]
        index += 1
print(json.dumps({{"variants": made}}))
'''


# --- the questions ----------------------------------------------------------------------------

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
    qkey = _key(question)
    words = re.findall(r"[a-z0-9][a-z0-9'-]*", low)
    hits: dict[str, tuple[int, Row]] = {}
    for row in sorted(rows, key=lambda r: -r.confidence):
        label = _key(row.label)
        if len(label) < 2 or label in hits:
            continue
        label_words = [w for w in re.findall(r"[a-z0-9][a-z0-9'-]*", row.label.lower())]
        if not label_words or all(w in _TEMPLATE_WORDS or w in _STOP for w in label_words):
            continue
        at = _find(low, qkey, words, row.label)
        if at is not None:
            hits[label] = (at, row)
    return [row for _at, row in sorted(hits.values(), key=lambda item: item[0])]


def _find(low: str, qkey: str, words: Sequence[str], label: str) -> int | None:
    """Where ``label`` occurs in the question: exactly, or as a close match of as many words."""
    exact = re.search(r"(?<![a-z0-9])" + re.escape(label.lower()) + r"(?![a-z0-9])", low)
    if exact:
        return exact.start()
    n = len(label.split())
    target = _key(label)
    if len(target) < 4:
        return None
    for i in range(len(words) - n + 1):
        window = "".join(_key(w) for w in words[i:i + n])
        if difflib.SequenceMatcher(None, window, target).ratio() >= 0.75:
            return low.find(words[i])
    return None


def _fmt(value: float, money: bool = False) -> str:
    if money:
        return f"${value:,.2f}"
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.2f}".rstrip("0").rstrip(".") if abs(value - round(value, 2)) < 1e-9 else f"{value:.2f}"


def _is_money(rows: Sequence[Row]) -> bool:
    return any(r.text.startswith("$") for r in rows)


def _clock(rows: Sequence[Row]) -> bool:
    return any(":" in r.text for r in rows)


class Missing(Exception):
    """The question needs something the agent could not read (yet)."""


# --- the agent --------------------------------------------------------------------------------

class OcrBaselineAgent(BaseAgent):
    """See the module docstring. ``engine``: any ``vtb_env.ocr`` engine (default Tesseract)."""

    name = "ocr-baseline"

    def __init__(self, engine: Any = None, cache_size: int = 256):
        super().__init__()
        self.engine = engine
        self._cache: OrderedDict[str, list[Any]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "engine": type(self.engine).__name__ if self.engine else "tesseract"}

    def act(self, observation: Observation) -> Action:
        start = time.perf_counter()
        self._local.reads = 0
        try:
            action = Episode(self, observation).decide()
        except Exception as exc:  # a baseline must never crash a rollout: fail the turn honestly
            action, error = f"I could not work out an answer ({type(exc).__name__}).", f"{type(exc).__name__}: {exc}"
        else:
            error = None
        self.record(CallRecord(latency_s=time.perf_counter() - start, error=error, meta={"ocr_reads": self._local.reads}))
        return action

    def ocr(self, image: Any) -> list[Any]:
        """OCR words of ``image``, cached by pixel content (turns re-show the same images)."""
        from vtb_env.ocr import read_text

        key = hashlib.blake2b(image.tobytes() + repr((image.size, image.mode)).encode(), digest_size=16).hexdigest()
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        words = read_text(image, self.engine)
        self._local.reads = getattr(self._local, "reads", 0) + 1
        with self._lock:
            self._cache[key] = words
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return words


class Episode:
    """One decision: the dialogue so far, parsed into what the agent knows."""

    def __init__(self, agent: OcrBaselineAgent, observation: Observation):
        self.agent = agent
        self.messages = list(observation.get("messages") or ())
        self.images = dict(zip(observation.get("image_names") or (), observation.get("images") or ()))
        self.offered = {tool.get("function", {}).get("name") for tool in observation.get("tools") or ()}
        prompts = [i for i, m in enumerate(self.messages) if _is_prompt(self.messages, i)]
        self.prompt_at = prompts[-1] if prompts else None
        self.turn_originals = [_image_names(self.messages[i]) for i in prompts]
        after = self.messages[(self.prompt_at if self.prompt_at is not None else 0) + 1:]
        self.calls = [c for m in after if m.get("role") == "assistant" for c in m.get("tool_calls") or ()]
        self.results = {m.get("tool_call_id"): str(m.get("content") or "") for m in after if m.get("role") == "tool"}
        self.variants = _variants(self.messages)
        answers = _final_answers(self.messages)
        prompt = _text_of(self.messages[self.prompt_at]) if self.prompt_at is not None else ""
        previous = answers[-1] if answers else ""
        clarified = previous.rstrip().endswith("?")
        earlier = [_text_of(self.messages[i]) for i in prompts[:-1]]
        text = f"{earlier[-1]} {prompt}" if clarified and earlier else prompt
        self.question = Question(text, prompt, previous, clarified)
        self.needed: list[str] = []  # the images the question needs (set by the rules as they read)

    # -- reading --

    def reading(self, name: str) -> Reading:
        """The best reading of a task image: its transformed variants (when made) merged with the original."""
        original = parse_reading(self.agent.ocr(self.images[name])) if name in self.images else Reading()
        regions: dict[str, list[str]] = {}
        for variant, (source, box) in self.variants.items():
            if source == name and variant in self.images:
                regions.setdefault(json.dumps(box), []).append(variant)
        best_per_region = {region: self.best_variant(variants) for region, variants in regions.items()}
        combined = Reading()
        for read in best_per_region.values():
            combined = combined.merged(read)
        return combined.merged(original) if best_per_region else original

    def best_variant(self, variants: Sequence[str]) -> Reading:
        """The best-read orientation of one region; stops at the first one that reads cleanly."""
        best = Reading()
        for variant in variants:
            read = parse_reading(self.agent.ocr(self.images[variant]))
            if (read.quality, len(read.rows)) > (best.quality, len(best.rows)):
                best = read
            if read.legible:
                break
        return best

    def word_sets(self, name: str) -> list[list[Any]]:
        """OCR words of a task image and of each of its transformed variants (for tickets and maps)."""
        sources = [name] + [v for v, (src, _box) in self.variants.items() if src == name]
        return [list(self.agent.ocr(self.images[s])) for s in sources if s in self.images]

    def current(self) -> list[str]:
        return self.turn_originals[-1] if self.turn_originals else []

    def image_for_turn(self, back: int) -> list[str]:
        """Images of the latest turn that brought images, ``back`` such turns ago (0 = newest)."""
        with_images = [names for names in self.turn_originals if names]
        return with_images[-1 - back] if len(with_images) > back else []

    # -- deciding --

    def decide(self) -> Action:
        q = self.question
        if self.underspecified():
            return self.clarify()
        try:
            return solve(self, q)
        except Missing as missing:
            return self.help_or_give_up(str(missing))

    def underspecified(self) -> bool:
        """First person, no entry named, not a question about all entries, several candidates in sight."""
        q = self.question
        if q.clarified or not _FIRST_PERSON.search(q.prompt):
            return False
        if re.search(r"destination|dividend|ticket|i want \d|cycling|track from|route|which |mean of|total of", q.low):
            return False
        names = self.current() or self.image_for_turn(0)
        rows = [r for n in names for r in self.reading(n).rows] if names else []
        if named_rows(q.text, rows) or re.search(r"\b[A-Z]{3,5}\b", q.prompt):
            return False
        return len(rows) != 1  # several candidates (or none legible): which one is meant is unknown

    def clarify(self) -> str:
        q = self.question.low
        if re.search(r"\bride\b|get on|line\b", q):
            ask = "At which stops do you get on and off?"
        elif re.search(r"how far is it|going", q):
            ask = "Where are you starting from and where are you going?"
        elif re.search(r"\btwo items\b|returned", q):
            ask = "Which items do you mean?"
        elif re.search(r"dinner|order", q):
            ask = "Which dishes are you ordering?"
        else:
            ask = "Which entry do you mean?"
        return f"Several entries could fit, so I need one detail before answering: {ask}"

    def help_or_give_up(self, what: str) -> Action:
        """Call the vision tool once per turn on the images the question needs; else admit failure."""
        vision_calls = sum(_call_name(c) == VISION_TOOL for c in self.calls)
        if VISION_TOOL in self.offered and vision_calls < MAX_VISION_CALLS:
            names = [n for n in (self.needed or self.current()) if n in self.images and not any(
                src == n for src, _ in self.variants.values())]
            plan = []
            for name in names[:1]:  # one image per call: the sandbox returns at most 16 files
                image = self.images[name]
                boxes = text_regions(image, max_regions=2) or [(0, 0, image.width, image.height)]
                if image.width * image.height <= 400_000:  # a small picture: read it whole instead
                    boxes = [(0, 0, image.width, image.height)]
                for box in boxes:
                    box = _padded(box, image.size, 12)
                    plan.append((name, box, round(skew_angle(image, box), 1)))
            if plan:
                start = sum(1 for n in self.images if n.startswith("transformed_image_"))
                return _tool_call(VISION_TOOL, {"code": ENHANCE_CODE.format(plan=plan, start=start)}, len(self.calls))
        return f"I could not read {what} in the image, so I cannot answer reliably."

    def can_repair(self) -> bool:
        """Is the vision tool offered, and is some needed image not repaired yet?"""
        covered = {src for src, _box in self.variants.values()}
        return VISION_TOOL in self.offered and any(n in self.images and n not in covered for n in self.needed)

    def lookup(self, tool: str, arguments: dict[str, Any]) -> str | None:
        """The result of a lookup already made this turn, or None (the caller then makes it)."""
        for call in self.calls:
            if _call_name(call) == tool and _call_args(call) == arguments:
                return self.results.get(call.get("id"), "")
        return None


class CallNeeded(Exception):
    def __init__(self, action: Action):
        super().__init__("tool call")
        self.action = action


def _padded(box: tuple[int, int, int, int], size: tuple[int, int], pad: int) -> tuple[int, int, int, int]:
    return (max(0, box[0] - pad), max(0, box[1] - pad), min(size[0], box[2] + pad), min(size[1], box[3] + pad))


# --- solving the question kinds ---------------------------------------------------------------

def solve(ep: Episode, q: Question) -> Action:
    """Answer ``q``; raise ``Missing`` when something the question needs was not read."""
    try:
        for rule in RULES:
            answer = rule(ep, q)
            if answer is not None:
                return answer
    except CallNeeded as needed:
        return needed.action
    return lookup_rule(ep, q)


def _rows(ep: Episode, names: Sequence[str]) -> list[Row]:
    ep.needed = list(names)
    rows: list[Row] = []
    for name in names:
        rows = Reading(rows).merged(ep.reading(name)).rows
    return rows


def _need(ep: Episode, q: Question, count: int, names: Sequence[str] | None = None, text: str | None = None) -> tuple[list[Row], list[Row]]:
    rows = _rows(ep, names if names is not None else (ep.current() or ep.image_for_turn(0)))
    found = named_rows(text if text is not None else q.text, rows)
    if len(found) < count:
        raise Missing("the entries the question names")
    if any(row.confidence < SURE for row in found[:count]) and ep.can_repair():
        raise Missing("the entries the question names clearly")
    return found, rows


def _say(row: Row) -> str:
    return f"{row.label} is {row.text}"


def weather_rule(ep: Episode, q: Question) -> Action | None:
    if "temperature" not in q.low or "ticket" not in q.low:
        return None
    names = ep.current() or ep.image_for_turn(0)
    ep.needed = list(names)
    text = "\n".join(" ".join(w.text for w in line) for n in names for words in ep.word_sets(n) for line in _group_lines(words))
    city = re.search(r"\bTo:?\s+([A-Z][a-z]+)", text)
    date = re.search(r"\b(\d{4}-\d{2}-\d{2})\b", text)
    if not city or not date:
        raise Missing("the destination and date")
    if "historical_weather" not in ep.offered:
        return f"The ticket is to {city.group(1)} on {date.group(1)}, but I have no weather archive to look up the temperature."
    arguments = {"location": city.group(1), "date": date.group(1)}
    result = ep.lookup("historical_weather", arguments)
    if result is None:
        raise CallNeeded(_tool_call("historical_weather", arguments, len(ep.calls)))
    found = re.search(r'"temperature_max_c":\s*(-?[\d.]+)', result)
    if not found:
        return f"The ticket is to {city.group(1)} on {date.group(1)}; the weather archive had no maximum temperature for that day."
    return (f"The ticket is to {city.group(1)} on {date.group(1)}. The weather archive reports a maximum temperature of "
            f"{float(found.group(1)):.1f} °C there that day.")


def dividend_rule(ep: Episode, q: Question) -> Action | None:
    if "dividend" not in q.low:
        return None
    (row,), _rows_ = _need(ep, q, 1)
    ticker = row.label
    if "web_search" not in ep.offered:
        return f"The statement shows {row.text} shares of {ticker}, but I have no way to look up its dividend."
    search = {"query": f"{ticker} annual dividend per share", "num_results": 5}
    found = ep.lookup("web_search", search)
    if found is None:
        raise CallNeeded(_tool_call("web_search", search, len(ep.calls)))
    try:
        results = json.loads(found).get("results", [])
    except (ValueError, AttributeError):
        results = []
    url = next((r.get("url") for r in results if f"({ticker})" in str(r.get("title", ""))), None)
    if url is None:
        return f"The statement shows {row.text} shares of {ticker}, but I found no dividend figure for it."
    page = ep.lookup("browser_get_page_text", {"url": url}) if "browser_get_page_text" in ep.offered else ""
    if page is None:
        raise CallNeeded(_tool_call("browser_get_page_text", {"url": url}, len(ep.calls)))
    source = page + " " + json.dumps(results)
    per_share = re.search(r"annual dividend of \$([\d.]+) per share", source)
    if not per_share:
        return f"The statement shows {row.text} shares of {ticker}, but I found no annual dividend figure."
    dividend = float(per_share.group(1))
    income = row.value * dividend
    return f"The statement shows {row.text} shares of {ticker}; at ${dividend:.2f} a year per share that is ${income:,.2f} a year."


def order_rule(ep: Episode, q: Question) -> Action | None:
    m = re.search(r"i want (\d+) \w+ of (.+?) and (\d+) \w+ of (.+?) at the prices shown, plus a (\d+(?:\.\d+)?)%", q.low)
    if not m:
        return None
    (a, b), _ = _need(ep, q, 2)
    qa, qb, pct = int(m.group(1)), int(m.group(3)), float(m.group(5))
    total = (qa * a.value + qb * b.value) * (1 + pct / 100)
    return f"{a.label} costs {a.text} and {b.label} costs {b.text}; ({qa} x {a.text} + {qb} x {b.text}) plus {pct:g}% is ${total:,.2f}."


def speed_rule(ep: Episode, q: Question) -> Action | None:
    m = re.search(r"is (\d+(?:\.\d+)?) km long.*average speed", q.low)
    if not m:
        return None
    (a, b), _ = _need(ep, q, 2)
    minutes = abs(b.value - a.value)
    if not minutes:
        raise Missing("two different departure times")
    speed = float(m.group(1)) / (minutes / 60)
    return f"It leaves {a.label} at {a.text} and {b.label} at {b.text}: {_fmt(minutes)} minutes, an average speed of {speed:.1f} km/h."


def share_rule(ep: Episode, q: Question) -> Action | None:
    if "share of the combined total" not in q.low:
        return None
    (a, b), _ = _need(ep, q, 2)
    share = 100 * a.value / (a.value + b.value)
    return f"{a.label} has {a.text} and {b.label} has {b.text}, so {a.label}'s share is {share:.1f}%."


def limit_rule(ep: Episode, q: Question) -> Action | None:
    if "upper limit" not in q.low:
        return None
    (a,), _ = _need(ep, q, 1)
    if len(a.extra) < 2:
        raise Missing("the reference range")
    high = a.extra[-1]
    return f"The {a.label} result is {a.text} and the upper limit is {_fmt(high)}, so it is {100 * a.value / high:.1f}% of the limit."


def route_rule(ep: Episode, q: Question) -> Action | None:
    m = re.search(r"from ([a-z][a-z ]+?) to ([a-z][a-z ]+?)[?.,]", q.low)
    if not (("route" in q.low or "how far" in q.low) and m) or "ride" in q.low:
        return None
    names = ep.current() or ep.image_for_turn(0)
    ep.needed = list(names)
    readings = [map_distances(words) for n in names for words in ep.word_sets(n)]
    towns, distances = max(readings, key=lambda r: (len(r[1]) > 0) * (len(r[0]) + len(r[1])), default=([], []))
    if not distances:
        raise Missing("the distances on the map")
    xs = {t.lower(): x for t, x in towns}
    start, end = _close(m.group(1), xs), _close(m.group(2), xs)
    if start is None or end is None:
        raise Missing("the towns on the map")
    lo, hi = sorted((xs[start], xs[end]))
    chosen = sorted({(x, d) for x, d in distances if lo <= x <= hi})
    if not chosen:
        raise Missing("the segments of the route")
    total = sum(d for _x, d in chosen)
    speed = re.search(r"at (\d+(?:\.\d+)?) km/h", q.low)
    parts = " + ".join(f"{_fmt(d)} km" for _x, d in chosen)
    if speed:
        return f"The route is {parts} = {_fmt(total)} km; at {speed.group(1)} km/h that takes {total / float(speed.group(1)) * 60:.1f} minutes."
    return f"Adding the segments along the route ({parts}) gives {_fmt(total)} km."


def _close(name: str, known: Mapping[str, float]) -> str | None:
    hit = difflib.get_close_matches(name.strip(), list(known), n=1, cutoff=0.75)
    return hit[0] if hit else None


def change_most_rule(ep: Episode, q: Question) -> Action | None:
    if "changed the most" not in q.low:
        return None
    first, last = ep.image_for_turn(len([n for n in ep.turn_originals if n]) - 1), ep.current()
    before, after = _rows(ep, first), _rows(ep, last)
    ep.needed = list(first) + list(last)
    pairs = [(a.value - b.value, a, b) for a in after for b in before if _key(a.label) == _key(b.label)]
    if len(pairs) < min(len(before), len(after)) or len(pairs) < 2:
        raise Missing("every entry in both images")
    growth, a, b = max(pairs, key=lambda p: p[0])
    return f"{a.label} rose the most: from {b.text} to {a.text}, +{_fmt_change(growth)}."


def _fmt_change(value: float) -> str:
    return f"{abs(value):.2f}"


def changed_since_rule(ep: Episode, q: Question) -> Action | None:
    if "changed since" not in q.low:
        return None
    (now,), _ = _need(ep, q, 1)
    before_rows = _rows(ep, ep.image_for_turn(1))
    ep.needed = list(ep.image_for_turn(1)) + list(ep.current())
    before = next((r for r in named_rows(q.text, before_rows)), None)
    if before is None:  # memory: the value the agent stated last turn
        said = re.findall(r"\d{1,2}:\d{2}|[-−]?\d[\d,]*(?:\.\d+)?", q.previous_answer)
        value = _number(said[-1].replace(",", "")) if said else None
        if value is None:
            raise Missing("the earlier value")
        before = Row(now.label, said[-1], value)
    delta = now.value - before.value
    direction = "an increase" if delta > 0 else "a decrease" if delta < 0 else "no change"
    return f"It went from {before.text} to {now.text}, {direction} of {_fmt_change(delta)}."


def highest_rule(ep: Episode, q: Question) -> Action | None:
    if not re.search(r"^which .*(highest|most|tallest|longest|latest)", q.low) or "changed" in q.low:
        return None
    rows = _rows(ep, ep.current() or ep.image_for_turn(0))
    if len(rows) < 3:
        raise Missing("the entries to compare")
    top = max(rows, key=lambda r: r.value)
    return f"{top.label} is the highest, with {top.text}."


def that_rule(ep: Episode, q: Question) -> Action | None:
    m = re.search(r"how much more is that than|how many minutes after (.+) is that", q.low)
    if not m:
        return None
    rows = _rows(ep, ep.current() or ep.image_for_turn(0))
    other = named_rows(q.text, rows)
    that = [r for r in named_rows(q.previous_answer, rows) if r not in other]
    if not other or not that:
        raise Missing("the entries being compared")
    a, b = that[0], other[0]
    diff = a.value - b.value
    unit = " minutes" if _clock([a, b]) else ""
    return f"{a.text} versus {b.text}: a difference of {_fmt(round(diff, 2))}{unit}."


def lab_range_rule(ep: Episode, q: Question) -> Action | None:
    if not re.search(r"reference range|result normal|my .+ result", q.low) or "upper limit" in q.low:
        return None
    rows = _rows(ep, ep.current() or ep.image_for_turn(0))
    found = named_rows(q.prompt, rows) or named_rows(q.previous_answer, rows) or named_rows(q.text, rows)
    if not found:
        raise Missing("the test result")
    row = found[0]
    if len(row.extra) < 2:
        raise Missing("the reference range")
    low, high = row.extra[0], row.extra[-1]
    verdict = "below" if row.value < low else "above" if row.value > high else "within"
    gap = low - row.value if verdict == "below" else row.value - high if verdict == "above" else 0.0
    tail = f" by {_fmt(round(gap, 1))}" if gap else ""
    return f"The {row.label} result is {row.text}; the reference range is {_fmt(low)}-{_fmt(high)}, so it is {verdict} the range{tail}."


def behind_rule(ep: Episode, q: Question) -> Action | None:
    if not re.search(r"behind the (leader|top)", q.low):
        return None
    (a, *_), rows = _need(ep, q, 1, text=q.prompt if q.clarified else None)
    leader = max(rows, key=lambda r: r.value)
    return f"The {a.label} have {a.text}; the leader, {leader.label}, has {leader.text}, so they are {_fmt(leader.value - a.value)} points behind."


def two_values_rule(ep: Episode, q: Question) -> Action | None:
    """Totals, differences, rides, means and "what are A and B"."""
    low = q.low
    kind = ("mean" if "mean of" in low else "ride" if re.search(r"\bride\b|get on at", low) else
            "diff" if "difference" in low else "sum" if re.search(r"total|cost|returned|combined", low) else
            "both" if re.search(r"what are the .+ and .+", low) else None)
    if kind is None:
        return None
    names = ep.current() or ep.image_for_turn(0)
    found, rows = _need(ep, q, 3 if kind == "mean" else 2, names, text=q.prompt if q.clarified else None)
    money = _is_money(found)
    if kind == "mean":
        a, b, c = found[:3]
        mean = (a.value + b.value + c.value) / 3
        return f"The three values are {a.text}, {b.text} and {c.text}; their mean is {mean:.2f}."
    a, b = found[:2]
    if kind == "both":
        return f"The {a.label} result is {a.text} and the {b.label} result is {b.text}."
    if kind == "ride":
        return f"It departs {a.label} at {a.text} and {b.label} at {b.text}, so the ride takes {_fmt(abs(b.value - a.value))} minutes."
    if kind == "diff":
        return f"{_say(a)} and {_say(b)}; the difference is {abs(a.value - b.value):.2f}."
    total = a.value + b.value
    return f"{_say(a)} and {_say(b)}; together that is {_fmt(total, money)}."


def lookup_rule(ep: Episode, q: Question) -> Action:
    """A single entry's value (the default question)."""
    found, _rows_ = _need(ep, q, 1, text=q.prompt if q.clarified else None)
    row = found[0]
    return f"{row.label} is {row.text}."


RULES: tuple[Callable[[Episode, Question], Action | None], ...] = (
    weather_rule, dividend_rule, order_rule, speed_rule, share_rule, limit_rule, route_rule, change_most_rule,
    changed_since_rule, highest_rule, that_rule, lab_range_rule, behind_rule, two_values_rule,
)


# --- the dialogue -----------------------------------------------------------------------------

def _tool_call(name: str, arguments: Mapping[str, Any], n: int) -> dict[str, Any]:
    call = {"id": f"ocr_{n + 1}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return {"role": "assistant", "content": "", "tool_calls": [call]}


def _call_name(call: Mapping[str, Any]) -> str:
    return str((call.get("function") or {}).get("name", ""))


def _call_args(call: Mapping[str, Any]) -> Any:
    raw = (call.get("function") or {}).get("arguments", "{}")
    try:
        return json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None


def _variants(messages: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, list[int]]]:
    """Transformed image -> (original, region), from the JSON the agent's own code printed.

    The env may show a file under another name (``[transformed_image_9.png is shown as
    transformed_image_2.png]``); those notes follow the tool's JSON and are applied here.
    """
    out: dict[str, tuple[str, list[int]]] = {}
    for message in messages:
        if message.get("role") != "tool":
            continue
        content = str(message.get("content") or "")
        try:
            body, _end = json.JSONDecoder().raw_decode(content)
            stdout = str(body.get("stdout", "")).strip()
            made = json.loads(stdout.splitlines()[-1]).get("variants", {}) if stdout else {}
        except (ValueError, AttributeError, IndexError):
            continue
        shown = dict(re.findall(r"\[(\S+) is shown as (\S+)\]", content))
        out.update({shown.get(name, name): (src, box) for name, (src, box) in made.items()})
    return out


def _final_answers(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The agent's own final answers so far: assistant messages without tool calls."""
    return [_text_of(m) for m in messages if m.get("role") == "assistant" and not m.get("tool_calls") and _text_of(m)]


def _parts(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [p for p in content or () if isinstance(p, Mapping)]


def _image_names(message: Mapping[str, Any]) -> list[str]:
    """Names of the images in a message, from the ``[image_1.png]`` labels the env puts before each."""
    names = []
    for part in _parts(message):
        if part.get("type") == "text":
            match = _LABEL.match(str(part.get("text", "")).strip())
            if match:
                names.append(match.group(1))
        elif part.get("type") == "image" and part.get("name"):
            if not names or names[-1] != part["name"]:
                names.append(str(part["name"]))
    return names


def _text_of(message: Mapping[str, Any]) -> str:
    texts = [str(p.get("text", "")) for p in _parts(message) if p.get("type") == "text"]
    return " ".join(t for t in texts if not _LABEL.match(t.strip())).strip()


def _is_prompt(messages: Sequence[Mapping[str, Any]], index: int) -> bool:
    """A user message that is a turn's prompt (not the env's re-showing of tool images)."""
    message = messages[index]
    if message.get("role") != "user":
        return False
    previous = messages[index - 1] if index else {}
    return previous.get("role") != "tool"
