"""``vtb info SOURCE``: load tasks and print a summary (counts by turncase, domain, category)."""

from __future__ import annotations

import argparse
from collections import Counter


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("info", help="load tasks from a source and print a summary")
    parser.add_argument("source", help="'demo', a parquet file/dir, a toolkit dir, or a project JSONL")
    parser.add_argument("--strict", action="store_true", help="raise on the first bad row")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from vtb_env.loaders import LoadReport, load_tasks

    report = LoadReport()
    tasks = load_tasks(args.source, strict=args.strict, report=report)  # a DatasetError is one line (vtb_app.cli)
    print(report.summary())
    for title, counter in (
        ("turncase", Counter(t.turncase for t in tasks)),
        ("domain", Counter(t.domain for t in tasks)),
        ("eval_focus", Counter(t.eval_focus for t in tasks)),
        ("mode_label", Counter(str(t.mode_label) for t in tasks)),
    ):
        print(f"  {title:<11} " + ", ".join(f"{k}={v}" for k, v in sorted(counter.items())))
    print(f"  turns       {sum(len(t.turns) for t in tasks)}; images {sum(len(t.images) for t in tasks)}")
    return 0
