"""A run's failures by kind: what ``vtb eval``, ``vtb judge`` and ``vtb import-toolkit`` print when items fail.

Failed items (``error`` records) and judge calls that left a verdict unjudged are counted by kind
(``vtb_app.errors.error_kinds``: the innermost exception a message quotes, else its text before the
first colon), each kind with its first message, on stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterable

from vtb_app.errors import ExitCode, all_unreachable, error_kinds
from vtb_app.evaluation.records import RECORDS_FILE, latest_records


def report_failures(out: Path, nothing_done: bool) -> ExitCode:
    """Print the run's failed items and judge calls by kind (first message of each) on stderr; the exit code
    the items make: UNREACHABLE when nothing ran because a server could not be reached."""
    failures, judging = run_failures(latest_records(out / RECORDS_FILE).values())
    if nothing_done and all_unreachable(failures):
        print(f"error: no item could run, a server could not be reached: {error_kinds(failures)[0]}", file=sys.stderr)
        return ExitCode.UNREACHABLE
    print_failures(failures, judging)
    return ExitCode.FAILED_ITEMS if failures else ExitCode.OK


def run_failures(records: Iterable[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The errors of a run's failed items, and of its judge calls that left a verdict unjudged."""
    items, judging = [], []
    for record in records:
        if record.get("status") != "ok":
            items.append(str(record.get("error")))
            continue
        for turn in record.get("verdicts") or ():
            judging += [str(v["error"]) for v in turn or () if isinstance(v, dict) and v.get("error")]
    return items, judging


def print_failures(failures: list[str], judging: list[str]) -> None:
    for label, messages in (("errors", failures), ("judge errors", judging)):
        for line in error_kinds(messages):
            print(f"{label}: {line}", file=sys.stderr)
