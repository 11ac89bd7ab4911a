"""The run file: one JSON line per finished (task, sample), appended atomically, safe to resume.

A run directory holds ``config.json`` (what was evaluated, with its hash) and
``records.jsonl``. Each line is a complete record written with a single ``write`` on an
``O_APPEND`` descriptor and fsynced, so a crash or Ctrl-C leaves at most one torn last line;
``RunLog`` cuts it off when reopened. A record's ``status`` is ``ok`` (the episode ran and was
judged) or ``error`` (recorded with its message, retried on resume, never counted as done).
An ``ok`` record whose judging is incomplete (a rubric, key step, tool call or error type the
judge failed on) is done as an episode but not as a judgment: ``--resume`` and ``vtb judge``
judge it again from its saved answers. When a key has several records the last ``ok`` one wins
(re-judging appends, never rewrites).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Iterator, Mapping

RECORDS_FILE = "records.jsonl"
CONFIG_FILE = "config.json"


def config_hash(config: Mapping[str, Any]) -> str:
    """A short stable hash of a run's configuration (key order does not matter)."""
    canonical = json.dumps(config, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def record_key(task_id: str, sample: int) -> str:
    return f"{task_id}#{sample}"


class RunLog:
    """Append-only JSONL of records, thread-safe; reads tolerate a torn last line."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair()
        self._lock = threading.Lock()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _repair(self) -> None:
        """Cut a torn last line (a crash mid-write) so the next append starts on a fresh line."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with open(self.path, "rb+") as handle:
            data = handle.read()
            if data.endswith(b"\n"):
                return
            handle.truncate(data.rfind(b"\n") + 1)

    def append(self, record: Mapping[str, Any]) -> None:
        """Write one record; raises (writing nothing) when it cannot be encoded, e.g. nested too deep."""
        line = encode_record(record)
        with self._lock:
            written = os.write(self._fd, line)
            if written != len(line):  # never for regular files, but a torn line must not go unnoticed
                raise OSError(f"short write to {self.path}: {written} of {len(line)} bytes")
            os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> "RunLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def encode_record(record: Mapping[str, Any]) -> bytes:
    """The record as one UTF-8 JSON line; lone surrogates become U+FFFD so the line always encodes."""
    text = json.dumps(record, ensure_ascii=False, default=str)
    return (text + "\n").encode("utf-8", errors="replace")


def error_record(base: Mapping[str, Any], error: str, **extra: Any) -> dict[str, Any]:
    """A task's ``error`` record from plain fields only, so that it can always be written."""
    fields = (
        "key",
        "task_id",
        "sample",
        "seed",
        "config_hash",
        "agent",
        "model",
        "judge",
        "ablation",
        "preset",
        "task",
    )
    safe = {key: base[key] for key in fields if key in base}
    return {**safe, "status": "error", "error": error[:4000], **extra}


IMAGES_DIR = "images"


def run_image_path(run_dir: str | Path, relpath: Any) -> Path | None:
    """The stored image ``relpath`` of a record inside ``run_dir/images``, or None when it is not one.

    Records are data, possibly crafted: a path that is absolute, climbs out (``..``), goes
    through a link or names anything but a regular file directly under ``images/`` is refused,
    so ``vtb judge`` and ``vtb report`` never read or write outside their run directories.
    """
    if not isinstance(relpath, str) or "\x00" in relpath:
        return None
    parts = relpath.split("/")
    if len(parts) != 2 or parts[0] != IMAGES_DIR or parts[1] in ("", ".", "..") or "\\" in relpath:
        return None
    images = Path(run_dir) / IMAGES_DIR
    path = images / parts[1]
    if images.is_symlink() or path.is_symlink() or not path.is_file():
        return None
    return path


def iter_records(path: str | Path, unreadable: list[int] | None = None) -> Iterator[dict[str, Any]]:
    """Every readable record in file order; a torn or corrupt line is skipped (its task reruns).

    ``unreadable``, when given, receives the 1-based number of each line that is not a record (garbled,
    not UTF-8, not an object with a key, or a torn last line), so a caller can say what was skipped.
    """
    path = Path(path)
    if not path.exists():
        return
    # bytes, decoded per line: one line of bad UTF-8 must not end the reading of every line after it
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            record = _record(raw) if raw.endswith(b"\n") else None
            if record is not None:
                yield record
            elif unreadable is not None:
                unreadable.append(number)


def _record(raw: bytes) -> dict[str, Any] | None:
    """The record one complete line holds, or None when it holds none."""
    try:
        record = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # corrupt or not UTF-8, or nested deeper than the parser goes
        return None
    return record if isinstance(record, dict) and "key" in record else None


def unreadable_report(path: str | Path, limit: int = 10) -> str | None:
    """One line saying how many lines of the run file ``path`` are not records, and which; None when all are."""
    lines: list[int] = []
    for _ in iter_records(path, lines):
        pass
    if not lines:
        return None
    shown = ", ".join(map(str, lines[:limit])) + (f" and {len(lines) - limit} more" if len(lines) > limit else "")
    return (
        f"{len(lines)} line(s) of {path} could not be read as records and are skipped (line {shown}); "
        "an item that no other line records runs again"
    )


def latest_records(path: str | Path) -> dict[str, dict[str, Any]]:
    """The record that counts for each key: the last ``ok`` one, else the last error."""
    chosen: dict[str, dict[str, Any]] = {}
    for record in iter_records(path):
        previous = chosen.get(record["key"])
        if previous is None or record.get("status") == "ok" or previous.get("status") != "ok":
            chosen[record["key"]] = record
    return chosen


def judging_complete(record: Mapping[str, Any]) -> bool:
    """Did every judgment of this ``ok`` record succeed (rubrics, and the optional passes it ran)?"""
    score = record.get("score") or {}
    process = record.get("process") or {}
    return (
        bool(score.get("complete", True))
        and not process.get("n_judge_errors")
        and record.get("error_type") != "judge_error"
    )


def episode_calls(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every tool call of a stored episode, in order."""
    return [
        call
        for turn in record.get("episode", {}).get("turns", [])
        for step in turn.get("steps", [])
        for call in step.get("tool_calls", [])
    ]


def ok_keys(path: str | Path) -> set[str]:
    """Keys with an ``ok`` record, judged completely or not (an import skips them: its verdicts are fixed)."""
    return {key for key, record in latest_records(path).items() if record.get("status") == "ok"}


def done_keys(path: str | Path) -> set[str]:
    """Keys with an ``ok`` record whose judging is complete: what ``--resume`` skips."""
    return {
        key for key, record in latest_records(path).items() if record.get("status") == "ok" and judging_complete(record)
    }


def rejudge_records(path: str | Path) -> dict[str, dict[str, Any]]:
    """Keys whose latest record is ``ok`` but incompletely judged: ``--resume`` judges them again."""
    return {key: r for key, r in latest_records(path).items() if r.get("status") == "ok" and not judging_complete(r)}


class RunConflictError(RuntimeError):
    """The output directory already holds a different run, or records without ``--resume``."""


def write_config(run_dir: Path, config: Mapping[str, Any]) -> str:
    """Write ``config.json`` (with its hash); on resume the stored hash must match."""
    digest = config_hash(config)
    path = run_dir / CONFIG_FILE
    if path.exists():
        stored = read_config(run_dir)
        if stored.get("config_hash") != digest:
            raise RunConflictError(
                f"{run_dir} holds a run with a different configuration (hash {stored.get('config_hash')} != {digest}); "
                "use another --out directory, or the same options as that run"
            )
        return digest
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({**config, "config_hash": digest}, indent=2, sort_keys=True, default=str))
    os.replace(tmp, path)
    return digest


class RunFileError(ValueError):
    """A file of a run directory exists but cannot be read (truncated, garbled, not what it should hold)."""


def read_config(run_dir: str | Path) -> dict[str, Any]:
    """A run's ``config.json`` ({} when there is none); a damaged one is a ``RunFileError`` naming the file."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        return {}
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:
        raise RunFileError(f"{path}: not a run configuration: {type(exc).__name__}: {exc}") from None
    if not isinstance(config, dict):
        raise RunFileError(f"{path}: not a run configuration: it holds a {type(config).__name__}, not an object")
    return config
