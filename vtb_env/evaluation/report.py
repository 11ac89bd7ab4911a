"""``write_report``: one or more runs side by side as text tables, JSON, PNG plots and HTML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from vtb_env.evaluation.html import write_html
from vtb_env.evaluation.metrics import Run, pick_labels, summarize
from vtb_env.evaluation.plots import write_plots
from vtb_env.evaluation.tables import all_tables, render_text


def write_report(runs: Sequence[tuple[str | None, Path]], out_dir: Path, *, max_trajectories: int | None = None) -> dict[str, Path]:
    """Write ``tables.md``, ``summary.json``, ``*.png`` and ``report.html`` to ``out_dir``.

    Mode-selection labels come from a ``no_tools`` run among ``runs`` when there is one (the
    seed's per-model labels), else from each task's own ``mode_label``.
    """
    loaded = [Run.load(path, name) for name, path in runs]
    labels = pick_labels(loaded)
    summaries = [summarize(run, labels) for run in loaded]
    tables = all_tables(summaries)
    out_dir.mkdir(parents=True, exist_ok=True)
    text = out_dir / "tables.md"
    text.write_text("\n\n".join(render_text(table) for table in tables) + "\n")
    summary = out_dir / "summary.json"
    summary.write_text(json.dumps({"mode_labels": "no_tools run" if labels else "task mode_label", "runs": summaries}, indent=2))
    plots = write_plots(summaries, out_dir)
    html = write_html(out_dir / "report.html", loaded, tables, plots, max_trajectories=max_trajectories)
    return {"text": text, "summary": summary, "html": html, **{p.stem: p for p in plots}}
