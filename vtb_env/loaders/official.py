"""Official VisualToolBench rows -> Task, for the three layouts the Hub has published.

| field        | current                        | legacy-1191            | legacy-1204             |
|--------------|--------------------------------|------------------------|-------------------------|
| prompts      | turn_prompts (list)            | prompt (list, or str)  | prompt ("[Turn N]" str) |
| answers      | turn_golden_answers            | golden_answer (opt.)   | golden_answer           |
| trajectories | turn_tool_trajectories         | tool_trajectory (opt.) | tool_trajectory         |
| rubrics      | rubrics_by_turn                | rubrics                | rubrics                 |
| images       | images_by_turn (+ flat images) | images_by_turn         | images / image (flat)   |

A row is a plain mapping (a parquet row, a toolkit ``dataset.json`` entry, a ``datasets`` row).
An image value is an HF Image struct ``{"bytes", "path"}``, raw bytes, a path, or a PIL image.
"""

from __future__ import annotations

import io
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from vtb_env.image_names import task_image_name
from vtb_env.loaders.common import BadRow, DatasetError, dataset_file
from vtb_env.tasks import ImageRef, Task, Turn, parse_rubrics_json


@dataclass(frozen=True)
class Layout:
    """Which column holds what in one published layout."""

    name: str
    prompts: str
    golden_answers: str
    trajectories: str
    rubrics: str
    images_by_turn: str | None  # None: only flat image columns (all images arrive with turn 1)
    flat_images: tuple[str, ...]

    @property
    def image_columns(self) -> tuple[str, ...]:
        return (self.images_by_turn,) * (self.images_by_turn is not None) + self.flat_images

    def consumed(self) -> frozenset[str]:
        return frozenset(
            {"id", "prompt_category", "eval_focus", self.prompts, self.golden_answers, self.trajectories, self.rubrics}
            | set(self.image_columns)
        )


CURRENT = Layout(
    "current",
    "turn_prompts",
    "turn_golden_answers",
    "turn_tool_trajectories",
    "rubrics_by_turn",
    "images_by_turn",
    ("images",),
)
LEGACY_1191 = Layout(
    "legacy-1191", "prompt", "golden_answer", "tool_trajectory", "rubrics", "images_by_turn", ("images",)
)
LEGACY_1204 = Layout("legacy-1204", "prompt", "golden_answer", "tool_trajectory", "rubrics", None, ("images", "image"))

# Columns a filter can judge a row by before anything heavy is decoded.
FILTER_COLUMNS = ("id", "turncase", "prompt_category", "eval_focus")


def detect_layout(columns: Sequence[str]) -> Layout:
    """The layout whose columns ``columns`` has; DatasetError listing them otherwise."""
    names = set(columns)
    if {"turn_prompts", "rubrics_by_turn"} <= names:
        return CURRENT
    if {"prompt", "rubrics"} <= names:
        return LEGACY_1191 if "images_by_turn" in names else LEGACY_1204
    raise DatasetError(
        f"unrecognised VisualToolBench layout; columns: {sorted(names)}. Expected turn_prompts + rubrics_by_turn "
        "(current) or prompt + rubrics (older layouts)"
    )


def read_columns(layout: Layout, available: Sequence[str]) -> list[str]:
    """Column projection: everything except redundant image columns (the flat list duplicates images_by_turn)."""
    redundant = set(layout.image_columns) - {image_column(layout, available)}
    return [name for name in available if name not in redundant]


def image_column(layout: Layout, available: Sequence[str]) -> str | None:
    """The one image column the loader reads (per-turn when the layout has it)."""
    for name in layout.image_columns:
        if name in available:
            return name
    return None


_TURN_MARKER = re.compile(r"\[Turn\s*\d+\]\s*", re.IGNORECASE)


def split_turn_markers(text: str) -> list[str]:
    """'[Turn 1] a [Turn 2] b' -> ['a', 'b']; text without a leading marker is one turn."""
    if not _TURN_MARKER.match(text.lstrip()):
        return [text]
    return [part.strip() for part in _TURN_MARKER.split(text.lstrip())[1:]]


def _require(row: Mapping[str, Any], key: str) -> Any:
    if key not in row or row[key] is None:
        raise BadRow(f"missing field {key!r}")
    return row[key]


def _split_string(value: str, n_turns: int) -> list[Any]:
    """A string holding every turn: '[Turn N]' prefixes, else a JSON list, else one turn's value."""
    parts = split_turn_markers(value)
    if len(parts) == n_turns:
        return parts
    if n_turns == 1:
        return [value]
    try:
        decoded = json.loads(value)
    except json.JSONDecodeError:
        return parts
    return decoded if isinstance(decoded, list) else parts


def _per_turn(row: Mapping[str, Any], key: str, n_turns: int, *, prompts_key: str, default: Any = None) -> list[Any]:
    """One value per turn; an absent/null field is a bad row unless a ``default`` is given."""
    if row.get(key) is None:
        if default is None:
            raise BadRow(f"missing field {key!r}")
        return [default] * n_turns
    value = row[key]
    if isinstance(value, str):
        value = _split_string(value, n_turns)
    if not isinstance(value, (list, tuple)):
        raise BadRow(f"field {key!r} is a {type(value).__name__}, expected one entry per turn")
    if len(value) != n_turns:
        raise BadRow(f"turn lists of different lengths: {prompts_key} has {n_turns}, {key} has {len(value)}")
    return list(value)


def _image_ref(value: Any, name: str, base_dir: Path | None) -> ImageRef:
    """An ImageRef from any of the image encodings a row may carry."""
    if isinstance(value, Mapping):  # the HF Image struct
        if value.get("bytes"):
            return ImageRef(name=name, data=bytes(value["bytes"]))
        value = value.get("path")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return ImageRef(name=name, data=bytes(value))
    if isinstance(value, (str, os.PathLike)) and str(value):
        if base_dir is None:  # a datasets.Dataset built by the caller's code: its paths are the caller's
            if not Path(value).is_file():
                raise BadRow(f"{name}: image file not found: {value}")
            return ImageRef(name=name, path=str(value))
        try:
            return ImageRef(name=name, path=str(dataset_file(value, base_dir)))
        except BadRow as exc:
            raise BadRow(f"{name}: {exc}", exc.kind) from None
    if hasattr(value, "save"):  # a PIL image (a decoded ``datasets`` row)
        buffer = io.BytesIO()
        value.save(buffer, format="PNG")
        return ImageRef(name=name, data=buffer.getvalue())
    raise BadRow(f"{name}: no image data ({type(value).__name__})")


def _turn_images(row: Mapping[str, Any], layout: Layout, n_turns: int, base_dir: Path | None) -> list[list[Any]]:
    by_turn = layout.images_by_turn
    if by_turn is not None and by_turn in row:
        per_turn = _per_turn(row, by_turn, n_turns, prompts_key=layout.prompts)
        return [list(images or ()) for images in per_turn]
    for flat in layout.flat_images:  # no per-turn split known: every image arrives with turn 1
        if row.get(flat) is not None:
            images = row[flat] if isinstance(row[flat], (list, tuple)) else [row[flat]]
            return [list(images)] + [[] for _ in range(n_turns - 1)]
    raise BadRow(f"missing field {layout.images_by_turn or layout.flat_images[0]!r}")


def _check_counts(row: Mapping[str, Any], n_turns: int, n_images: int) -> None:
    """The row's own count columns must agree with its lists (a truncated row would not)."""
    if row.get("num_turns") is not None and int(row["num_turns"]) != n_turns:
        raise BadRow(f"num_turns={row['num_turns']} but the row has {n_turns} turns")
    if row.get("num_images") is not None and int(row["num_images"]) != n_images:
        raise BadRow(f"num_images={row['num_images']} but the turns bring {n_images} images")
    turncase = row.get("turncase")
    if turncase in ("single-turn", "multi-turn") and (turncase == "multi-turn") != (n_turns > 1):
        raise BadRow(f"turncase {turncase!r} but the row has {n_turns} turns")


def _metadata(row: Mapping[str, Any], layout: Layout) -> dict[str, Any]:
    """Columns the model does not consume, kept verbatim when JSON-serialisable (num_turns, ...)."""
    extra: dict[str, Any] = {"source_schema": layout.name}
    consumed = layout.consumed()
    for key, value in row.items():
        if key in consumed:
            continue
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue
        extra[key] = value
    return extra


def _raw_trajectory(value: Any) -> str:
    """The reference trajectory verbatim (JSON text; a decoded value is re-serialised)."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def row_to_task(row: Mapping[str, Any], layout: Layout, *, base_dir: Path | None = None) -> Task:
    """Build a Task from one official row; BadRow names the first problem found."""
    task_id = _require(row, "id")
    prompts_value = _require(row, layout.prompts)
    prompts = split_turn_markers(prompts_value) if isinstance(prompts_value, str) else list(prompts_value)
    if not prompts:
        raise BadRow(f"{layout.prompts} is empty")
    if any(p is None for p in prompts):
        raise BadRow(f"missing field {layout.prompts!r} (a turn has no prompt)")
    n_turns = len(prompts)
    # The 1,191-row layout may lack answers altogether; elsewhere a missing answer is a bad row.
    optional_answers = "" if layout is LEGACY_1191 and layout.golden_answers not in row else None
    answers = _per_turn(row, layout.golden_answers, n_turns, prompts_key=layout.prompts, default=optional_answers)
    trajectories = _per_turn(row, layout.trajectories, n_turns, prompts_key=layout.prompts, default="")
    rubric_values = _per_turn(row, layout.rubrics, n_turns, prompts_key=layout.prompts)
    turn_images = _turn_images(row, layout, n_turns, base_dir)
    _check_counts(row, n_turns, sum(len(images) for images in turn_images))

    turns, k = [], 0
    for t in range(n_turns):
        try:
            rubrics = parse_rubrics_json(rubric_values[t] if rubric_values[t] is not None else "{}")
        except (ValueError, TypeError) as exc:
            raise BadRow(f"turn {t + 1}: invalid rubric JSON: {exc}") from None
        refs = []
        for value in turn_images[t]:
            k += 1
            refs.append(_image_ref(value, task_image_name(k), base_dir))
        if answers[t] is None:
            raise BadRow(f"missing field {layout.golden_answers!r} for turn {t + 1}")
        turns.append(
            Turn(
                prompt=str(prompts[t]),
                images=tuple(refs),
                golden_answer=str(answers[t]),
                tool_trajectory_raw=_raw_trajectory(trajectories[t]),
                rubrics=rubrics,
            )
        )
    if not any(turn.rubrics for turn in turns):
        raise BadRow("the task has no rubrics")
    return Task(
        id=str(task_id),
        turns=tuple(turns),
        prompt_category=str(row.get("prompt_category") or "generalist"),
        eval_focus=str(row.get("eval_focus") or ""),
        metadata=_metadata(row, layout),
    )
