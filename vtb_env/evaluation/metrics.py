"""The paper's numbers from a run's records: APR/ARS (tables 3, 6), tool use (table 7),
mode selection (confusion matrix, MCC), process metrics, failure kinds, image operations (fig. 6).

Everything here reads the JSON records written by ``vtb eval`` (see ``runner``), so any run,
ours or imported from the official toolkit, is summarised the same way.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from rewards.mode import ConfusionMatrix, label_from_text_only, mode_outcome
from vtb_env.evaluation.records import latest_records, read_config, RECORDS_FILE

TURNCASES = ("single-turn", "multi-turn")
DOMAIN_COLUMNS = ("STEM", "Medical", "Finance", "Sports", "Generalist")

# Figure 6's eight operation categories, recognised in python_image_processing code.
IMAGE_OPERATIONS: dict[str, re.Pattern[str]] = {
    "crop": re.compile(r"\.crop\(|\[\s*\d*\s*:\s*\d*\s*,\s*\d*\s*:|\bcrop", re.I),
    "resize": re.compile(r"\.resize\(|\.thumbnail\(|cv2\.resize|zoom|\.scale\(", re.I),
    "rotation": re.compile(r"\.rotate\(|\.transpose\(\s*Image\.ROTATE|cv2\.rotate|warpAffine|rot90", re.I),
    "flipping": re.compile(r"FLIP_|cv2\.flip|\bflip|mirror", re.I),
    "brightness": re.compile(r"Brightness|brighten|gamma|convertScaleAbs", re.I),
    "contrast": re.compile(r"Contrast|equalize|autocontrast|CLAHE|threshold|Sharpness|sharpen|UnsharpMask", re.I),
    "editing": re.compile(r"ImageDraw|\.rectangle\(|\.line\(|\.text\(|inpaint|\.paste\(|cv2\.putText|cv2\.circle", re.I),
}


@dataclass
class Run:
    """One run directory's records (the record that counts per key) and configuration."""

    name: str
    path: Path
    config: dict[str, Any]
    records: list[dict[str, Any]]  # status "ok" only
    errors: list[dict[str, Any]]  # keys whose latest record is an error

    @classmethod
    def load(cls, path: str | Path, name: str | None = None) -> "Run":
        path = Path(path)
        if not (path / RECORDS_FILE).exists():
            raise FileNotFoundError(f"{path}: no {RECORDS_FILE} (is it a `vtb eval` output directory?)")
        chosen = latest_records(path / RECORDS_FILE)
        ok = [r for r in chosen.values() if r.get("status") == "ok"]
        errors = [r for r in chosen.values() if r.get("status") != "ok"]
        config = read_config(path)
        return cls(name or config.get("name") or path.name, path, config, ok, errors)


@dataclass
class Group:
    n: int = 0
    passed: int = 0
    score: float = 0.0

    def add(self, record: Mapping[str, Any]) -> None:
        self.n += 1
        self.passed += bool(record["score"]["passed"])
        self.score += float(record["score"]["score"])

    @property
    def apr(self) -> float | None:
        return self.passed / self.n if self.n else None

    @property
    def ars(self) -> float | None:
        return self.score / self.n if self.n else None


@dataclass
class ToolUse:
    tasks: int = 0
    tasks_with_calls: int = 0
    calls: int = 0
    ok_calls: int = 0
    by_tool: Counter = field(default_factory=Counter)

    def add(self, record: Mapping[str, Any]) -> None:
        calls = episode_calls(record)
        self.tasks += 1
        self.tasks_with_calls += bool(calls)
        self.calls += len(calls)
        self.ok_calls += sum(1 for call in calls if not call.get("error"))
        self.by_tool.update(call.get("name", "?") for call in calls)

    @property
    def proactivity(self) -> float | None:
        return self.tasks_with_calls / self.tasks if self.tasks else None

    @property
    def success_rate(self) -> float | None:
        return self.ok_calls / self.calls if self.calls else None

    @property
    def volume(self) -> float | None:
        return self.calls / self.tasks if self.tasks else None


def episode_calls(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        call
        for turn in record.get("episode", {}).get("turns", [])
        for step in turn.get("steps", [])
        for call in step.get("tool_calls", [])
    ]


def image_operations(record: Mapping[str, Any]) -> Counter:
    """Figure 6: operation categories found in the episode's python_image_processing code."""
    counts: Counter = Counter()
    for call in episode_calls(record):
        if call.get("name") != "python_image_processing":
            continue
        arguments = call.get("arguments")
        code = arguments.get("code", "") if isinstance(arguments, Mapping) else str(arguments)
        found = [name for name, pattern in IMAGE_OPERATIONS.items() if pattern.search(code)]
        counts.update(found or ["others"])
    return counts


def failure_kind(record: Mapping[str, Any]) -> str | None:
    """Why a task failed, from the trajectory (not the paper's LLM-labelled error types)."""
    if record["score"]["passed"]:
        return None
    turns = record.get("episode", {}).get("turns", [])
    if any(turn.get("hit_tool_cap") for turn in turns):
        return "hit tool-call cap"
    if any(answer is None or not str(answer).strip() for answer in record.get("answers", [])):
        return "no final answer"
    if record["score"].get("n_judge_errors"):
        return "judge error"
    calls = episode_calls(record)
    if calls and all(call.get("error") for call in calls):
        return "every tool call failed"
    return "critical rubric not met"


def mode_labels_from_text_only(run: Run) -> dict[str, str]:
    """Per-task labels from a text-only run (seed 000): passed without tools -> tool_redundant."""
    return {r["task_id"]: label_from_text_only(bool(r["score"]["passed"])) for r in run.records}


def summarize(run: Run, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """All report numbers for one run. ``labels`` (task id -> mode label) override the tasks' own."""
    overall = Group()
    by_turncase_domain: dict[str, dict[str, Group]] = defaultdict(lambda: defaultdict(Group))
    by_focus: dict[str, Group] = defaultdict(Group)
    tool_use = {case: ToolUse() for case in TURNCASES}
    outcomes, failures, operations = [], Counter(), Counter()
    kcoverage, effectiveness = [], []
    for record in run.records:
        task = record["task"]
        overall.add(record)
        by_turncase_domain[task["turncase"]][task["domain"]].add(record)
        by_turncase_domain[task["turncase"]]["all"].add(record)
        by_focus[task.get("eval_focus") or "unknown"].add(record)
        tool_use.setdefault(task["turncase"], ToolUse()).add(record)
        label = (labels or {}).get(record["task_id"]) or task.get("mode_label")
        if label:
            outcomes.append(mode_outcome(label, bool(episode_calls(record))))
        failures[failure_kind(record) or "passed"] += 1
        operations.update(image_operations(record))
        process = record.get("process") or {}
        if process.get("kcoverage") is not None:
            kcoverage.append(float(process["kcoverage"]))
        if process.get("tool_effectiveness") is not None:
            effectiveness.append(float(process["tool_effectiveness"]))
    all_tools = ToolUse()
    for record in run.records:
        all_tools.add(record)
    matrix = ConfusionMatrix.from_outcomes(outcomes)
    return {
        "name": run.name,
        "n": overall.n,
        "n_errors": len(run.errors),
        "apr": overall.apr,
        "ars": overall.ars,
        "by_turncase_domain": {
            case: {domain: {"n": g.n, "apr": g.apr, "ars": g.ars} for domain, g in groups.items()}
            for case, groups in by_turncase_domain.items()
        },
        "by_eval_focus": {focus: {"n": g.n, "apr": g.apr, "ars": g.ars} for focus, g in sorted(by_focus.items())},
        "tool_use": {
            case: {"proactivity": t.proactivity, "success_rate": t.success_rate, "volume": t.volume, "calls": t.calls}
            for case, t in {**tool_use, "overall": all_tools}.items()
        },
        "tools_by_name": dict(all_tools.by_tool.most_common()),
        "mode_selection": matrix.to_dict() if matrix.n else None,
        "kcoverage": sum(kcoverage) / len(kcoverage) if kcoverage else None,
        "tool_effectiveness": sum(effectiveness) / len(effectiveness) if effectiveness else None,
        "failures": dict(failures.most_common()),
        "image_operations": dict(operations.most_common()),
        "agent": run.config.get("agent", {}).get("name") if isinstance(run.config.get("agent"), Mapping) else run.config.get("agent"),
        "judge": run.config.get("judge"),
    }


def pick_labels(runs: Iterable[Run]) -> dict[str, str] | None:
    """Labels from a text-only run among ``runs`` (its config says ``tools: none``), if there is one."""
    for run in runs:
        if run.config.get("ablation") == "no_tools":
            return mode_labels_from_text_only(run)
    return None
