"""A self-contained HTML report: the tables, the plots, and every trajectory step by step.

One file, no network: plots and images are embedded as data URLs (images downscaled to
``max_side`` JPEG thumbnails to keep the file small). Each trajectory shows per turn the prompt
and the images the model saw, then each step's reasoning, text, tool calls (arguments, output,
error, the images they made), the final answer, and every rubric's verdict with its reason.
The page is the jinja2 template ``templates/report.html.j2`` (autoescaped); wide tables scroll in their box.
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any, Sequence

import jinja2
from markupsafe import Markup
from PIL import Image

from vtb_app.evaluation.cells import BEST, SECOND, Cell, Table
from vtb_app.evaluation.records import episode_calls, run_image_path
from vtb_app.evaluation.runs import Run

TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("vtb_app.evaluation", "templates"),
    autoescape=True,
    undefined=jinja2.ChainableUndefined,  # records are data: a missing field shows as nothing
    finalize=lambda value: "" if value is None else value,
)


def _thumbnail(path: Path, max_side: int) -> str | None:
    try:
        with Image.open(path) as image:
            image.load()
            image = image.convert("RGB")
    except Exception:  # unreadable, or a decompression bomb: shown as unreadable, never a crash
        return None
    image.thumbnail((max_side, max_side))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=80)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()


class _Images:
    """Thumbnails of a run's stored images, each encoded once."""

    def __init__(self, run_dir: Path, max_side: int):
        self.run_dir, self.max_side, self._cache = run_dir, max_side, {}

    def tag(self, name: str, relpath: str | None, css: str) -> Markup:
        if not relpath:
            return Markup('<span class="missing">[{}: not stored]</span>').format(name)
        if relpath not in self._cache:
            path = run_image_path(self.run_dir, relpath)
            self._cache[relpath] = _thumbnail(path, self.max_side) if path is not None else None
        url = self._cache[relpath]
        if url is None:
            return Markup('<span class="missing">[{}: unreadable]</span>').format(name)
        return Markup('<img class="{}" src="{}" alt="{}" title="{}">').format(css, url, name, name)


def _cell_class(cell: Any) -> Markup:
    """A ranked or partially judged ``Cell``'s class attribute (best, second, partial)."""
    if not isinstance(cell, Cell):
        return Markup()
    classes = [{BEST: "best", SECOND: "second"}.get(cell.rank, ""), "partial" if cell.partial else ""]
    css = " ".join(c for c in classes if c)
    return Markup(' class="{}"').format(css) if css else Markup()


def _arguments_text(arguments: Any) -> str:
    """A tool call's code as written, other arguments as JSON."""
    if isinstance(arguments, dict) and "code" in arguments:
        return str(arguments["code"])
    return json.dumps(arguments, indent=1, ensure_ascii=False, default=str)


def write_html(
    path: Path,
    runs: Sequence[Run],
    tables: Sequence[Table],
    plots: Sequence[Path],
    *,
    max_side: int = 360,  # the size the page shows images at
    max_trajectories: int | None = None,
) -> Path:
    """Write the report to ``path``; returns it."""
    document = TEMPLATES.get_template("report.html.j2").render(
        tables=tables,
        plots=[(p.stem, "data:image/png;base64," + base64.b64encode(p.read_bytes()).decode()) for p in plots],
        runs=[
            {
                "name": run.name,
                "records": run.records,
                "errors": run.errors,
                "shown": sorted(run.records, key=lambda r: r["key"])[:max_trajectories],
                "images": _Images(run.path, max_side),
            }
            for run in runs
        ],
        cell_class=_cell_class,
        arguments_text=_arguments_text,
        tool_calls=lambda record: len(episode_calls(record)),
    )
    path.write_text(document, encoding="utf-8")
    return path
