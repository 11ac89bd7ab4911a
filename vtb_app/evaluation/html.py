"""A self-contained HTML report: the tables, the plots, and every trajectory step by step.

One file, no network: plots and images are embedded as data URLs (images downscaled to
``max_side`` JPEG thumbnails to keep the file small). Each trajectory shows per turn the prompt
and the images the model saw, then each step's reasoning, text, tool calls (arguments, output,
error, the images they made), the final answer, and every rubric's verdict with its reason.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from PIL import Image

from vtb_app.evaluation.cells import BEST, SECOND, Cell, Table
from vtb_app.evaluation.metrics import Run
from vtb_app.evaluation.records import episode_calls, run_image_path

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f2f2f2}
.pass{color:#1a7f37;font-weight:bold}.fail{color:#c62828;font-weight:bold}
.Met{background:#e6f4ea}.Not-Met{background:#fdecea}.judge_error{background:#fff4e5}
details.trajectory{border:1px solid #ddd;border-radius:6px;margin:.4em 0;padding:.3em .8em}
details.trajectory>summary{cursor:pointer;font-weight:600}
.step{border-left:3px solid #9ab;margin:.5em 0;padding-left:.7em}
.call{background:#f7f9fb;border:1px solid #e3e8ee;padding:.4em;margin:.3em 0}
.call.error{border-color:#e57373}
pre{white-space:pre-wrap;word-break:break-word;background:#fafafa;padding:.4em;margin:.2em 0;font-size:12px}
img{max-width:360px;max-height:360px;border:1px solid #ccc;margin:2px}
.plots img{max-width:560px;max-height:none}
table.summary td{white-space:nowrap}
td.best{background:#f8c9c4}td.second{background:#c9dcf8}td.partial{text-decoration:underline dotted}
p.note{font-size:12px;color:#555;margin:-1em 0 1.2em}
"""


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


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

    def tag(self, name: str, relpath: str | None, css: str) -> str:
        if not relpath:
            return f'<span class="missing">[{_esc(name)}: not stored]</span>'
        if relpath not in self._cache:
            path = run_image_path(self.run_dir, relpath)
            self._cache[relpath] = _thumbnail(path, self.max_side) if path is not None else None
        url = self._cache[relpath]
        if url is None:
            return f'<span class="missing">[{_esc(name)}: unreadable]</span>'
        return f'<img class="{css}" src="{url}" alt="{_esc(name)}" title="{_esc(name)}">'


def _cell_html(cell: Any) -> str:
    """A table cell; a ranked or partially judged ``Cell`` carries its class (best, second, partial)."""
    if not isinstance(cell, Cell):
        return f"<td>{_esc(cell)}</td>"
    classes = [{BEST: "best", SECOND: "second"}.get(cell.rank, ""), "partial" if cell.partial else ""]
    css = " ".join(c for c in classes if c)
    return f'<td class="{css}">{_esc(cell)}</td>' if css else f"<td>{_esc(cell)}</td>"


def _table_html(table: Table) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in table.header)
    body = "".join("<tr>" + "".join(_cell_html(c) for c in row) + "</tr>" for row in table.rows)
    notes = "".join(f'<p class="note">{_esc(note)}</p>' for note in table.notes)
    return f'<h3>{_esc(table.title)}</h3><table class="summary"><tr>{head}</tr>{body}</table>{notes}'


def _call_html(call: Mapping[str, Any], images: _Images, files: Mapping[str, str]) -> str:
    arguments = call.get("arguments")
    shown = (
        arguments.get("code")
        if isinstance(arguments, Mapping) and "code" in arguments
        else json.dumps(arguments, indent=1, ensure_ascii=False)
    )
    made = "".join(images.tag(i["name"], files.get(i["name"]), "made") for i in call.get("images", []))
    error = (
        f'<div class="fail">error ({_esc(call.get("error_kind"))}): {_esc(call.get("error"))}</div>'
        if call.get("error")
        else ""
    )
    css = "call error" if call.get("error") else "call"
    return (
        f'<div class="{css}"><b>{_esc(call.get("name"))}</b> <small>{call.get("latency_s", 0):.2f}s</small>'
        f"<pre>{_esc(shown)}</pre>{error}<details><summary>output</summary><pre>{_esc(call.get('output'))}</pre></details>{made}</div>"
    )


def _verdicts_html(verdicts: Sequence[Mapping[str, Any]]) -> str:
    rows = "".join(
        f'<tr class="{_esc(str(v.get("status")).replace(" ", "-"))}">'
        f"<td>{_esc(v.get('description'))}</td><td>{_esc(v.get('weight'))}</td>"
        f"<td>{'yes' if v.get('critical') else ''}</td><td>{_esc(v.get('status'))}</td>"
        f"<td>{_esc(v.get('explanation') or v.get('error'))}</td></tr>"
        for v in verdicts
    )
    return (
        '<table class="verdicts">'
        "<tr><th>rubric</th><th>weight</th><th>critical</th><th>verdict</th><th>reason</th></tr>"
        f"{rows}</table>"
    )


def _trajectory_html(record: Mapping[str, Any], images: _Images) -> str:
    task, score = record["task"], record["score"]
    files = record.get("image_files") if isinstance(record.get("image_files"), Mapping) else {}
    verdict = '<span class="pass">PASS</span>' if score["passed"] else '<span class="fail">FAIL</span>'
    reward = f" · reward {record['reward']:.2f}" if record.get("reward") is not None else ""
    parts = [
        f'<details class="trajectory" data-key="{_esc(record["key"])}" '
        f'data-passed="{str(bool(score["passed"])).lower()}">'
        f"<summary>{verdict} {_esc(record['key'])} · {_esc(task.get('turncase'))} · {_esc(task.get('domain'))} · "
        f"{_esc(task.get('eval_focus'))} · score {score['score']:.2f}{reward} · "
        f"{len(episode_calls(record))} tool calls</summary>"
    ]
    turns = record.get("episode", {}).get("turns", [])
    for t, turn_task in enumerate(task.get("turns", [])):
        parts.append(f'<h4>Turn {t + 1}</h4><div class="prompt"><b>User:</b><pre>{_esc(turn_task.get("prompt"))}</pre>')
        parts.append(
            "".join(images.tag(name, files.get(name), "seen") for name in turn_task.get("images", [])) + "</div>"
        )
        turn = turns[t] if t < len(turns) else {"steps": []}
        for s, step in enumerate(turn.get("steps", [])):
            parts.append(f'<div class="step"><b>Step {s + 1}</b>')
            if step.get("reasoning"):
                parts.append(f"<details><summary>reasoning</summary><pre>{_esc(step['reasoning'])}</pre></details>")
            if step.get("action_text"):
                parts.append(f"<pre>{_esc(step['action_text'])}</pre>")
            parts.extend(_call_html(call, images, files) for call in step.get("tool_calls", []))
            parts.extend(f'<div class="fail">parse error: {_esc(e)}</div>' for e in step.get("parse_errors", []))
            parts.append("</div>")
        answers = record.get("answers", [])
        answer = answers[t] if t < len(answers) else None
        parts.append(
            '<div class="answer"><b>Final answer:</b>'
            f"<pre>{_esc(answer if answer is not None else '(none)')}</pre></div>"
        )
        golden = turn_task.get("golden_answer")
        if golden:
            parts.append(f"<details><summary>golden answer</summary><pre>{_esc(golden)}</pre></details>")
        verdicts = record.get("verdicts", [])
        parts.append(_verdicts_html(verdicts[t] if t < len(verdicts) else []))
    parts.append("</details>")
    return "".join(parts)


def write_html(
    path: Path,
    runs: Sequence[Run],
    tables: Sequence[Table],
    plots: Sequence[Path],
    *,
    max_side: int = 480,
    max_trajectories: int | None = None,
) -> Path:
    """Write the report to ``path``; returns it."""
    plot_tags = "".join(
        f'<img class="plot" src="data:image/png;base64,{base64.b64encode(p.read_bytes()).decode()}" '
        f'alt="{_esc(p.stem)}">'
        for p in plots
    )
    body = ["<h1>VisualToolBench evaluation report</h1>", f"<h2>Summary</h2>{''.join(_table_html(t) for t in tables)}"]
    body.append(f'<h2>Plots</h2><div class="plots">{plot_tags}</div>')
    for run in runs:
        images = _Images(run.path, max_side)
        records = sorted(run.records, key=lambda r: r["key"])[:max_trajectories]
        body.append(
            f'<h2 class="run">Trajectories: {_esc(run.name)} '
            f"({len(run.records)} records, {len(run.errors)} errors)</h2>"
        )
        body.extend(_trajectory_html(record, images) for record in records)
        for error in run.errors:
            body.append(f'<div class="fail error-record">{_esc(error["key"])}: {_esc(error.get("error"))}</div>')
    document = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>VTB report</title>'
        f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>"
    )
    path.write_text(document, encoding="utf-8")
    return path
