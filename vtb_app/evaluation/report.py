"""``write_report``: one or more runs side by side as text tables, JSON, PNG plots and HTML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from vtb_app.evaluation.cells import render_text, table_marks
from vtb_app.evaluation.html import write_html
from vtb_app.evaluation.metrics import summarize_run
from vtb_app.evaluation.modes import pick_labels
from vtb_app.evaluation.plots import write_plots
from vtb_app.evaluation.runs import Run
from vtb_app.evaluation.tables import all_tables
from vtb_rewards.mode import ModeLabelStore


def write_report(
    runs: Sequence[tuple[str | None, Path]],
    out_dir: Path,
    *,
    max_trajectories: int | None = None,
    mode_labels: ModeLabelStore | None = None,
    per_trial: bool = False,
    mcc_reading: str = "any",
    label_rule: str = "any",
) -> dict[str, Path]:
    """Write ``tables.md``, ``summary.json``, ``*.png`` and ``report.html`` to ``out_dir``.

    Mode-selection labels per episode (``modes.episode_mode_label``): the run model's own
    text-only labels first (``mode_labels`` from ``vtb label-modes`` or, without a store, a
    ``no_tools`` run of the same model among ``runs``, its samples combined by ``label_rule``),
    then the label the eval run used, and the task's built-in label (synthetic tasks) only as the
    fallback. ``mcc_reading``: what counts as using tools for MCC (``modes.MCC_READINGS``);
    ``per_trial``: APR / ARS of each sample beside the mean.
    """
    loaded = [Run.load(path, name) for name, path in runs]
    labels = pick_labels(loaded, mode_labels, label_rule)
    summaries = [
        summarize_run(run, run_labels, mcc_reading=mcc_reading, label_rule=label_rule)
        for run, run_labels in zip(loaded, labels, strict=True)
    ]
    tables = all_tables(summaries, per_trial)
    out_dir.mkdir(parents=True, exist_ok=True)
    text = out_dir / "tables.md"
    text.write_text("\n\n".join(render_text(table) for table in tables) + "\n")
    summary = out_dir / "summary.json"
    source = str(mode_labels.path) if mode_labels is not None else "text-only (no_tools) runs of the same model"
    summary.write_text(
        json.dumps(
            {
                "mode_labels": source,
                "label_rule": label_rule,
                "mcc_reading": mcc_reading,
                "runs": summaries,
                "marks": table_marks(tables),
            },
            indent=2,
        )
    )
    plots = write_plots(summaries, out_dir)
    html = write_html(out_dir / "report.html", loaded, tables, plots, max_trajectories=max_trajectories)
    return {"text": text, "summary": summary, "html": html, **{p.stem: p for p in plots}}
