"""PNG plots in the spirit of the paper's figures 3, 4 and 6 (matplotlib, headless Agg backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from vtb_app.evaluation.image_ops import CATEGORIES  # noqa: E402


def _grouped_bars(ax: Any, categories: Sequence[str], series: dict[str, list[float]], label_fmt: str) -> None:
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        xs = [c + (i - (len(series) - 1) / 2) * width for c in range(len(categories))]
        bars = ax.bar(xs, values, width, label=name)
        ax.bar_label(bars, labels=[label_fmt.format(v) for v in values], fontsize=7)
    ax.set_xticks(range(len(categories)), categories, rotation=20, ha="right", fontsize=8)
    ax.legend(fontsize=8)


def plot_apr_by_category(summaries: Sequence[dict[str, Any]], path: Path) -> Path:
    """Figure 3: APR per task category, one bar per run."""
    focuses = sorted({f for s in summaries for f in s["by_eval_focus"]})
    series = {s["name"]: [100 * (s["by_eval_focus"].get(f, {}).get("apr") or 0.0) for f in focuses] for s in summaries}
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(focuses)), 4))
    _grouped_bars(ax, focuses, series, "{:.1f}")
    ax.set_ylabel("APR (%)")
    ax.set_title("APR by task category")
    return _save(fig, path)


def plot_apr_vs_tool_use(summaries: Sequence[dict[str, Any]], path: Path) -> Path:
    """Figure 4: APR against tool-use proactivity (left) and calls per task (right), one point per run."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    for ax, key, label in (
        (axes[0], "proactivity", "tool-use proactivity"),
        (axes[1], "volume", "tool calls per task"),
    ):
        for s in summaries:
            x = s["tool_use"]["overall"][key] or 0.0
            y = 100 * (s["apr"] or 0.0)
            ax.scatter([x], [y], s=40)
            ax.annotate(s["name"], (x, y), fontsize=7, xytext=(4, 4), textcoords="offset points")
        ax.set_xlabel(label)
        ax.set_ylabel("APR (%)")
        ax.grid(alpha=0.3)
    fig.suptitle("APR and tool use")
    return _save(fig, path)


def plot_image_operations(summaries: Sequence[dict[str, Any]], path: Path) -> Path:
    """Figure 6: counts of the image operations python_image_processing code performs (``image_ops``)."""
    operations = list(CATEGORIES)
    series = {s["name"]: [float(s["image_operations"].get(op, 0)) for op in operations] for s in summaries}
    fig, ax = plt.subplots(figsize=(8, 4))
    _grouped_bars(ax, operations, series, "{:.0f}")
    ax.set_ylabel("operations")
    ax.set_title("Image manipulation operations")
    return _save(fig, path)


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_plots(summaries: Sequence[dict[str, Any]], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    return [
        plot_apr_by_category(summaries, out_dir / "apr_by_category.png"),
        plot_apr_vs_tool_use(summaries, out_dir / "apr_vs_tool_use.png"),
        plot_image_operations(summaries, out_dir / "image_operations.png"),
    ]
