"""The project's own format: ``tasks.jsonl`` (one ``Task.to_dict`` per line) + ``images/``.

Image files live at ``images/<task id>/image_<k>.png`` and the JSONL names them relative to
``images/``; tasks load with images referenced by path, so only metadata sits in memory.
"""

from __future__ import annotations

import io
import json
import os
import re
from functools import partial
from pathlib import Path
from typing import Any, Iterable, Iterator

from vtb_env.loaders.common import Candidate, DatasetError, LoadReport, dataset_file
from vtb_env.safe_text import clean_value
from vtb_env.tasks import ImageRef, Task, decode_image

TASKS_FILE = "tasks.jsonl"
IMAGES_DIR = "images"
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def project_candidates(path: Path, report: LoadReport) -> Iterator[Candidate]:
    report.kind = "project"
    report.note_schema("project")
    jsonl = path / TASKS_FILE if path.is_dir() else path
    if not jsonl.is_file():
        raise DatasetError(f"no {TASKS_FILE} at {path}")
    image_dir = jsonl.parent / IMAGES_DIR
    with jsonl.open("rb") as lines:
        for number, raw in enumerate(lines, start=1):
            label = f"{jsonl.name}:{number}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield Candidate.unreadable(label, f"line is not valid UTF-8 ({exc})", "invalid UTF-8")
                continue
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except (ValueError, RecursionError) as exc:
                yield Candidate.unreadable(
                    label,
                    f"invalid JSON: {exc if not isinstance(exc, RecursionError) else 'nested too deeply'}",
                    "invalid JSON",
                )
                continue
            if not isinstance(data, dict):
                yield Candidate.unreadable(
                    label, f"a task line must be a JSON object, got {type(data).__name__}", "invalid row"
                )
                continue
            data = clean_value(data)  # "\\ud83d" escapes would reach every observation of the task
            yield Candidate(str(data.get("id") or label), data, partial(_confined_task, data, image_dir))


def _confined_task(data: dict[str, Any], image_dir: Path) -> Task:
    """``Task.from_dict`` once every image the row names is known to lie inside ``images/`` (BadRow if not)."""
    for turn in data.get("turns") or ():
        for name in (turn.get("images") or ()) if isinstance(turn, dict) else ():
            if isinstance(name, str):
                dataset_file(name, image_dir)
    return Task.from_dict(data, image_dir)


def _png_bytes(image: ImageRef) -> bytes:
    """The image as PNG (the format its ``image_<k>.png`` name promises); PNG input is kept verbatim."""
    data = image.read_bytes()
    if data.startswith(_PNG_SIGNATURE):
        return data
    buffer = io.BytesIO()
    decode_image(data).save(buffer, format="PNG")
    return buffer.getvalue()


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def save_tasks(tasks: Iterable[Task], out_dir: str | os.PathLike[str]) -> Path:
    """Write tasks in the project format under ``out_dir``; returns the ``tasks.jsonl`` path.

    ``tasks`` may be a generator (e.g. ``iter_tasks(...)``): tasks are written one at a time.
    Task ids must be unique; an existing ``tasks.jsonl`` is replaced when the write completes.
    """
    out = Path(out_dir)
    (out / IMAGES_DIR).mkdir(parents=True, exist_ok=True)
    jsonl = out / TASKS_FILE
    tmp = jsonl.with_name(TASKS_FILE + ".tmp")
    seen: dict[str, str] = {}  # safe directory name -> task id
    with tmp.open("w", encoding="utf-8") as handle:
        for task in tasks:
            folder = _UNSAFE.sub("_", task.id) or "_"
            if folder in seen:
                raise ValueError(
                    f"tasks {seen[folder]!r} and {task.id!r} share the image folder {folder!r} (duplicate id?)"
                )
            seen[folder] = task.id
            handle.write(json.dumps(_save_one(task, out / IMAGES_DIR / folder, folder), ensure_ascii=False) + "\n")
    os.replace(tmp, jsonl)
    return jsonl


def _save_one(task: Task, folder_path: Path, folder: str) -> dict[str, Any]:
    names = [image.name for image in task.images]
    if len(set(names)) != len(names):
        raise ValueError(f"task {task.id!r}: image names repeat: {names}")
    if names:
        folder_path.mkdir(parents=True, exist_ok=True)
    for image in task.images:
        _write_atomic(folder_path / image.name, _png_bytes(image))
    return task.to_dict(image_names=lambda image: f"{folder}/{image.name}")
