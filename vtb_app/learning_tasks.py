"""The learning check's task sets: ``synth:N:SEED`` drawn from a generator (optionally only the pairs whose
labels the text policies' reader confirms) or any other loader source, every task mode-labelled.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable, Sequence

from vtb_app.learning_policies import cached_reader
from vtb_env.ocr_view import default_cache
from vtb_env.tasks import Task


def load_learning_tasks(
    spec: str, generator: str, reader: Callable[[Any], str] | None = None, ocr_workers: int = 2
) -> list[Task]:
    """``synth:N:SEED`` from ``generator``; any other ``vtb_env.loaders`` source as it is; every task mode-labelled.

    ``reader`` (image -> text; synth specs only): keep only the pairs whose labels that reader confirms
    (``vtb_env.synth.stream(solvable=True)``: a tool-required task it cannot solve as shown but can after the
    reference code, a twin it reads as shown)."""
    from vtb_env.loaders import load_tasks
    from vtb_env.loaders.synth import parse_synth_spec
    from vtb_env.synth import generate

    if spec.strip().startswith("synth:"):
        n, seed, _, split = parse_synth_spec(spec)
        confirmed = {"solvable": True, "reader": reader, "prefetch": _reading(ocr_workers)} if reader else {}
        tasks = generate(n, seed, generator=generator, split=split, **confirmed)
    elif reader is not None:
        raise SystemExit(f"{spec!r}: reader labels confirm synth:N:SEED pairs only; use --labels generator")
    else:
        tasks = load_tasks(spec)
    if not tasks or any(t.mode_label is None for t in tasks):
        raise SystemExit(f"{spec!r}: every task needs a mode label (tool_required / tool_redundant)")
    return tasks


def _reading(workers: int) -> Callable[[Sequence[Task]], int]:
    """Fill the OCR cache with a pair's pictures, ``workers`` at a time, before the probe reads them one by one."""
    return lambda pair: default_cache().fill([ref.open() for task in pair for ref in task.images], workers=workers)


def selection(tasks: Sequence[Task]) -> dict[str, int]:
    """How a synthetic set was drawn: tasks, the pairs (generator indices) they come from, and the indices
    scanned for them (with reader labels, ``indices_scanned - pairs`` pairs were refused: the probe did not
    confirm their labels, or the split left them out)."""
    indices = {t.metadata.get("index") for t in tasks if isinstance(t.metadata.get("index"), int)}
    return {"tasks": len(tasks), "pairs": len(indices), "indices_scanned": max(indices) + 1 if indices else 0}


def reader_labels(args: argparse.Namespace) -> Callable[[Any], str] | None:
    """The probe's reader for ``--labels reader`` (the text policies' own readings, through the OCR cache)."""
    return cached_reader if args.labels == "reader" else None
