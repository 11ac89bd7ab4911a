"""Judging a finished episode, each rubric once: its verdicts and score, the reward, the optional judge passes
(process metrics, error types); and judging a saved record again (``vtb judge``, ``--resume``).

``runner.evaluate_item`` judges the episodes it plays here; ``judge_command.run_judge`` and the
official-toolkit import (``toolkit``) use the same functions, so every record is judged alike.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from vtb_app.evaluation.records import encode_record, error_record
from vtb_env.reward import score_episode
from vtb_env.tasks import ModeLabel, Task
from vtb_env.trajectory import EpisodeRecord
from vtb_rewards.compose import EpisodeReward, RewardConfig
from vtb_rewards.judge.judge import Judge, judge_task
from vtb_rewards.process import classify_errors, judge_key_steps, judge_tool_effectiveness, kcoverage_of
from vtb_rewards.scoring import score_task, scored_report


def episode_reward(
    judge: Judge, scoring: RewardConfig, mode_labels: Mapping[str, ModeLabel] | None = None
) -> EpisodeReward:
    """The env's reward for an evaluation: this run's judge, scoring configuration and labels."""
    return EpisodeReward(scoring, judge, mode_labels)


def judge_episode(task: Task, answers: Sequence[str | None], judge: Judge, scoring: RewardConfig) -> dict[str, Any]:
    """Verdicts (per turn, with rubric text and weight, for reports) and the task score."""
    verdicts = judge_task(judge, task, list(answers))
    score = score_task(task, verdicts, scoring.critical_rule, scoring.multi_turn)
    return {**scored_report(task, verdicts, score, scoring.critical_rule), "judge": judge.judge_id}


def reward_judged(details: Mapping[str, Any] | None, judge: Judge, scoring: RewardConfig) -> dict[str, Any] | None:
    """The verdicts and task score a reward's details hold (``info["reward_details"]``, ``EpisodeScore.details``),
    when they are this run's: same judge and scoring. None: the answers must be judged here."""
    if details is None or details.get("judge") != judge.judge_id or details.get("scoring") != scoring.scoring():
        return None
    return {key: details[key] for key in ("verdicts", "score", "judge")}


@dataclass(frozen=True)
class JudgePasses:
    """Optional judge passes beyond the rubrics (each costs judge calls; all need an LLM judge).

    ``process_metrics``: KCoverage (both readings) and tool effectiveness (seed 000);
    ``error_types``: the appendix-B.6 error type of every failed task (table 4).
    """

    process_metrics: bool = False
    error_types: bool = False


def process_metrics(judge: Judge, task: Task, episode: EpisodeRecord) -> dict[str, Any]:
    """KCoverage under both readings (vtb_rewards.process) and tool effectiveness, judged by ``judge``."""
    presence = judge_key_steps(judge, task, episode)
    prefix, furthest = kcoverage_of(presence, "prefix"), kcoverage_of(presence, "furthest")
    effectiveness = judge_tool_effectiveness(judge, task, episode)
    return {
        "kcoverage": prefix.value,  # the formula's reading: longest covered prefix of the key steps
        "kcoverage_furthest": furthest.value,  # the text's reading: furthest key step reached
        "key_steps_present": [[v.met for v in verdicts] for verdicts in presence],
        "tool_effectiveness": effectiveness.value,
        "n_key_steps": prefix.n_items,
        "n_tool_calls_judged": effectiveness.n_items,
        "n_judge_errors": prefix.n_judge_errors + effectiveness.n_judge_errors,
    }


def error_type(
    judge: Judge, task: Task, answers: Sequence[str | None], verdicts: Sequence[Sequence[Mapping[str, Any]]]
) -> str:
    """Appendix B.6: the main cause of a failed task, by the judge (one call; ``judge_error`` if unreadable)."""
    unmet = [v["description"] for turn in verdicts for v in turn if v["status"] != "Met"]
    answer = "\n\n".join(f"[turn {i + 1}] {a or '(no answer)'}" for i, a in enumerate(answers))
    question = "\n\n".join(turn.prompt for turn in task.turns)
    golden = "\n\n".join(turn.golden_answer for turn in task.turns)
    return classify_errors(judge.backend, [(question, golden, unmet, answer)])[0]  # type: ignore[arg-type]


def judge_record(
    task: Task,
    episode: EpisodeRecord,
    judge: Judge,
    scoring: RewardConfig,
    passes: JudgePasses = JudgePasses(),
    mode_label: str | None = None,
    with_reward: bool = True,
    verdicts: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything judged about a finished episode, each rubric once: the verdicts and score (``verdicts``
    when given, else the reward's own, else judged here), the reward (unless the env just computed it:
    ``with_reward=False``), and the optional passes."""
    judged = dict(verdicts) if verdicts is not None else None
    reward: dict[str, Any] = {}
    if with_reward:
        labels = {task.id: mode_label} if mode_label else {}
        score = score_episode(episode_reward(judge, scoring, labels), task, episode)  # a failure is recorded
        reward = {"reward": score.reward, "reward_components": score.components, "reward_error": score.error}
        if judged is None:
            judged = reward_judged(score.details, judge, scoring)
    if judged is None:  # no reward ran, or it failed before judging
        judged = judge_episode(task, episode.final_answers, judge, scoring)
    judged.update(reward)
    if passes.process_metrics:
        judged["process"] = process_metrics(judge, task, episode)
    if passes.error_types:
        failed = not judged["score"]["passed"]
        judged["error_type"] = error_type(judge, task, episode.final_answers, judged["verdicts"]) if failed else None
    return judged


def rejudge(
    record: Mapping[str, Any], task: Task, judge: Judge, scoring: RewardConfig, passes: JudgePasses, config_hash: str
) -> dict[str, Any]:
    """A saved ``ok`` record judged again (no model calls): new verdicts, score, reward, passes."""
    episode = EpisodeRecord.from_dict(record["episode"]) if record.get("episode") else None
    if episode is None:  # an imported record without an episode: rubrics only
        return {**record, **judge_episode(task, record["answers"], judge, scoring), "config_hash": config_hash}
    judged = judge_record(task, episode, judge, scoring, passes, record.get("mode_label"))
    # The optional passes' results belong to the judge that made them: kept only when made again now.
    kept = {key: value for key, value in record.items() if key not in ("process", "error_type")}
    return {**kept, **judged, "config_hash": config_hash, "judge": judge.judge_id, "rejudged_at": time.time()}


def rejudge_item(
    record: dict[str, Any], task: Task, judge: Judge, scoring: RewardConfig, passes: JudgePasses, config_hash: str
) -> dict[str, Any]:
    """An incompletely judged ``ok`` record judged again (the work item of ``--resume`` for it)."""
    try:
        rejudged = rejudge(record, task, judge, scoring, passes, config_hash)
        encode_record(rejudged)
        return rejudged
    except Exception as exc:  # the saved record stays; the key is judged again on the next resume
        return error_record(record, f"re-judging failed: {type(exc).__name__}: {exc}")
