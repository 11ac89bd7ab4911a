"""``--task-filter``: which of the loaded tasks a run trains or evaluates on.

A filter is comma-separated clauses ``key=value|value...``; a task is kept when every clause
matches one of its values::

    turns=1                       single-turn tasks
    label=tool_redundant          tasks answerable from the pictures as shown (alias: redundant)
    variant=map|portfolio         the synthetic generator's variants (task.metadata["variant"])
    turns=1|2,label=required      both

Unknown keys and impossible values are errors that say what is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from vtb_env.tasks import Task

LABELS = {
    "tool_required": "tool_required",
    "required": "tool_required",
    "tool_redundant": "tool_redundant",
    "redundant": "tool_redundant",
}


def _turns(values: list[str]) -> Callable[[Task], bool]:
    try:
        wanted = {int(v) for v in values}
    except ValueError:
        raise ValueError(f"turns takes whole numbers (turns=1|2), got {'|'.join(values)!r}") from None
    return lambda task: len(task.turns) in wanted


def _label(values: list[str]) -> Callable[[Task], bool]:
    unknown = [v for v in values if v not in LABELS]
    if unknown:
        raise ValueError(f"label {unknown[0]!r} is not one of {sorted(LABELS)}")
    wanted = {LABELS[v] for v in values}
    return lambda task: task.mode_label in wanted


def _variant(values: list[str]) -> Callable[[Task], bool]:
    wanted = set(values)
    return lambda task: task.metadata.get("variant") in wanted


CLAUSES: dict[str, Callable[[list[str]], Callable[[Task], bool]]] = {
    "turns": _turns,
    "label": _label,
    "variant": _variant,
}


@dataclass(frozen=True)
class TaskFilter:
    """A parsed ``--task-filter``: ``keep(task)`` is True when every clause matches."""

    spec: str
    clauses: tuple[tuple[str, frozenset[str], Callable[[Task], bool]], ...]

    @classmethod
    def parse(cls, spec: str) -> "TaskFilter":
        clauses = []
        for clause in (c.strip() for c in spec.split(",")):
            key, sep, raw = clause.partition("=")
            key = key.strip()
            values = [v.strip() for v in raw.split("|") if v.strip()]
            if not sep or not values:
                raise ValueError(f"clause {clause!r} is not key=value (keys: {', '.join(CLAUSES)})")
            if key not in CLAUSES:
                raise ValueError(f"unknown key {key!r}; filter by {', '.join(CLAUSES)}")
            clauses.append((key, frozenset(values), CLAUSES[key](values)))
        return cls(spec, tuple(clauses))

    def keep(self, task: Task) -> bool:
        return all(match(task) for _, _, match in self.clauses)

    def check_variants(self, tasks: Sequence[Task]) -> None:
        """A variant no loaded task has is a typo, not an empty selection: say which variants there are."""
        present = {t.metadata.get("variant") for t in tasks} - {None}
        for key, values, _ in self.clauses:
            missing = sorted(values - present) if key == "variant" else []
            if missing:
                raise ValueError(f"no task has variant {missing[0]!r}; the tasks' variants: {sorted(present)}")


def filter_tasks(tasks: Sequence[Task], spec: str | None) -> list[Task]:
    """The tasks ``spec`` keeps (all for None); ``ValueError`` for a bad spec or when it keeps none."""
    if not spec:
        return list(tasks)
    task_filter = TaskFilter.parse(spec)
    task_filter.check_variants(tasks)
    kept = [t for t in tasks if task_filter.keep(t)]
    if not kept:
        raise ValueError(f"{spec!r} keeps none of the {len(tasks)} tasks")
    return kept
