"""The task model: Task -> Turn -> Rubric, plus lazily loaded images.

Everything here is immutable (frozen dataclasses, tuples) so tasks can be shared between
environments, threads and processes without copies, and serialises to plain JSON with
``to_dict`` / ``from_dict``.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

from PIL import Image

CriticalRule = Literal["weight>=4", "flag", "either"]
CRITICAL_RULES: tuple[str, ...] = ("weight>=4", "flag", "either")
ModeLabel = Literal["tool_required", "tool_redundant"]

DOMAINS: tuple[str, ...] = ("STEM", "Medical", "Finance", "Sports", "Generalist")
# The official toolkit merges the STEM sub-domains into one "STEM" bucket.
_STEM_SUBDOMAINS = {"stem", "chemistry", "maths", "math", "mathematics", "biology", "engineering", "physics"}

TASK_CATEGORIES: tuple[str, ...] = (
    "region_switch_qa",
    "hybrid_tool_reasoning",
    "follow_up_test",
    "temporal_visual_reasoning",
    "progressive_visual_reasoning",
)

# Decoding bombs: images come from datasets and from model-written code.
MAX_IMAGE_PIXELS = 64_000_000


class ImageDecodeError(ValueError):
    """An image's bytes could not be decoded (corrupt, truncated, too large)."""


def normalize_domain(prompt_category: str) -> str:
    """Map a raw ``prompt_category`` to one of DOMAINS (STEM sub-domains merged)."""
    key = (prompt_category or "").strip().lower()
    if key in _STEM_SUBDOMAINS:
        return "STEM"
    for domain in DOMAINS:
        if key == domain.lower():
            return domain
    return "Generalist" if key in ("", "general", "generalist") else prompt_category.strip().title()


def yes_no(value: Any) -> bool:
    """Parse the dataset's "yes"/"no" strings (and bools) into a bool."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("yes", "true", "y", "1")


def image_size(data: bytes) -> tuple[int, int]:
    """(width, height) from the header alone, without decoding pixels; raises ImageDecodeError."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.size
    except Exception as exc:  # PIL raises many types for bad data
        raise ImageDecodeError(f"cannot read the image header: {exc}") from exc


def decode_image(data: bytes, *, max_pixels: int = MAX_IMAGE_PIXELS) -> Image.Image:
    """Decode image bytes fully, refusing bombs; raises ImageDecodeError with the reason."""
    try:
        image = Image.open(io.BytesIO(data))  # in memory: nothing to close, and no copy of the pixels
        width, height = image.size
        if width * height > max_pixels:
            raise ImageDecodeError(f"image of {width}x{height} exceeds {max_pixels} pixels")
        image.load()
        return image
    except ImageDecodeError:
        raise
    except Exception as exc:  # PIL raises many types for bad data
        raise ImageDecodeError(f"cannot decode image: {exc}") from exc


@dataclass(frozen=True)
class ImageRef:
    """An image that is read only when needed.

    Exactly one of ``data`` (bytes in memory), ``path`` (a file) or ``loader`` (a callable
    returning bytes, e.g. a parquet row read on demand) provides the bytes. ``name`` is the
    file name the model sees (``image_1.png``...).
    """

    name: str
    path: str | None = None
    data: bytes | None = field(default=None, repr=False, compare=False)
    loader: Callable[[], bytes] | None = field(default=None, repr=False, compare=False)

    def read_bytes(self) -> bytes:
        if self.data is not None:
            return self.data
        if self.path is not None:
            return Path(self.path).read_bytes()
        if self.loader is not None:
            return self.loader()
        raise ImageDecodeError(f"image {self.name!r} has no source")

    def open(self) -> Image.Image:
        """The decoded image (a fresh copy each call; callers may mutate it)."""
        try:
            return decode_image(self.read_bytes())
        except ImageDecodeError as exc:
            raise ImageDecodeError(f"{self.name}: {exc}") from exc

    def sha256(self) -> str:
        return hashlib.sha256(self.read_bytes()).hexdigest()


@dataclass(frozen=True)
class Rubric:
    """One rubric item in the official format (see docs: rubric JSON).

    ``check`` is an optional exact programmatic check (synthetic tasks); its spec and
    evaluation live in ``vtb_rewards.checks``.
    """

    id: str
    description: str
    weight: int
    objective: bool = True
    explicit: bool = True
    categories: tuple[str, ...] = ()
    critical: bool = False
    final_answer: bool = True
    check: Mapping[str, Any] | None = None

    def is_critical(self, rule: CriticalRule = "weight>=4") -> bool:
        """Is this rubric critical? ``weight>=4`` (official toolkit), ``flag`` (dataset), ``either``."""
        if rule == "weight>=4":
            return self.weight >= 4
        if rule == "flag":
            return self.critical
        if rule == "either":
            return self.critical or self.weight >= 4
        raise ValueError(f"unknown critical rule {rule!r}; choose one of {CRITICAL_RULES}")

    def to_official(self) -> dict[str, Any]:
        """The dataset's JSON entry (value side of the ``{uuid: {...}}`` mapping)."""
        entry: dict[str, Any] = {
            "description": self.description,
            "weight": self.weight,
            "objective/subjective": "objective" if self.objective else "subjective",
            "explicit/implicit": "explicit" if self.explicit else "implicit",
            "category": list(self.categories),
            "critical": "yes" if self.critical else "no",
            "final_answer": "yes" if self.final_answer else "no",
        }
        if self.check is not None:
            entry["check"] = dict(self.check)
        return entry

    @classmethod
    def from_official(cls, rubric_id: str, entry: Mapping[str, Any]) -> "Rubric":
        """Parse one official entry; raises ValueError naming the bad field."""
        if not isinstance(entry, Mapping):
            raise ValueError(f"rubric {rubric_id}: expected an object, got {type(entry).__name__}")
        if "description" not in entry or "weight" not in entry:
            raise ValueError(f"rubric {rubric_id}: missing 'description' or 'weight'")
        try:
            weight = int(entry["weight"])
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"rubric {rubric_id}: weight {entry['weight']!r} is not an integer") from None
        if not 1 <= weight <= 5:
            raise ValueError(f"rubric {rubric_id}: weight {weight} outside 1..5")
        categories = entry.get("category", ())
        if isinstance(categories, str):
            categories = (categories,)
        return cls(
            id=str(rubric_id),
            description=str(entry["description"]),
            weight=weight,
            objective=str(entry.get("objective/subjective", "objective")).strip().lower() != "subjective",
            explicit=str(entry.get("explicit/implicit", "explicit")).strip().lower() != "implicit",
            categories=tuple(str(c) for c in categories),
            critical=yes_no(entry.get("critical", "no")),
            final_answer=yes_no(entry.get("final_answer", "yes")),
            check=entry.get("check"),
        )


def parse_rubrics_json(text: str | Mapping[str, Any]) -> tuple[Rubric, ...]:
    """Parse one turn's ``rubrics_by_turn`` JSON string (``{id: entry}``, or a list of entries with ``id``)."""
    try:
        data = json.loads(text) if isinstance(text, (str, bytes)) else text
    except RecursionError:
        raise ValueError("rubric JSON is nested too deeply") from None
    if isinstance(data, Mapping):
        return tuple(Rubric.from_official(key, value) for key, value in data.items())
    if isinstance(data, list):
        return tuple(
            Rubric.from_official(str(item.get("id", i)) if isinstance(item, Mapping) else str(i), item)
            for i, item in enumerate(data)
        )
    raise ValueError(f"rubrics must be a JSON object or list, got {type(data).__name__}")


def parse_trajectory_lenient(raw: str) -> Any:
    """Best-effort parse of a reference tool trajectory; the raw string is always kept too."""
    if not raw or not raw.strip():
        return None
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, TypeError):
        pass
    try:
        import json_repair

        return json_repair.loads(raw)
    except Exception:
        return None


@dataclass(frozen=True)
class Turn:
    """One turn: the user's prompt and images, and what graders need (never shown to the policy)."""

    prompt: str
    images: tuple[ImageRef, ...] = ()
    golden_answer: str = ""
    tool_trajectory_raw: str = ""
    rubrics: tuple[Rubric, ...] = ()
    key_steps: tuple[str, ...] = ()
    # the closed world of values a correct answer may state (synthetic tasks; see vtb_env.synth.world)
    world: Mapping[str, Any] | None = None

    @property
    def tool_trajectory(self) -> Any:
        """The reference trajectory parsed leniently (None when unparseable)."""
        return parse_trajectory_lenient(self.tool_trajectory_raw)


@dataclass(frozen=True)
class Task:
    """One VisualToolBench task = one episode."""

    id: str
    turns: tuple[Turn, ...]
    prompt_category: str = "generalist"
    eval_focus: str = ""
    mode_label: ModeLabel | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def turncase(self) -> str:
        return "multi-turn" if len(self.turns) > 1 else "single-turn"

    @property
    def domain(self) -> str:
        return normalize_domain(self.prompt_category)

    @property
    def images(self) -> tuple[ImageRef, ...]:
        return tuple(image for turn in self.turns for image in turn.images)

    def with_metadata(self, **items: Any) -> "Task":
        return replace(self, metadata={**self.metadata, **items})

    def to_dict(self, image_names: Callable[[ImageRef], str] | None = None) -> dict[str, Any]:
        """Plain JSON form (the project's JSONL line). Images become file names."""
        name_of = image_names or (lambda ref: ref.name)
        return {
            "id": self.id,
            "turncase": self.turncase,
            "prompt_category": self.prompt_category,
            "eval_focus": self.eval_focus,
            "mode_label": self.mode_label,
            "metadata": dict(self.metadata),
            "turns": [
                {
                    "prompt": turn.prompt,
                    "images": [name_of(image) for image in turn.images],
                    "golden_answer": turn.golden_answer,
                    "tool_trajectory": turn.tool_trajectory_raw,
                    "rubrics": {r.id: r.to_official() for r in turn.rubrics},
                    "key_steps": list(turn.key_steps),
                    **({"world": dict(turn.world)} if turn.world is not None else {}),
                }
                for turn in self.turns
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], image_dir: str | Path | None = None) -> "Task":
        """Inverse of ``to_dict``; image names resolve against ``image_dir``."""
        base = Path(image_dir) if image_dir is not None else None
        if not isinstance(data.get("turns"), list) or not all(isinstance(turn, Mapping) for turn in data["turns"]):
            raise ValueError(
                f"task {data.get('id')}: 'turns' must be a list of objects, got {type(data.get('turns')).__name__}"
            )
        turns = []
        for turn in data["turns"]:
            images = tuple(
                ImageRef(name=Path(name).name, path=str(base / name) if base else name)
                for name in turn.get("images", ())
            )
            turns.append(
                Turn(
                    prompt=turn["prompt"],
                    images=images,
                    golden_answer=turn.get("golden_answer", ""),
                    tool_trajectory_raw=turn.get("tool_trajectory", "") or "",
                    rubrics=parse_rubrics_json(turn.get("rubrics", {})),
                    key_steps=tuple(turn.get("key_steps", ())),
                    world=turn.get("world"),
                )
            )
        if not turns:
            raise ValueError(f"task {data.get('id')}: no turns")
        return cls(
            id=str(data["id"]),
            turns=tuple(turns),
            prompt_category=data.get("prompt_category", "generalist"),
            eval_focus=data.get("eval_focus", ""),
            mode_label=data.get("mode_label"),
            metadata=dict(data.get("metadata", {})),
        )
