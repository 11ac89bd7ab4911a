"""What every source shares: the load report, errors, filters and the candidate pipeline.

A source (parquet, toolkit directory, project JSONL, ``datasets.Dataset``) yields
``Candidate``s: a label, the cheap fields a filter needs, and a ``build`` callable that makes
the Task. ``run_pipeline`` filters, builds, validates images and applies the bad-row policy
once for all sources.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePath
from typing import Any, Callable, Iterable, Iterator, Mapping

from vtb_env.image_checks import check_dataset_image
from vtb_env.loaders.schema import SCHEMA, SchemaError, check_task
from vtb_env.tasks import ImageDecodeError, Task, normalize_domain

logger = logging.getLogger("vtb_env.loaders")


class DatasetError(Exception):
    """A source cannot be read, or (strict mode) a row is bad. ``task_id``/``reason`` name the row."""

    def __init__(self, message: str, *, task_id: str | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.task_id = task_id
        self.reason = reason


class DatasetNotFoundError(DatasetError, FileNotFoundError):
    """The source names no file or directory (a DatasetError, and a FileNotFoundError for callers that
    sort errors by kind, like the ``vtb`` command's exit codes)."""


class DatasetSpecError(DatasetError, ValueError):
    """A source spec string (``synth:N:SEED``) that cannot be understood; the message says what is accepted."""


class BadRow(ValueError):
    """One row cannot become a Task; the message is the reason shown in the report, ``kind`` its
    category in the summary (``invalid row``, ``duplicate id``, ``unreadable file``, ...)."""

    def __init__(self, message: str, kind: str = "invalid row") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class LoadReport:
    """What a load did: the layout it found, how many tasks it produced, which rows it skipped.

    Pass one to ``load_tasks``/``iter_tasks`` (``report=``) to read it afterwards; it is filled
    as the load streams.
    """

    source: str = ""
    kind: str = ""  # parquet | toolkit | project | datasets
    schema: str = ""  # current | legacy-1191 | legacy-1204 | project (several joined by '+')
    loaded: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (task id or row label, reason)
    skipped_kinds: Counter[str] = field(default_factory=Counter)  # why, counted: {"duplicate id": 2, ...}

    def note_schema(self, schema: str) -> None:
        if schema not in self.schema.split("+"):
            self.schema = f"{self.schema}+{schema}" if self.schema else schema

    def skip(self, label: str, reason: str, kind: str = "invalid row") -> None:
        self.skipped.append((label, reason))
        self.skipped_kinds[kind] += 1

    def summary(self) -> str:
        text = f"{self.loaded} tasks from {self.source} ({self.kind}, schema {self.schema or 'unknown'})"
        if self.skipped:
            kinds = ", ".join(f"{count} {kind}" for kind, count in self.skipped_kinds.most_common())
            text += f"; skipped {len(self.skipped)} bad rows ({kinds})"
        return text


def _as_set(value: str | Iterable[str] | None, normalise: Callable[[str], str] = str) -> frozenset[str] | None:
    if value is None:
        return None
    values = [value] if isinstance(value, str) else list(value)
    return frozenset(normalise(v) for v in values)


def normalize_turncase(value: str) -> str:
    """'single', 'single-turn', 'single_turn' -> 'single-turn' (same for multi)."""
    key = str(value).strip().lower().replace("_", "-")
    if key in ("single", "single-turn"):
        return "single-turn"
    if key in ("multi", "multi-turn"):
        return "multi-turn"
    raise ValueError(f"unknown turncase {value!r}: use 'single' or 'multi'")


@dataclass(frozen=True)
class TaskFilter:
    """Selects tasks by id, turncase, normalised domain and eval_focus; None admits everything."""

    ids: frozenset[str] | None = None
    turncases: frozenset[str] | None = None
    domains: frozenset[str] | None = None
    eval_focus: frozenset[str] | None = None

    @classmethod
    def from_args(cls, ids=None, turncase=None, domain=None, eval_focus=None) -> "TaskFilter":
        return cls(
            ids=_as_set(ids),
            turncases=_as_set(turncase, normalize_turncase),
            domains=_as_set(domain, lambda d: normalize_domain(d).lower()),
            eval_focus=_as_set(eval_focus),
        )

    def admits(self, fields: Mapping[str, Any]) -> bool:
        """Judge on whichever of id/turncase/prompt_category/eval_focus ``fields`` has (absent = pass)."""
        checks = (
            (self.ids, "id", str),
            (self.turncases, "turncase", normalize_turncase),
            (self.domains, "prompt_category", lambda c: normalize_domain(c).lower()),
            (self.eval_focus, "eval_focus", str),
        )
        for allowed, key, normalise in checks:
            value = fields.get(key)
            if allowed is None or value is None:
                continue
            try:
                if normalise(value) not in allowed:
                    return False
            except ValueError:  # an unknown turncase string in the data: judged on the built task
                continue
        return True

    def admits_task(self, task: Task) -> bool:
        return self.admits(
            {
                "id": task.id,
                "turncase": task.turncase,
                "prompt_category": task.prompt_category,
                "eval_focus": task.eval_focus,
            }
        )


@dataclass(frozen=True)
class Candidate:
    """One row of a source before it becomes a Task."""

    label: str  # the task id when known, else e.g. 'shard-0.parquet#17'
    fields: Mapping[str, Any]  # cheap fields for the filter
    build: Callable[[], Task]  # raises BadRow / ValueError for a bad row

    @classmethod
    def unreadable(cls, label: str, reason: str, kind: str) -> "Candidate":
        """Rows the source could not even read (a corrupt page, a truncated shard, a line that is not UTF-8)."""
        return cls(label, {}, partial(_raise_bad_row, reason, kind))


def _raise_bad_row(reason: str, kind: str) -> Task:
    raise BadRow(reason, kind)


OUTSIDE = "image path outside the dataset"  # the report's kind for a path that leaves the dataset's folder


def dataset_file(value: str | os.PathLike[str], root: Path) -> Path:
    """The image file a row names, relative to the dataset's folder ``root`` and inside it.

    Rows are data, possibly crafted: an absolute path, a ``..`` part, or a path whose symlinks lead
    out of ``root`` is a bad row (kind OUTSIDE), so a dataset can never show the policy a host
    file. Raises BadRow; returns the resolved path of an existing regular file.
    """
    text = os.fspath(value)
    written = PurePath(text)
    if "\x00" in text or written.is_absolute() or text.startswith(("/", "\\")):
        raise BadRow(f"image path {text[:200]!r} is absolute: images must lie inside {root}", OUTSIDE)
    if ".." in written.parts or ".." in text.replace("\\", "/").split("/"):
        raise BadRow(f"image path {text[:200]!r} climbs out with '..': images must lie inside {root}", OUTSIDE)
    real_root = root.resolve()
    path = (root / written).resolve()
    if not path.is_relative_to(real_root):
        raise BadRow(f"image path {text[:200]!r} leads out of {root} through a symlink", OUTSIDE)
    if not path.is_file():
        raise BadRow(f"image file not found: {root / written}")
    return path


def validate_images(task: Task) -> None:
    """Read and decode every image once (pixel cap applied; in the image sandbox when its decode work is not
    bounded: ``vtb_env.image_checks``) so a corrupt one is a bad row now."""
    for turn_index, turn in enumerate(task.turns, start=1):
        for image in turn.images:
            try:
                check_dataset_image(image.read_bytes())
            except (ImageDecodeError, OSError) as exc:
                raise BadRow(f"turn {turn_index} {image.name}: {exc}") from None


def run_pipeline(
    candidates: Iterable[Candidate],
    *,
    task_filter: TaskFilter,
    limit: int | None,
    strict: bool,
    report: LoadReport,
    check_images: bool,
) -> Iterator[Task]:
    """Filter -> build -> filter again on the built task -> the schema -> images -> yield, with the bad-row policy.

    Whatever a row raises makes it a bad row (data can be malformed in ways no check foresaw), and
    a second row with an id already loaded is one too: an env cannot hold two tasks with one id.
    """
    if limit is not None and limit <= 0:
        return
    first_seen: dict[str, str] = {}  # task id -> label of the row that brought it
    try:
        for candidate in candidates:
            if not task_filter.admits(candidate.fields):
                continue
            try:
                task = candidate.build()
                if not task_filter.admits_task(task):
                    continue
                if task.id in first_seen:
                    raise BadRow(
                        f"duplicate id {task.id!r}: the first row with it ({first_seen[task.id]}) was loaded, "
                        "this one is skipped",
                        "duplicate id",
                    )
                check_task(task)  # one schema for every source's tasks (vtb_env.loaders.schema)
                if check_images:
                    validate_images(task)
            except Exception as exc:  # noqa: BLE001 -- any failure of one row is that row's problem
                kind, reason = _reason(exc)
                if strict:
                    raise DatasetError(
                        f"bad row {candidate.label}: {reason}", task_id=candidate.label, reason=reason
                    ) from exc
                report.skip(candidate.label, reason, kind)
                logger.warning("skipping bad row %s: %s", candidate.label, reason)
                continue
            first_seen[task.id] = candidate.label
            report.loaded += 1
            yield task
            if limit is not None and report.loaded >= limit:
                return
    finally:
        if report.skipped:
            logger.warning("%s (bad rows: %s)", report.summary(), ", ".join(label for label, _ in report.skipped[:10]))


def _reason(exc: Exception) -> tuple[str, str]:
    """(kind, reason) for the report."""
    if isinstance(exc, BadRow):
        return exc.kind, str(exc)
    if isinstance(exc, SchemaError):
        return SCHEMA, str(exc)
    if isinstance(exc, KeyError):
        return "invalid row", f"missing field {exc}"
    if isinstance(exc, (ValueError, TypeError)):
        return "invalid row", str(exc)
    return "invalid row", f"{type(exc).__name__}: {exc}"
