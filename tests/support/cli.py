"""Command lines of the ``vtb`` CLI that many tests run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def run_cli(capsys: Any, *argv: Any) -> tuple[int, str, str]:
    """``vtb`` with ``argv`` (as strings) in this process: its exit code, stdout and stderr."""
    from vtb_app import cli

    capsys.readouterr()
    code = cli.main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    """The one ``error: ...`` line a failing command prints (AssertionError for anything else, a traceback)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def eval_args(data: Any, agent: str, out: Any, *options: Any) -> list[str]:
    """``vtb eval`` of the tasks ``data`` with ``agent`` (e.g. ``f"openai:m@{server.base_url}"``),
    writing ``out``, without the progress bar, then ``options``: every argument as a string."""
    return [str(arg) for arg in ("eval", "--data", data, "--agent", agent, "--out", out, "--no-progress", *options)]


def wait_for_records(path: Path, count: int, timeout_s: float = 240.0) -> None:
    """Wait until the run log ``path`` holds ``count`` records (lines); AssertionError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        time.sleep(0.1)
    raise AssertionError(f"{path} did not reach {count} records in {timeout_s} s")
