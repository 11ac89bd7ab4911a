"""Official Hugging Face parquet shards, streamed with pyarrow.

Memory stays bounded by one small record batch: columns are projected (the flat ``images``
column duplicates ``images_by_turn`` and is not read), row groups without a row the filter
wants are never read, and each yielded Task owns only its own encoded image bytes.
"""

from __future__ import annotations

import glob
from functools import partial
from itertools import accumulate
from pathlib import Path
from typing import Iterator

import pyarrow.parquet as pq

from vtb_env.loaders.common import Candidate, DatasetError, LoadReport, TaskFilter
from vtb_env.loaders.official import FILTER_COLUMNS, detect_layout, read_columns, row_to_task

# Rows per record batch: a row holds 1-5 encoded images (~1-10 MB), so keep batches small.
BATCH_ROWS = 8
# Read column chunks through a small buffer instead of pre-buffering a whole row group at once.
READ_BUFFER_BYTES = 1 << 20


def parquet_files(source: str | Path) -> list[Path]:
    """A parquet file, a directory of shards (recursive, hidden dirs skipped) or a glob, sorted."""
    path = Path(source)
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(
            p for p in path.rglob("*.parquet") if not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
    else:
        files = sorted(Path(p) for p in glob.glob(str(source), recursive=True) if p.endswith(".parquet"))
    if not files:
        raise DatasetError(f"no parquet files found at {source}")
    return files


def _wanted_row_groups(file: pq.ParquetFile, task_filter: TaskFilter) -> list[int]:
    """Row groups holding at least one row the filter admits, judged on the cheap columns only.
    A group whose cheap columns cannot be read is kept: reading it reports its rows as bad."""
    all_groups = list(range(file.num_row_groups))
    columns = [c for c in FILTER_COLUMNS if c in file.schema_arrow.names]
    if task_filter == TaskFilter() or not columns:
        return all_groups
    wanted = []
    for group in all_groups:
        try:
            rows = file.read_row_group(group, columns=columns).to_pylist()
        except Exception:  # noqa: BLE001 -- corrupt data: reported when the group is read
            rows = None
        if rows is None or any(task_filter.admits(row) for row in rows):
            wanted.append(group)
    return wanted


def parquet_candidates(source: str | Path, task_filter: TaskFilter, report: LoadReport) -> Iterator[Candidate]:
    """Rows of every shard. A shard that cannot be opened, or a row group whose pages are corrupt,
    is reported as bad rows and the other shards and groups still load; DatasetError only when no
    shard can be opened at all."""
    report.kind = "parquet"
    files = parquet_files(source)
    failures = []
    for path in files:
        try:
            file = pq.ParquetFile(path, pre_buffer=False, buffer_size=READ_BUFFER_BYTES)
        except Exception as exc:  # noqa: BLE001 -- not parquet, truncated footer...
            failures.append(f"{path}: {exc}")
            yield Candidate.unreadable(path.name, f"cannot read parquet file {path}: {exc}", "unreadable file")
            continue
        with file:
            yield from _file_candidates(file, path, task_filter, report)
    if len(failures) == len(files):
        raise DatasetError(
            f"cannot read parquet file {failures[0]}"
            if len(files) == 1
            else "no parquet shard can be read: " + "; ".join(failures)
        )


def _file_candidates(
    file: pq.ParquetFile, path: Path, task_filter: TaskFilter, report: LoadReport
) -> Iterator[Candidate]:
    names = file.schema_arrow.names
    layout = detect_layout(names)
    report.note_schema(layout.name)
    starts = list(accumulate((file.metadata.row_group(g).num_rows for g in range(file.num_row_groups)), initial=0))
    for group in _wanted_row_groups(file, task_filter):
        row_number = starts[group]
        try:
            for batch in file.iter_batches(
                batch_size=BATCH_ROWS, row_groups=[group], columns=read_columns(layout, names)
            ):
                for row in batch.to_pylist():
                    label = str(row.get("id") or f"{path.name}#{row_number}")
                    yield Candidate(label, row, partial(row_to_task, row, layout, base_dir=path.parent))
                    row_number += 1
        except Exception as exc:  # noqa: BLE001 -- a corrupt page: the group's remaining rows are bad
            reason = f"{path.name} row group {group}: cannot read the data ({type(exc).__name__}: {str(exc).strip()})"
            for label in _unread_labels(
                file, path, group, row_number - starts[group], starts[group + 1] - starts[group]
            ):
                yield Candidate.unreadable(label, reason, "unreadable data")


def _unread_labels(file: pq.ParquetFile, path: Path, group: int, first: int, end: int) -> list[str]:
    """Task ids of rows first..end-1 of a row group when its id column still reads, else row labels."""
    start = sum(file.metadata.row_group(g).num_rows for g in range(group))
    try:
        ids = file.read_row_group(group, columns=["id"]).column("id").to_pylist()[first:end]
        return [str(task_id or f"{path.name}#{start + first + i}") for i, task_id in enumerate(ids)]
    except Exception:  # noqa: BLE001 -- the id page is corrupt too
        return [f"{path.name}#{row}" for row in range(start + first, start + end)]
