"""A run directory as the reports read it, and the groups a task is reported in.

``Run.load`` keeps the record that counts per (task, sample) key (``records.latest_records``), the run's
``config.json``, and the keys the run was meant to produce (``task_index`` x ``samples``) that have no record.
A task is reported by turn case, by the paper's domain column (``report_domain``) and by category.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from vtb_app.evaluation.records import RECORDS_FILE, latest_records, read_config, record_key

DOMAIN_COLUMNS = ("STEM", "Medical", "Finance", "Sports", "Generalist")  # the paper's order (tables 3, 6)

# Raw domain names seen in data and their paper column (table 3/6); anything else is "Other".
_DOMAIN_ALIASES = {
    "stem": "STEM",
    "science": "STEM",
    "chemistry": "STEM",
    "maths": "STEM",
    "math": "STEM",
    "mathematics": "STEM",
    "biology": "STEM",
    "engineering": "STEM",
    "physics": "STEM",
    "medical": "Medical",
    "medicine": "Medical",
    "med": "Medical",
    "health": "Medical",
    "healthcare": "Medical",
    "finance": "Finance",
    "financial": "Finance",
    "fin": "Finance",
    "economics": "Finance",
    "sports": "Sports",
    "sport": "Sports",
    "sprt": "Sports",
    "spt": "Sports",
    "generalist": "Generalist",
    "general": "Generalist",
    "gen": "Generalist",
    "": "Generalist",
}
OTHER_DOMAIN = "Other"


def report_domain(domain: Any) -> str:
    """The paper column of a task's domain (``medicine`` -> Medical, ``sport`` -> Sports, ...);
    unknown names land in "Other", which every report shows when it is not empty."""
    return _DOMAIN_ALIASES.get(" ".join(str(domain or "").split()).lower(), OTHER_DOMAIN)


@dataclass
class Run:
    """One run directory's records (the record that counts per key) and configuration.

    ``missing``: the (task, sample) keys the run was meant to produce (``config.json``'s
    ``task_index`` x ``samples``) that have no record at all, as ``(key, task_id, sample)``.
    """

    name: str
    path: Path
    config: dict[str, Any]
    records: list[dict[str, Any]]  # status "ok" only
    errors: list[dict[str, Any]]  # keys whose latest record is an error
    missing: list[tuple[str, str, int]] = field(default_factory=list)

    @classmethod
    def load(cls, path: str | Path, name: str | None = None) -> "Run":
        path = Path(path)
        if not (path / RECORDS_FILE).exists():
            raise FileNotFoundError(f"{path}: no {RECORDS_FILE} (is it a `vtb eval` output directory?)")
        chosen = latest_records(path / RECORDS_FILE)
        ok = [r for r in chosen.values() if r.get("status") == "ok"]
        errors = [r for r in chosen.values() if r.get("status") != "ok"]
        config = read_config(path)
        index = config.get("task_index") if isinstance(config.get("task_index"), dict) else {}
        samples = int(config.get("samples") or 1)
        missing = [
            (record_key(tid, s), tid, s) for tid in index for s in range(samples) if record_key(tid, s) not in chosen
        ]
        return cls(name or config.get("name") or path.name, path, config, ok, errors, missing)

    @property
    def samples(self) -> int:
        """Samples per task: the run's ``--samples`` (or, for runs without it, the most any task has)."""
        seen = [sample_of(r) + 1 for r in (*self.records, *self.errors)]
        return max([int(self.config.get("samples") or 1), *seen])

    def task_groups(self, task_id: str, record: Mapping[str, Any] | None = None) -> tuple[str, str, str]:
        """(turn case, paper domain, category) of a task, from its record or the run's task index."""
        task = (record or {}).get("task") if isinstance((record or {}).get("task"), Mapping) else None
        if task is not None:
            return (
                str(task.get("turncase")),
                report_domain(task.get("domain")),
                str(task.get("eval_focus") or "unknown"),
            )
        turncase, domain, focus = (self.config.get("task_index") or {}).get(task_id) or ("unknown", "", "unknown")
        return str(turncase), report_domain(domain), str(focus)


def sample_of(record: Mapping[str, Any]) -> int:
    """The record's sample number (0 where it has none or an unreadable one)."""
    try:
        return int(record.get("sample") or 0)
    except (TypeError, ValueError):
        return 0


def task_index(tasks: Any) -> dict[str, list[str]]:
    """Task id -> [turn case, domain, category]: the run's denominators, kept in ``config.json``
    so a report counts tasks that never produced a record."""
    return {task.id: [task.turncase, task.domain, task.eval_focus or "unknown"] for task in tasks}
