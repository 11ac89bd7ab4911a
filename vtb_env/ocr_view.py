"""What a frozen reader sees: an observation's images as OCR text, for text policies.

A text policy cannot look at pixels; ``OcrView`` shows it each image as the words a fixed OCR
engine (Tesseract by default, ``vtb_env.ocr``) reads in it. Applied to an observation it returns a
copy whose image parts are text parts::

    {"type": "text", "text": "Clinical chemistry report Test Result Calcium 8.4 ...", "ocr": "image_1.png"}

(``ocr`` names the image the words were read from, so a chat template can set them apart from the
question). Everything else is kept; ``images`` and ``image_names`` still list what the env showed.
``OcrView(question=False)`` shows the pages alone: user messages keep only their images' words, the
control that tells what a reader learns without the question.

OCR is the expensive part of a text policy's step (a Tesseract call is ~0.3 s), and the same
pictures come back in every episode of a task, so every reading goes through an ``OcrCache``: the
words per image, keyed by a hash of the decoded pixels (``pixel_key``; independent of the PNG
encoder, so a cache made on one machine serves another whose sandbox writes the same pixels).
``OcrCache.load`` / ``save`` keep it in a JSON file that also records the engine; a cache loaded
with ``engine=None`` is read-only and a miss raises ``OcrUnavailable`` (for a machine without
Tesseract, given a cache made elsewhere).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

from PIL import Image

from vtb_env.observation import map_image_parts
from vtb_env.ocr import OcrEngine, OcrUnavailable, default_engine

VIEWS = ("ocr", "ocr-pages")  # the question and the pages' words; the pages' words alone
CACHE_FORMAT = 1


def pixel_key(image: Image.Image) -> str:
    """sha256 of the image's RGB pixels and size: the same picture gives the same key whatever its file encoding."""
    rgb = image.convert("RGB")
    digest = hashlib.sha256(f"{rgb.width}x{rgb.height}:".encode())
    digest.update(rgb.tobytes())
    return digest.hexdigest()


def engine_signature(engine: OcrEngine) -> str:
    """What identifies an engine's readings in a cache file: its class and configuration (and Tesseract's version)."""
    version = ""
    tess = getattr(engine, "_tess", None)
    if tess is not None:
        version = str(tess.get_tesseract_version())
    settings = {k: v for k, v in sorted(vars(engine).items()) if isinstance(v, (str, int, float))}
    return f"{type(engine).__name__} {version} {json.dumps(settings, sort_keys=True)}".strip()


class OcrCache:
    """Words read per image (``pixel_key`` -> words), filled on first reading; thread-safe.

    ``engine=None``: read-only, a miss raises ``OcrUnavailable``; otherwise misses are read with ``engine``
    (resolved on first miss when it is ``"default"``: ``vtb_env.ocr.default_engine``).
    """

    def __init__(self, engine: OcrEngine | str | None = "default", min_confidence: float = 0.0):
        self._engine = engine
        self.min_confidence = min_confidence
        self.words: dict[str, tuple[str, ...]] = {}
        self.signature: str | None = None
        self.misses = 0
        self._keys: dict[int, tuple[weakref.ref, str]] = {}
        self._lock = threading.Lock()

    @property
    def engine(self) -> OcrEngine | None:
        if self._engine == "default":
            self._engine = default_engine()
        return self._engine  # type: ignore[return-value]

    def key(self, image: Image.Image) -> str:
        """``pixel_key(image)``, hashed once per image object (an episode shows the same objects at every step)."""
        known = self._keys.get(id(image))
        if known is not None and known[0]() is image:
            return known[1]
        key = pixel_key(image)
        with self._lock:
            if len(self._keys) > 4096:  # forget images that are gone
                self._keys = {i: v for i, v in self._keys.items() if v[0]() is not None}
            self._keys[id(image)] = (weakref.ref(image), key)
        return key

    def read(self, image: Image.Image, key: str | None = None) -> tuple[str, ...]:
        """The words ``image`` shows to the engine (from the cache when it was read before)."""
        key = key or self.key(image)
        with self._lock:
            cached = self.words.get(key)
        if cached is not None:
            return cached
        engine = self.engine
        if engine is None:
            raise OcrUnavailable(
                f"image {key[:12]} is not in the read-only OCR cache (make the cache where the OCR engine runs)"
            )
        words = tuple(w.text for w in engine.read(image.convert("RGB")) if w.confidence >= self.min_confidence)
        with self._lock:
            self.words[key] = words
            self.misses += 1
            self.signature = self.signature or engine_signature(engine)
        return words

    def fill(self, images: Iterable[Image.Image], workers: int = 2) -> int:
        """Read every image not cached yet, ``workers`` engine calls at a time; returns how many were read."""
        pending: dict[str, Image.Image] = {}
        for image in images:
            key = pixel_key(image)
            if key not in self.words:
                pending.setdefault(key, image)
        if pending:
            with ThreadPoolExecutor(max(1, workers)) as pool:
                list(pool.map(lambda item: self.read(item[1], item[0]), pending.items()))
        return len(pending)

    def save(self, path: str | Path) -> Path:
        """Write the cache as JSON (engine signature and words per image)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            data = {
                "format": CACHE_FORMAT,
                "engine": self.signature,
                "words": {k: list(v) for k, v in self.words.items()},
            }
        # a temporary file of this writer's own, then an atomic rename: runs sharing one cache file (several
        # seeds side by side) each leave a whole file, never one another's half-written one
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as tmp:
            tmp.write(json.dumps(data, sort_keys=True))
        Path(tmp.name).replace(path)
        return path

    def load(self, path: str | Path) -> int:
        """Add the readings of a saved cache (refused if another engine made them); returns how many.

        Raises ``ValueError`` naming ``path`` for anything that is not a whole cache file of this format.
        """
        signature, words = read_cache_file(path)
        engine = self._engine if not isinstance(self._engine, str) else None
        ours = self.signature or (engine_signature(engine) if engine is not None else None)
        if signature and ours and signature != ours:
            raise ValueError(f"{path}: read by {signature!r}, not by this cache's engine {ours!r}")
        with self._lock:
            self.signature = self.signature or signature
            self.words.update(words)
        return len(words)


def read_cache_file(path: str | Path) -> tuple[str | None, dict[str, tuple[str, ...]]]:
    """A saved cache's engine signature and words per image, its whole shape checked before any is used.

    The shape is a closed one: ``{"format": 1, "engine": str | null, "words": {str: [str, ...]}}``; anything
    else (bad JSON or encoding, a list, a number where words are) is a ``ValueError`` naming the file, the one
    error its callers catch, never a ``TypeError`` from deep inside.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ValueError(f"{path}: not an OCR cache: {type(exc).__name__}: {exc}") from None
    problem = _cache_shape_problem(data)
    if problem:
        raise ValueError(f"{path}: not an OCR cache of format {CACHE_FORMAT}: {problem}")
    return data.get("engine"), {key: tuple(words) for key, words in data["words"].items()}


def _cache_shape_problem(data: Any) -> str | None:
    """What keeps ``data`` from being a cache file's content, or None."""
    if not isinstance(data, dict):
        return f"the file holds a {type(data).__name__}, not an object"
    if data.get("format") != CACHE_FORMAT:
        return f"format is {data.get('format')!r}"
    if not isinstance(data.get("engine"), (str, type(None))):
        return "engine is not a string"
    words = data.get("words")
    if not isinstance(words, dict):
        return "words is not an object"
    for key, listed in words.items():
        if not isinstance(listed, list) or not all(isinstance(word, str) for word in listed):
            return f"the words of {key[:16]!r} are not a list of strings"
    return None


@lru_cache(maxsize=1)
def default_cache() -> OcrCache:
    """The process-wide cache that views share unless given one (the default engine reads its misses)."""
    return OcrCache()


class OcrView:
    """``view(observation) -> observation`` with every image part replaced by the words read in it (module doc)."""

    def __init__(self, cache: OcrCache | None = None, *, question: bool = True):
        self.cache = cache if cache is not None else default_cache()
        self.question = question

    @property
    def name(self) -> str:
        return VIEWS[0] if self.question else VIEWS[1]

    def __call__(self, observation: Mapping[str, Any]) -> dict[str, Any]:
        images, names = observation["images"], observation["image_names"]
        messages = map_image_parts(observation["messages"], lambda part, i: self._page(part, images[i], names[i]))
        if not self.question:  # user messages keep their pages' words alone
            messages = [_pages_only(m) if m.get("role") == "user" else m for m in messages]
        return {**observation, "messages": messages}

    def _page(self, part: Mapping[str, Any], image: Image.Image, name: str) -> dict[str, Any]:
        return {"type": "text", "text": " ".join(self.cache.read(image)), "ocr": part.get("name") or name}


def _pages_only(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    pages = [part for part in content if "ocr" in part] if isinstance(content, list) else []
    return {**message, "content": pages}


def make_view(name: str | None, cache: OcrCache | None = None) -> OcrView | None:
    """The view called ``name`` (one of ``VIEWS``), or None for None."""
    if name is None:
        return None
    if name not in VIEWS:
        raise ValueError(f"unknown image view {name!r}; choose one of {VIEWS}")
    return OcrView(cache, question=name == VIEWS[0])
