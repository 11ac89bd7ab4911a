"""The summary ``vtb eval``, ``vtb judge`` and ``vtb report`` print: the headline numbers in CONSOLE_WIDTH columns.

APR with its 95% CI, ARS, MCC, calls per task and the reward, per run; every other column is in
``tables.md`` and ``report.html`` (``vtb report``). Run names are cut to fit, notes wrapped.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, Sequence

from vtb_app.evaluation.cells import Cell, Table, ci_cell, mark_best, metric_cell, number_cell, render_text
from vtb_app.evaluation.metrics import summarize_run
from vtb_app.evaluation.modes import pick_labels
from vtb_app.evaluation.runs import Run
from vtb_app.evaluation.tables import partial_note, reward_cell, scoring_note

CONSOLE_WIDTH = 100
RUN_NAME_WIDTH = 20


def _name(name: str) -> str:
    return name if len(name) <= RUN_NAME_WIDTH else name[: RUN_NAME_WIDTH - 1] + "…"


def summary_table(summaries: Sequence[dict[str, Any]]) -> Table:
    """Per run: APR (%) [95% CI], ARS, MCC, calls per task, reward (over all tasks: failed or never-run
    episodes count as not passed); the best run of each column is marked as in the full tables."""
    rows = []
    for s in summaries:
        apr, mode = metric_cell(s, "apr", spread=False), s["mode_selection"]
        rows.append(
            [
                _name(s["name"]),
                Cell(f"{apr.text} {ci_cell(s, 'apr')}", apr.value, apr.partial),
                metric_cell(s, "ars", spread=False),
                number_cell(mode["mcc"]) if mode else "n/a",
                number_cell(s["tool_use"]["overall"]["volume"], 2),
                reward_cell(s, s["reward"]),
            ]
        )
    tasks = " / ".join(sorted({str(s["n"]) for s in summaries}))
    notes = (
        f"APR and ARS over all {tasks} tasks (an episode that failed or never ran counts as not passed); "
        "95% CI: percentile bootstrap over tasks. Every other column: `vtb report` (tables.md, report.html).",
        *filter(None, [partial_note(summaries)]),
    )
    header = ["run", "APR (%) [95% CI]", "ARS", "MCC", "calls/task", "reward"]
    return Table(f"Overall [{scoring_note(summaries)}]", header, mark_best(rows, [True] * len(rows)), notes)


def render_console(table: Table) -> str:
    """``render_text`` with the title and notes wrapped to CONSOLE_WIDTH."""
    title, *rest = render_text(Table(table.title, table.header, table.rows)).split("\n")
    lines = textwrap.wrap(title, CONSOLE_WIDTH) + rest
    for note in table.notes:
        lines += textwrap.wrap(note, CONSOLE_WIDTH, initial_indent="> ", subsequent_indent="> ")
    return "\n".join(lines)


def print_comparison(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """Print the summary of the runs at ``paths`` (no plots: matplotlib stays unloaded); their summaries."""
    runs = [Run.load(path) for path in paths]
    summaries = [summarize_run(run, labels) for run, labels in zip(runs, pick_labels(runs), strict=True)]
    print(render_console(summary_table(summaries)))
    return summaries
