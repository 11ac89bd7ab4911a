"""Directories written by the official toolkit's ``download_dataset.py``.

Layout: ``data/{single_turn,multi_turn}/dataset.json`` (a JSON list of rows, non-image columns
verbatim) with ``image_paths`` / ``images_by_turn_paths`` relative to the toolkit root
(``data/<split>/images/sample_<k>/turn_<t>_image_<j>.png``). Images stay on disk and are read
lazily by path.
"""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path
from typing import Any, Iterator

from vtb_env.loaders.common import Candidate, DatasetError, LoadReport
from vtb_env.loaders.official import detect_layout, row_to_task
from vtb_env.safe_text import clean_value

_SPLIT_ORDER = {"single_turn": 0, "multi_turn": 1}


def toolkit_files(root: Path) -> list[Path]:
    """The dataset.json files under a toolkit root, its ``data/`` dir or one split dir."""
    found = [*root.glob("dataset.json"), *root.glob("*/dataset.json"), *root.glob("data/*/dataset.json")]
    return sorted(set(found), key=lambda p: (_SPLIT_ORDER.get(p.parent.name, 2), str(p)))


def _resolve(relative: str, json_path: Path) -> str:
    """Paths are relative to the toolkit root (``data/...``); fall back to the split's images dir.
    Returned relative to the split's folder, the dataset's own: ``row_to_task`` confines it there."""
    if os.path.isabs(relative):
        return relative  # refused as such by row_to_task
    candidates = [json_path.parent.parent.parent / relative, json_path.parent.parent / relative]
    if "images/" in relative:
        candidates.append(json_path.parent / "images" / relative.split("images/", 1)[1])
    return os.path.relpath(next((c for c in candidates if c.is_file()), candidates[0]), json_path.parent)


def _row_with_images(entry: dict[str, Any], json_path: Path) -> dict[str, Any]:
    """Rename the toolkit's *_paths columns back to the official image columns, paths resolved."""
    row = {k: v for k, v in entry.items() if k not in ("image_paths", "images_by_turn_paths")}
    if entry.get("images_by_turn_paths") is not None:
        row["images_by_turn"] = [[_resolve(p, json_path) for p in turn or ()] for turn in entry["images_by_turn_paths"]]
    if entry.get("image_paths") is not None:
        row["images"] = [_resolve(p, json_path) for p in entry["image_paths"]]
    return row


def toolkit_candidates(root: Path, report: LoadReport) -> Iterator[Candidate]:
    report.kind = "toolkit"
    files = [root] if root.is_file() else toolkit_files(root)
    if not files:
        raise DatasetError(f"no dataset.json under {root} (expected data/single_turn/dataset.json)")
    for json_path in files:
        try:
            entries = clean_value(json.loads(json_path.read_text(encoding="utf-8")))
        except (OSError, ValueError, RecursionError) as exc:  # also invalid UTF-8, absurd nesting
            raise DatasetError(f"cannot read {json_path}: {type(exc).__name__}: {exc}") from exc
        if not isinstance(entries, list):
            raise DatasetError(f"{json_path}: expected a JSON list of rows")
        for position, entry in enumerate(entries):
            fallback = f"{json_path}#{position}"
            if not isinstance(entry, dict):
                yield Candidate(fallback, {}, partial(_not_a_row, entry))
                continue
            label = str(entry.get("id") or fallback)
            try:
                row = _row_with_images(entry, json_path)
                layout = detect_layout(list(row))
            except Exception as exc:  # noqa: BLE001 -- one odd entry is a bad row, not a failed load
                yield Candidate.unreadable(label, str(exc), "invalid row")
                continue
            report.note_schema(layout.name)
            yield Candidate(label, row, partial(row_to_task, row, layout, base_dir=json_path.parent))


def _not_a_row(entry: Any):
    raise ValueError(f"expected a JSON object, got {type(entry).__name__}")
