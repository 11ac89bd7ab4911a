"""A ``datasets.Dataset`` (or DatasetDict) the user already loaded; ``datasets`` stays optional.

Recognised by duck typing (``column_names`` + iteration). With ``with_format("arrow")`` the
images arrive as their encoded ``{bytes, path}`` structs in small batches, so nothing is
decoded by ``datasets`` and memory stays bounded; other iterables of row mappings work too
(PIL images are re-encoded as PNG).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Iterable, Iterator, Mapping

from vtb_env.loaders.common import Candidate, DatasetError, LoadReport
from vtb_env.loaders.official import detect_layout, read_columns, row_to_task

BATCH_ROWS = 8


def is_dataset_like(obj: Any) -> bool:
    """A ``datasets.Dataset``/``DatasetDict`` or anything shaped like one."""
    if isinstance(obj, Mapping):
        return bool(obj) and all(is_dataset_like(split) for split in obj.values())
    return hasattr(obj, "column_names") and hasattr(obj, "__iter__")


def _rows(dataset: Any, columns: list[str]) -> Iterator[Mapping[str, Any]]:
    if hasattr(dataset, "select_columns"):
        dataset = dataset.select_columns(columns)
    if hasattr(dataset, "with_format") and hasattr(dataset, "iter"):
        for table in dataset.with_format("arrow").iter(batch_size=BATCH_ROWS):
            yield from table.to_pylist()
    else:
        yield from dataset


def dataset_candidates(obj: Any, report: LoadReport) -> Iterator[Candidate]:
    report.kind = "datasets"
    splits: Iterable[Any] = obj.values() if isinstance(obj, Mapping) else [obj]
    for dataset in splits:
        names = list(dataset.column_names)
        if not names:
            raise DatasetError("the dataset has no columns")
        layout = detect_layout(names)
        report.note_schema(layout.name)
        for position, row in enumerate(_rows(dataset, read_columns(layout, names))):
            label = str(row.get("id") or f"row {position}")
            yield Candidate(label, row, partial(row_to_task, row, layout))
