"""Load VisualToolBench tasks from any supported source, streaming.

Sources (``source`` argument):

- ``"demo"``: the bundled demo set (``vtb_env/data/demo/``, project format);
- ``"synth:N:SEED"``: the first N generated synthetic tasks of seed SEED (``loaders/synth.py``);
- official Hugging Face parquet: a file, a directory of shards or a glob, in the current
  layout or either older one (the report says which);
- a directory written by the official toolkit's ``download_dataset.py`` (``dataset.json``);
- the project format: a ``tasks.jsonl`` or its directory (see ``save_tasks``);
- a ``datasets.Dataset`` / ``DatasetDict`` object (``datasets`` itself is optional).

Bad rows are reported with the task id and reason in a ``LoadReport``: skipped with a logged
warning by default, raised as ``DatasetError`` with ``strict=True``. See docs/data.md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, TypedDict

from vtb_env.loaders.common import (
    BadRow,
    Candidate,
    DatasetError,
    DatasetNotFoundError,
    LoadReport,
    TaskFilter,
    logger,
    run_pipeline,
)
from vtb_env.loaders.hf_dataset import dataset_candidates, is_dataset_like
from vtb_env.loaders.parquet import parquet_candidates
from vtb_env.loaders.project import TASKS_FILE, project_candidates, save_tasks
from vtb_env.loaders.synth import is_synth_spec, synth_candidates
from vtb_env.loaders.toolkit import toolkit_candidates, toolkit_files
from vtb_env.tasks import Task

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from Python 3.11 on

DEMO_DIR = Path(__file__).resolve().parent.parent / "data" / "demo"


def _candidates(source: Any, task_filter: TaskFilter, report: LoadReport) -> Iterator[Candidate]:
    """Dispatch on what ``source`` is; DatasetError when it is none of the supported sources."""
    if isinstance(source, str) and source == "demo":
        if not (DEMO_DIR / TASKS_FILE).is_file():
            raise DatasetError(f"the bundled demo set is missing: expected {DEMO_DIR / TASKS_FILE}")
        return project_candidates(DEMO_DIR, report)
    if is_synth_spec(source):
        return synth_candidates(source, report)
    if not isinstance(source, (str, os.PathLike)):
        if is_dataset_like(source):
            return dataset_candidates(source, report)
        raise DatasetError(f"unsupported source of type {type(source).__name__}")
    path = Path(source)
    if path.is_file():
        if path.suffix == ".jsonl":
            return project_candidates(path, report)
        if path.suffix == ".json":
            return toolkit_candidates(path, report)
        if path.suffix == ".parquet":
            return parquet_candidates(path, task_filter, report)
        raise DatasetError(f"{path}: expected .parquet, .jsonl (project) or dataset.json (toolkit)")
    if path.is_dir():
        if (path / TASKS_FILE).is_file():
            return project_candidates(path, report)
        if toolkit_files(path):
            return toolkit_candidates(path, report)
        return parquet_candidates(path, task_filter, report)
    if any(char in str(source) for char in "*?["):
        return parquet_candidates(source, task_filter, report)
    raise DatasetNotFoundError(f"no such file or directory: {source} (or pass 'demo' or 'synth:N:SEED')")


def iter_tasks(
    source: Any,
    *,
    ids: str | Iterable[str] | None = None,
    turncase: str | None = None,
    domain: str | Iterable[str] | None = None,
    eval_focus: str | Iterable[str] | None = None,
    limit: int | None = None,
    strict: bool = False,
    report: LoadReport | None = None,
    validate_images: bool = True,
) -> Iterator[Task]:
    """Stream tasks from ``source`` one at a time (see the module docstring for sources).

    Filters: ``ids``, ``turncase`` ('single'/'multi'), ``domain`` (normalised: STEM, Medical,
    Finance, Sports, Generalist), ``eval_focus``; ``limit`` caps the tasks yielded. Each image
    is decoded once (pixel cap applied) so a corrupt one is a bad row now, not a crash later;
    ``validate_images=False`` skips that for metadata-only scans. ``report`` is filled as the
    stream advances.
    """
    report = report if report is not None else LoadReport()
    report.source = str(source) if isinstance(source, (str, os.PathLike)) else type(source).__name__
    task_filter = TaskFilter.from_args(ids, turncase, domain, eval_focus)
    candidates = _candidates(source, task_filter, report)
    yield from run_pipeline(
        candidates, task_filter=task_filter, limit=limit, strict=strict, report=report, check_images=validate_images
    )
    logger.info("%s", report.summary())


class LoadOptions(TypedDict, total=False):
    """The keyword arguments of ``iter_tasks`` (see there), which ``load_tasks`` passes on."""

    ids: str | Iterable[str] | None
    turncase: str | None
    domain: str | Iterable[str] | None
    eval_focus: str | Iterable[str] | None
    limit: int | None
    strict: bool
    report: LoadReport | None
    validate_images: bool


def load_tasks(source: Any, **options: Unpack[LoadOptions]) -> list[Task]:
    """All tasks of ``iter_tasks(source, **options)`` as a list: the same sources, filters, report
    and bad-row policy.

    Tasks from parquet or ``datasets`` keep their encoded image bytes in memory; for the full
    dataset prefer ``iter_tasks``, a filter/limit, or converting once with ``save_tasks``
    (project-format tasks read images from disk on demand).
    """
    return list(iter_tasks(source, **options))


__all__ = ["BadRow", "DatasetError", "LoadReport", "iter_tasks", "load_tasks", "save_tasks", "DEMO_DIR"]
