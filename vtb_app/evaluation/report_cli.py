"""``vtb report``: its options and command (registered by ``commands.register``; matplotlib loads only when it runs)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def register_report(subparsers: argparse._SubParsersAction) -> None:
    rp = subparsers.add_parser("report", help="tables, plots and an HTML report from one or more runs")
    rp.add_argument("runs", nargs="+", help="run directories (NAME=DIR to rename a run)")
    rp.add_argument("--out", required=True, help="report directory")
    rp.add_argument(
        "--mode-labels",
        default=None,
        metavar="FILE",
        help="labels from `vtb label-modes` (per run: its model's labels)",
    )
    rp.add_argument("--max-trajectories", type=int, default=None, help="per run, in the HTML")
    rp.add_argument("--per-trial", action="store_true", help="APR / ARS of each sample beside the mean ± std")
    rp.add_argument(
        "--mcc-tools",
        default="any",
        choices=("any", "vision"),
        help=(
            "what counts as using tools for MCC: any tool (the paper's reading), or the vision tool on image tasks "
            "and a lookup tool where the reference uses one; table 7 counts every tool either way"
        ),
    )
    add_label_rule(rp)
    rp.add_argument("--all-tables", action="store_true", help="print every table, not only the overall comparison")
    rp.set_defaults(func=run_report)


def add_label_rule(parser: argparse.ArgumentParser) -> None:
    """``--label-rule``: how a multi-sample text-only run makes one mode label per task (``modes.LABEL_RULES``)."""
    parser.add_argument(
        "--label-rule",
        default="any",
        choices=("any", "majority"),
        help=(
            "labels from a multi-sample text-only run: tool_redundant when any sample passes (the seed's "
            "'can be solved'), or when most do"
        ),
    )


def label_store(path: str | Path, must_exist: bool = True) -> Any:
    """The label file at ``path``; a missing one that must exist is a user error (``FileNotFoundError``)."""
    from vtb_rewards.mode import ModeLabelStore

    if must_exist and not Path(path).exists():
        raise FileNotFoundError(f"no mode-label file {path} (make one with `vtb label-modes`)")
    return ModeLabelStore(path)


def _parse_run_arg(value: str) -> tuple[str | None, Path]:
    if "=" in value and not Path(value).exists():
        name, path = value.split("=", 1)
        return name, Path(path)
    return None, Path(value)


def run_report(args: argparse.Namespace) -> int:
    from vtb_app.evaluation.console import render_console, summary_table
    from vtb_app.evaluation.report import write_report

    store = label_store(args.mode_labels) if args.mode_labels else None
    runs = [_parse_run_arg(value) for value in args.runs]
    paths = write_report(
        runs,
        Path(args.out),
        max_trajectories=args.max_trajectories,
        mode_labels=store,
        per_trial=args.per_trial,
        mcc_reading=args.mcc_tools,
        label_rule=args.label_rule,
    )
    if args.all_tables:
        print(paths["text"].read_text())
    else:
        print(render_console(summary_table(json.loads(paths["summary"].read_text())["runs"])))
    print(f"\nAll tables: {paths['text'].resolve()}\nHTML report: {paths['html'].resolve()}")
    return 0
