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
        files = sorted(p for p in path.rglob("*.parquet") if not any(part.startswith(".") for part in p.relative_to(path).parts))
    else:
        files = sorted(Path(p) for p in glob.glob(str(source), recursive=True) if p.endswith(".parquet"))
    if not files:
        raise DatasetError(f"no parquet files found at {source}")
    return files


def _wanted_row_groups(file: pq.ParquetFile, task_filter: TaskFilter) -> list[int]:
    """Row groups holding at least one row the filter admits, judged on the cheap columns only."""
    all_groups = list(range(file.num_row_groups))
    columns = [c for c in FILTER_COLUMNS if c in file.schema_arrow.names]
    if task_filter == TaskFilter() or not columns:
        return all_groups
    wanted = []
    for group in all_groups:
        rows = file.read_row_group(group, columns=columns).to_pylist()
        if any(task_filter.admits(row) for row in rows):
            wanted.append(group)
    return wanted


def parquet_candidates(source: str | Path, task_filter: TaskFilter, report: LoadReport) -> Iterator[Candidate]:
    report.kind = "parquet"
    for path in parquet_files(source):
        try:
            file = pq.ParquetFile(path, pre_buffer=False, buffer_size=READ_BUFFER_BYTES)
        except Exception as exc:  # not parquet, truncated footer...
            raise DatasetError(f"cannot read parquet file {path}: {exc}") from exc
        with file:
            names = file.schema_arrow.names
            layout = detect_layout(names)
            report.note_schema(layout.name)
            starts = list(accumulate((file.metadata.row_group(g).num_rows for g in range(file.num_row_groups)), initial=0))
            for group in _wanted_row_groups(file, task_filter):
                row_number = starts[group]
                batches = file.iter_batches(batch_size=BATCH_ROWS, row_groups=[group], columns=read_columns(layout, names))
                for batch in batches:
                    for row in batch.to_pylist():
                        label = str(row.get("id") or f"{path.name}#{row_number}")
                        yield Candidate(label, row, partial(row_to_task, row, layout, base_dir=path.parent))
                        row_number += 1
