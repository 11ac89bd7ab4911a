"""The paper's numbers from a run's records: APR/ARS (tables 3, 6), tool use (table 7),
mode selection (confusion matrix, MCC), process metrics, failure kinds, image operations (fig. 6).

Everything here reads the JSON records written by ``vtb eval`` (see ``runner``), so any run,
ours or imported from the official toolkit, is summarised the same way.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Iterable, Mapping

from vtb_app.evaluation.image_ops import operations_in_code
from vtb_app.evaluation.modes import episode_mode_label, used_tools
from vtb_app.evaluation.records import episode_calls, judging_complete
from vtb_app.evaluation.runs import Run, sample_of
from vtb_app.evaluation.stats import Episode, group_stats, mean_or_none
from vtb_env.toolsets import VISION_TOOL
from vtb_env.trajectory import EpisodeRecord
from vtb_rewards.compose import RewardConfig
from vtb_rewards.mode import ConfusionMatrix, mode_outcome
from vtb_rewards.process import tool_use_stats

TURNCASES = ("single-turn", "multi-turn")
# The rewarded components of vtb_rewards.compose (the diagnostics in reward_components are left out).
REWARD_COMPONENTS = tuple(RewardConfig().weights())
PROCESS_METRICS = ("kcoverage", "kcoverage_furthest", "tool_effectiveness")


def tool_use(records: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Appendix B.4 (proactivity, success rate, volume) over stored records, via vtb_rewards.process."""
    stats = tool_use_stats([EpisodeRecord.from_dict(r["episode"]) for r in records])
    return {
        "proactivity": stats.proactivity if stats.n_tasks else None,
        "success_rate": stats.success_rate,
        "volume": stats.volume if stats.n_tasks else None,
        "calls": stats.n_calls,
    }


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


def image_operations(record: Mapping[str, Any]) -> Counter:
    """Figure 6: the operations the episode's vision-tool code performs (``image_ops``)."""
    counts: Counter = Counter()
    for call in episode_calls(record):
        if call.get("name") == VISION_TOOL:
            arguments = call.get("arguments")
            code = arguments.get("code", "") if isinstance(arguments, Mapping) else str(arguments)
            counts.update(operations_in_code(str(code)))
    return counts


def _process_summary(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Means of the process metrics over the episodes judged without a judge error; an episode
    with judge errors in its process pass is left out and counted (``process_judge_errors``)."""
    values: dict[str, list[float]] = defaultdict(list)
    judged = errored = 0
    for record in records:
        process = record.get("process") or {}
        if not process:
            continue
        if process.get("n_judge_errors"):
            errored += 1
            continue
        judged += 1
        for name in PROCESS_METRICS:
            if process.get(name) is not None:
                values[name].append(float(process[name]))
    return {
        **{name: mean_or_none(values[name]) for name in PROCESS_METRICS},
        "process_n": judged,
        "process_judge_errors": errored,
    }


def _episodes(run: Run) -> list[tuple[Episode, Mapping[str, Any] | None]]:
    """Every (task, sample) the run was meant to produce, with its record (None when it never ran):
    failed (``error`` record) and never-run episodes are not passed, score 0."""
    episodes: list[tuple[Episode, Mapping[str, Any] | None]] = [
        (Episode(str(r.get("task_id", "")), sample_of(r), False, 0.0), r) for r in run.errors
    ]
    episodes += [(Episode(task_id, sample, False, 0.0), None) for _, task_id, sample in run.missing]
    for record in run.records:
        score = record["score"]
        episode = Episode(
            record["task_id"],
            sample_of(record),
            bool(score["passed"]),
            float(score["score"]),
            bool(score.get("complete", True)),  # every rubric judged (the passes' judge errors do not touch APR)
        )
        episodes.append((episode, record))
    return episodes


def summarize_run(
    run: Run, labels: Mapping[str, str] | None = None, *, mcc_reading: str = "any", label_rule: str = "any"
) -> dict[str, Any]:
    """All report numbers for one run; ``labels`` (task id -> mode label): see ``episode_mode_label``;
    ``mcc_reading``: what counts as using tools for MCC (``modes.MCC_READINGS``); ``label_rule``: how
    the labels were drawn from a multi-sample text-only run (stated in the report).

    Denominators (paper §3: APR is the share of ALL tasks that pass): every (task, sample) the run
    was meant to produce counts; an episode that failed for good (``error`` record) or never ran
    (no record) counts as not passed with score 0, and both counts are reported. Tasks count as
    tasks, each the mean of its samples, with the spread across samples (``stats.group_stats``);
    ``apr_completed`` / ``ars_completed`` are the same over the completed (``ok``) episodes only.
    """
    samples = run.samples
    groups: dict[tuple[str, ...], list[Episode]] = defaultdict(list)
    completed: list[Episode] = []
    by_turncase: dict[str, list[Mapping[str, Any]]] = {case: [] for case in TURNCASES}
    tools_by_name: Counter = Counter()
    outcomes, failures, operations, label_sources, error_types = [], Counter(), Counter(), Counter(), Counter()
    rewards: list[float] = []
    components: dict[str, list[float]] = defaultdict(list)
    for episode, record in _episodes(run):
        turncase, domain, focus = run.task_groups(episode.task_id, record)
        for key in (("overall",), ("cell", turncase, domain), ("cell", turncase, "all"), ("focus", focus)):
            groups[key].append(episode)
        if record is None or record.get("status") != "ok":
            continue
        completed.append(episode)
        by_turncase.setdefault(record["task"]["turncase"], []).append(record)
        tools_by_name.update(call.get("name", "?") for call in episode_calls(record))
        label, source = episode_mode_label(record, labels)
        label_sources[source] += 1
        if label:
            outcomes.append(mode_outcome(label, used_tools(record, mcc_reading)))
        if record.get("reward") is not None:
            rewards.append(float(record["reward"]))
            for name, value in (record.get("reward_components") or {}).items():
                if name in REWARD_COMPONENTS:
                    components[name].append(float(value))
        failures[failure_kind(record) or "passed"] += 1
        operations.update(image_operations(record))
        if record.get("error_type"):
            error_types[record["error_type"]] += 1
    overall = group_stats(groups[("overall",)], samples)
    done = group_stats(completed, samples)
    matrix = ConfusionMatrix.from_outcomes(outcomes)
    scoring = run.config.get("scoring") or {}
    cells: dict[str, dict[str, Any]] = defaultdict(dict)
    for key, episodes in groups.items():
        if key[0] == "cell":
            cells[key[1]][key[2]] = group_stats(episodes, samples)
    return {
        "name": run.name,
        **overall,
        "n_completed": done["n_episodes"],
        "n_errors": len(run.errors),
        "n_missing": len(run.missing),
        "n_judge_incomplete": sum(not judging_complete(r) for r in run.records),  # rubrics or passes: resume redoes
        "apr_completed": done["apr"],
        "ars_completed": done["ars"],
        "scoring": {
            "critical_rule": scoring.get("critical_rule", "weight>=4"),
            "multi_turn": scoring.get("multi_turn", "pooled"),
        },
        "by_turncase_domain": dict(cells),
        "by_eval_focus": {
            key[1]: group_stats(eps, samples) for key, eps in sorted(groups.items()) if key[0] == "focus"
        },
        "tool_use": {case: tool_use(records) for case, records in {**by_turncase, "overall": run.records}.items()},
        "tools_by_name": dict(tools_by_name.most_common()),
        "mode_selection": {
            **matrix.to_dict(),
            "label_sources": dict(label_sources),
            "reading": mcc_reading,
            "label_rule": label_rule,
        }
        if matrix.n
        else None,
        "reward": mean_or_none(rewards),
        "reward_components": {name: mean_or_none(components[name]) for name in REWARD_COMPONENTS if components[name]},
        "reward_n": len(rewards),
        **_process_summary(run.records),
        "error_types": dict(error_types),
        "failures": dict(failures.most_common()),
        "image_operations": dict(operations.most_common()),
        "agent": run.config.get("agent", {}).get("name")
        if isinstance(run.config.get("agent"), Mapping)
        else run.config.get("agent"),
        "judge": run.config.get("judge"),
    }
