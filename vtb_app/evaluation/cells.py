"""Report table cells: the paper's decimals, spread, n, partial-judging markers, best / second best.

A ``Table`` holds rows of plain values and ``Cell`` objects; Markdown (``render_text``) and HTML
(``html``) render the same cells. Decimals follow the paper: APR in percent with 2 (table 3),
ARS with 4 (table 6), proactivity and success rate with 4 and volume with 2 (table 7).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from tabulate import tabulate

PARTIAL = "†"  # the cell counts unjudged rubrics as not Met
BEST, SECOND = 1, 2


@dataclass(frozen=True)
class Cell:
    """One shown number. ``value`` ranks it (higher is better; None: not ranked); ``partial``: it
    counts episodes whose judging is incomplete; ``rank``: 1 best, 2 second best in its column."""

    text: str
    value: float | None = None
    partial: bool = False
    rank: int = 0

    def __str__(self) -> str:
        return self.text + (PARTIAL if self.partial else "")


@dataclass(frozen=True)
class Table:
    title: str
    header: list[str]
    rows: list[list[Any]]
    notes: tuple[str, ...] = field(default=())

    def with_note(self, note: str) -> "Table":
        return replace(self, title=f"{self.title} [{note}]")


def fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def pct(value: float | None, digits: int = 2) -> str:
    """A share as a percentage with the paper's 2 decimals, without the sign (the header says %)."""
    return "n/a" if value is None else f"{100 * value:.{digits}f}"


def metric_cell(group: Mapping[str, Any] | None, metric: str, *, n: bool = False, spread: bool = True) -> Cell:
    """APR (percent, 2 decimals) or ARS (4 decimals) of a group (``stats.group_stats``), with
    ``± std`` across samples when there are several, ``(n=tasks)`` on request, and the partial marker."""
    if not group or group.get(metric) is None:
        return Cell("n/a")
    show = pct if metric.startswith("apr") else fmt
    scale = 100 if metric.startswith("apr") else 1
    text = show(group[metric])
    std = group.get(f"{metric}_std")
    if spread and std is not None:
        text += f" ± {scale * std:.{2 if scale == 100 else 4}f}"
    if n:
        text += f" (n={group['n']})"
    return Cell(text, group[metric], partial=bool(group.get("n_incomplete")))


def ci_cell(group: Mapping[str, Any], metric: str) -> Cell:
    interval = group.get(f"{metric}_ci")
    if not interval:
        return Cell("n/a")
    show = pct if metric == "apr" else fmt
    return Cell(f"[{show(interval[0])}, {show(interval[1])}]")


def number_cell(value: float | None, digits: int = 4) -> Cell:
    return Cell(fmt(value, digits), value)


def mark_best(rows: Sequence[Sequence[Any]], main: Sequence[bool]) -> list[list[Any]]:
    """Mark, per column, the best ranked cell (and the second best when 3+ runs are compared)
    among the ``main`` rows (per-trial rows are not ranked); ties share the mark."""
    rows = [list(row) for row in rows]
    for column in range(max((len(row) for row in rows), default=0)):
        values = sorted(
            {
                row[column].value
                for row, is_main in zip(rows, main, strict=True)
                if is_main and column < len(row) and isinstance(row[column], Cell) and row[column].value is not None
            },
            reverse=True,
        )
        ranked = sum(
            1
            for row, is_main in zip(rows, main, strict=True)
            if is_main and column < len(row) and isinstance(row[column], Cell) and row[column].value is not None
        )
        if ranked < 2 or len(values) < 2:  # one run, or every run the same: nothing stands out
            continue
        marks = {values[0]: BEST, **({values[1]: SECOND} if ranked >= 3 and len(values) >= 2 else {})}
        for row, is_main in zip(rows, main, strict=True):
            cell = row[column] if column < len(row) else None
            if is_main and isinstance(cell, Cell) and cell.value in marks:
                row[column] = replace(cell, rank=marks[cell.value])
    return rows


def table_marks(tables: Sequence[Table]) -> dict[str, dict[str, dict[str, list[str]]]]:
    """What the rendered tables mark, for ``summary.json``: per table title and column, the rows
    (run names) marked ``best`` / ``second`` and those counting unjudged rubrics (``partial``)."""
    marks: dict[str, dict[str, dict[str, list[str]]]] = {}
    for table in tables:
        for row in table.rows:
            for column, cell in zip(table.header, row, strict=False):
                if not isinstance(cell, Cell):
                    continue
                kinds = [{BEST: "best", SECOND: "second"}.get(cell.rank), "partial" if cell.partial else None]
                for kind in filter(None, kinds):
                    marks.setdefault(table.title, {}).setdefault(column, {}).setdefault(kind, []).append(str(row[0]))
    return marks


def markdown(cell: Any) -> str:
    text = str(cell)
    if isinstance(cell, Cell) and cell.rank == BEST:
        return f"**{text}**"
    if isinstance(cell, Cell) and cell.rank == SECOND:
        return f"_{text}_"
    return text


def render_text(table: Table) -> str:
    """The table as GitHub Markdown: title line, table, then its notes as quoted lines (a quote ends
    the table in GitHub's renderer; no blank line inside, so tables are split on blank lines)."""
    rows = [[markdown(cell) for cell in row] for row in table.rows]
    body = tabulate(rows, headers=table.header, tablefmt="github", disable_numparse=True)
    notes = "".join(f"\n> {note}" for note in table.notes)
    return f"{table.title}\n{body}{notes}"
