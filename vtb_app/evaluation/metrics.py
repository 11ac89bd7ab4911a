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

from vtb_app.evaluation.records import RECORDS_FILE, judging_complete, latest_records, read_config, record_key
from vtb_env.toolsets import VISION_TOOL
from vtb_env.trajectory import EpisodeRecord
from vtb_rewards.compose import RewardConfig
from vtb_rewards.mode import ConfusionMatrix, ModeLabelStore, label_from_text_only, mode_outcome
from vtb_rewards.process import tool_use_stats
from vtb_rewards.scoring import GroupStats

TURNCASES = ("single-turn", "multi-turn")
# The rewarded components of vtb_rewards.compose (the diagnostics in reward_components are left out).
REWARD_COMPONENTS = tuple(RewardConfig().weights())
DOMAIN_COLUMNS = ("STEM", "Medical", "Finance", "Sports", "Generalist")  # the paper's order (tables 3, 6)

# Figure 6's eight operation categories, recognised in python_image_processing code.
IMAGE_OPERATIONS: dict[str, re.Pattern[str]] = {
    "crop": re.compile(r"\.crop\(|\[\s*\d*\s*:\s*\d*\s*,\s*\d*\s*:|\bcrop", re.I),
    "resize": re.compile(r"\.resize\(|\.thumbnail\(|cv2\.resize|zoom|\.scale\(", re.I),
    "rotation": re.compile(r"\.rotate\(|\.transpose\(\s*Image\.ROTATE|cv2\.rotate|warpAffine|rot90", re.I),
    "flipping": re.compile(r"FLIP_|cv2\.flip|\bflip|mirror", re.I),
    "brightness": re.compile(r"Brightness|brighten|gamma|convertScaleAbs", re.I),
    "contrast": re.compile(r"Contrast|equalize|autocontrast|CLAHE|threshold|Sharpness|sharpen|UnsharpMask", re.I),
    "editing": re.compile(
        r"ImageDraw|\.rectangle\(|\.line\(|\.text\(|inpaint|\.paste\(|cv2\.putText|cv2\.circle", re.I
    ),
}


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
    ``task_index`` x ``samples``) that have no record at all, as ``(key, task_id)``.
    """

    name: str
    path: Path
    config: dict[str, Any]
    records: list[dict[str, Any]]  # status "ok" only
    errors: list[dict[str, Any]]  # keys whose latest record is an error
    missing: list[tuple[str, str]] = field(default_factory=list)

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
            (record_key(tid, s), tid) for tid in index for s in range(samples) if record_key(tid, s) not in chosen
        ]
        return cls(name or config.get("name") or path.name, path, config, ok, errors, missing)

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


def tool_use(records: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Appendix B.4 (proactivity, success rate, volume) over stored records, via vtb_rewards.process."""
    stats = tool_use_stats([EpisodeRecord.from_dict(r["episode"]) for r in records])
    return {
        "proactivity": stats.proactivity if stats.n_tasks else None,
        "success_rate": stats.success_rate,
        "volume": stats.volume if stats.n_tasks else None,
        "calls": stats.n_calls,
    }


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
        if call.get("name") != VISION_TOOL:
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


def run_model(config: Mapping[str, Any]) -> str | None:
    """The model a run evaluated (the agent before any ablation wrapper): the key of its mode labels."""
    if config.get("model"):
        return str(config["model"])
    agent = config.get("agent")
    if isinstance(agent, Mapping):
        inner = agent.get("inner")
        return str(inner.get("name") if isinstance(inner, Mapping) else inner or agent.get("name"))
    return str(agent) if agent else None


def text_only_results(run: Run) -> dict[str, bool]:
    """Task id -> passed, from a text-only run; tasks whose judging is incomplete are left out
    (their text-only outcome is unknown)."""
    return {r["task_id"]: bool(r["score"]["passed"]) for r in run.records if r["score"].get("complete", True)}


def mode_labels_from_text_only(run: Run) -> dict[str, str]:
    """Per-task labels from a text-only run (seed 000): passed without tools -> tool_redundant."""
    return {task_id: label_from_text_only(passed) for task_id, passed in text_only_results(run).items()}


def episode_mode_label(record: Mapping[str, Any], labels: Mapping[str, str] | None) -> tuple[str | None, str]:
    """(label, where it came from) for an episode's mode outcome.

    Seed 000: a label is the outcome of the evaluated model's own text-only pass. So ``labels``
    (a label store or a text-only run given to the report) come first, then the label the eval
    run used (``vtb eval --mode-labels``, stored in the record); a task's built-in label (the
    generator's, for synthetic tasks) is only the fallback.
    """
    for label, source in (
        ((labels or {}).get(record["task_id"]), "report labels"),
        (record.get("mode_label"), "eval labels"),
        (record["task"].get("mode_label"), "task"),
    ):
        if label:
            return label, source
    return None, "none"


def summarize_run(run: Run, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """All report numbers for one run; ``labels`` (task id -> mode label): see ``episode_mode_label``.

    Denominators (paper §3: APR is the share of ALL tasks that pass): every (task, sample) the run
    was meant to produce counts; an episode that failed for good (``error`` record) or never ran
    (no record) counts as not passed with score 0, and both counts are reported. ``apr_completed``
    / ``ars_completed`` are the same over the completed (``ok``) episodes only.
    """
    overall, completed = GroupStats(), GroupStats()
    by_turncase_domain: dict[str, dict[str, GroupStats]] = defaultdict(lambda: defaultdict(GroupStats))
    by_focus: dict[str, GroupStats] = defaultdict(GroupStats)
    by_turncase: dict[str, list[Mapping[str, Any]]] = {case: [] for case in TURNCASES}
    tools_by_name: Counter = Counter()
    outcomes, failures, operations, label_sources, error_types = [], Counter(), Counter(), Counter(), Counter()
    kcoverage, kcoverage_furthest, effectiveness = [], [], []
    rewards: list[float] = []
    components: dict[str, list[float]] = defaultdict(list)
    n_judge_incomplete = 0

    def count(task_id: str, record: Mapping[str, Any] | None, passed: bool, score: float, complete: bool) -> None:
        turncase, domain, focus = run.task_groups(task_id, record)
        for group in (
            overall,
            by_turncase_domain[turncase][domain],
            by_turncase_domain[turncase]["all"],
            by_focus[focus],
        ):
            group.add_outcome(passed, score, complete)

    for record in run.errors:
        count(record.get("task_id", ""), record, False, 0.0, True)
    for _, task_id in run.missing:
        count(task_id, None, False, 0.0, True)
    for record in run.records:
        score = record["score"]
        complete = judging_complete(record)
        n_judge_incomplete += not complete
        count(record["task_id"], record, score["passed"], score["score"], complete)
        completed.add_outcome(score["passed"], score["score"], complete)
        by_turncase.setdefault(record["task"]["turncase"], []).append(record)
        tools_by_name.update(call.get("name", "?") for call in episode_calls(record))
        label, source = episode_mode_label(record, labels)
        label_sources[source] += 1
        if label:
            outcomes.append(mode_outcome(label, bool(episode_calls(record))))
        if record.get("reward") is not None:
            rewards.append(float(record["reward"]))
            for name, value in (record.get("reward_components") or {}).items():
                if name in REWARD_COMPONENTS:
                    components[name].append(float(value))
        failures[failure_kind(record) or "passed"] += 1
        operations.update(image_operations(record))
        if record.get("error_type"):
            error_types[record["error_type"]] += 1
        process = record.get("process") or {}
        for values, name in (
            (kcoverage, "kcoverage"),
            (kcoverage_furthest, "kcoverage_furthest"),
            (effectiveness, "tool_effectiveness"),
        ):
            if process.get(name) is not None:
                values.append(float(process[name]))
    matrix = ConfusionMatrix.from_outcomes(outcomes)
    scoring = run.config.get("scoring") or {}
    return {
        "name": run.name,
        "n": overall.n,
        "n_completed": completed.n,
        "n_errors": len(run.errors),
        "n_missing": len(run.missing),
        "n_judge_incomplete": n_judge_incomplete,
        "apr": overall.apr if overall.n else None,
        "ars": overall.ars if overall.n else None,
        "apr_completed": completed.apr if completed.n else None,
        "ars_completed": completed.ars if completed.n else None,
        "n_incomplete": overall.n_incomplete,
        "scoring": {
            "critical_rule": scoring.get("critical_rule", "weight>=4"),
            "multi_turn": scoring.get("multi_turn", "pooled"),
        },
        "by_turncase_domain": {
            case: {domain: g.to_dict() for domain, g in groups.items()} for case, groups in by_turncase_domain.items()
        },
        "by_eval_focus": {focus: g.to_dict() for focus, g in sorted(by_focus.items())},
        "tool_use": {case: tool_use(records) for case, records in {**by_turncase, "overall": run.records}.items()},
        "tools_by_name": dict(tools_by_name.most_common()),
        "mode_selection": {**matrix.to_dict(), "label_sources": dict(label_sources)} if matrix.n else None,
        "reward": _mean(rewards),
        "reward_components": {name: _mean(components[name]) for name in REWARD_COMPONENTS if components[name]},
        "reward_n": len(rewards),
        "kcoverage": _mean(kcoverage),
        "kcoverage_furthest": _mean(kcoverage_furthest),
        "tool_effectiveness": _mean(effectiveness),
        "process_n": sum(1 for r in run.records if r.get("process")),
        "error_types": dict(error_types),
        "failures": dict(failures.most_common()),
        "image_operations": dict(operations.most_common()),
        "agent": run.config.get("agent", {}).get("name")
        if isinstance(run.config.get("agent"), Mapping)
        else run.config.get("agent"),
        "judge": run.config.get("judge"),
    }


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def pick_labels(runs: Iterable[Run], store: ModeLabelStore | None = None) -> list[dict[str, str]]:
    """Mode labels for each run (in order): the store's labels of the run's model when a store is
    given, else those of a text-only (``no_tools``) run of the same model among ``runs``."""
    runs = list(runs)
    text_only = {
        run_model(r.config): mode_labels_from_text_only(r) for r in runs if r.config.get("ablation") == "no_tools"
    }
    chosen = []
    for run in runs:
        model = run_model(run.config)
        labels = store.labels(model) if store is not None and model else {}
        chosen.append(labels or text_only.get(model) or {})
    return chosen


def task_index(tasks: Any) -> dict[str, list[str]]:
    """Task id -> [turn case, domain, category]: the run's denominators, kept in ``config.json``
    so a report counts tasks that never produced a record."""
    return {task.id: [task.turncase, task.domain, task.eval_focus or "unknown"] for task in tasks}
