"""Held-out evaluation of a policy's answers: reward, rubric score, pass, per variant and mode label, with the
spread over samples.

Two sources give the same rows (``AnswerRow``, one per episode) and the same summary (``summarize``):

- an HF checkpoint (causal LM or VLM), played in the real environment through ``vtb_agents.rollout.run_episodes``
  (``evaluate_policy``): one greedy episode per task and ``samples`` sampled episodes per task;
- a served model, evaluated with ``vtb eval --agent openai:MODEL --samples K`` (the project's OpenAI-compatible
  agent, ``vtb_agents.openai_chat``): ``rows_from_run`` reads that run's records.

Per sampled mode, each figure is the mean over tasks of one sample index, then the mean and the standard deviation
of those per-sample means (``std`` is 0 for one sample): how much one evaluation pass moves.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from vtb_env.tasks import Task

METRICS = ("reward", "rubric", "passed")


@dataclass(frozen=True)
class AnswerRow:
    """One episode's verdict: which task, which sample of which mode, and the env's scores."""

    task_id: str
    mode: str  # "greedy" or "sampled"
    sample: int
    variant: str
    label: str
    reward: float
    rubric: float
    passed: float


def task_groups(task: Task) -> tuple[str, str]:
    """(variant, mode label) of a task: ``metadata["variant"]`` and ``mode_label`` ("-" when absent)."""
    return str((task.metadata or {}).get("variant") or "-"), str(task.mode_label or "-")


def rows_from_episodes(episodes: Sequence[Any], tasks: Mapping[str, Task], mode: str, samples: int) -> list[AnswerRow]:
    """Rows of ``run_episodes``' episodes, played as ``samples`` consecutive copies of the task list."""
    per_sample = len(episodes) // samples
    rows = []
    for index, episode in enumerate(episodes):
        variant, label = task_groups(tasks[episode.task_id])
        components = episode.components
        rows.append(
            AnswerRow(
                episode.task_id,
                mode,
                index // per_sample,
                variant,
                label,
                float(episode.reward),
                float(components.get("rubric_score", 0.0)),
                float(components.get("passed", 0.0)),
            )
        )
    return rows


def rows_from_run(run_dir: str | Path, tasks: Sequence[Task], mode: str = "sampled") -> list[AnswerRow]:
    """Rows of a ``vtb eval`` output directory (e.g. a served model through ``--agent openai:MODEL``): every
    (task, sample) the run was meant to produce; an episode that failed or never ran scores 0, as ``vtb report``
    counts it."""
    from vtb_app.evaluation.metrics import Run

    run = Run.load(run_dir)
    by_id = {task.id: task for task in tasks}
    recorded = {(r["task_id"], int(r.get("sample") or 0)): r for r in run.records}
    rows = []
    for task_id, task in by_id.items():
        for sample in range(run.samples):
            record = recorded.get((task_id, sample))
            score = (record or {}).get("score") or {}
            variant, label = task_groups(task)
            rows.append(
                AnswerRow(
                    task_id,
                    mode,
                    sample,
                    variant,
                    label,
                    float((record or {}).get("reward") or 0.0),
                    float(score.get("score") or 0.0),
                    float(bool(score.get("passed"))),
                )
            )
    return rows


def _figures(rows: Sequence[AnswerRow]) -> dict[str, Any]:
    """Mean and spread over sample indices of each metric, and the tasks with a rubric score above 0."""
    by_sample: dict[int, list[AnswerRow]] = defaultdict(list)
    for row in rows:
        by_sample[row.sample].append(row)
    figures: dict[str, Any] = {"n_tasks": len({r.task_id for r in rows}), "n_samples": len(by_sample)}
    for metric in METRICS:
        means = [statistics.fmean(getattr(r, metric) for r in group) for group in by_sample.values()]
        figures[metric] = statistics.fmean(means)
        figures[f"{metric}_std"] = statistics.pstdev(means) if len(means) > 1 else 0.0
    positive = [sum(r.rubric > 0 for r in group) for group in by_sample.values()]
    figures["tasks_rubric_pos"] = statistics.fmean(positive)
    return figures


def summarize(rows: Iterable[AnswerRow]) -> dict[str, dict[str, Any]]:
    """Per mode: the overall figures, and the same per variant and per mode label (``_figures``)."""
    by_mode: dict[str, list[AnswerRow]] = defaultdict(list)
    for row in rows:
        by_mode[row.mode].append(row)
    summary = {}
    for mode, mode_rows in sorted(by_mode.items()):
        groups: dict[str, dict[str, list[AnswerRow]]] = {"variant": defaultdict(list), "label": defaultdict(list)}
        for row in mode_rows:
            groups["variant"][row.variant].append(row)
            groups["label"][row.label].append(row)
        summary[mode] = {
            **_figures(mode_rows),
            **{f"by_{key}": {name: _figures(g) for name, g in sorted(parts.items())} for key, parts in groups.items()},
        }
    return summary


def evaluate_policy(
    model: Any,
    processing_class: Any,
    tasks: Sequence[Task],
    make_env: Any,
    *,
    samples: int,
    temperature: float,
    max_new_tokens: int,
    max_episode_tokens: int,
    seed: int,
) -> list[AnswerRow]:
    """One greedy episode per task, then ``samples`` sampled ones at ``temperature`` (none for 0), in envs made by
    ``make_env()``; the policy's chat template and image view (``ChatRenderer``) decide what it is shown."""
    import torch

    from vtb_agents.rollout import ChatRenderer, HFGenerator, run_episodes
    from vtb_env.batch import EnvPool

    by_id = {task.id: task for task in tasks}
    renderer = ChatRenderer(processing_class)
    rows: list[AnswerRow] = []
    for mode, copies in (("greedy", 1), ("sampled", samples)):
        if copies == 0:
            continue
        torch.manual_seed(seed)
        task_ids = [task.id for _ in range(copies) for task in tasks]
        pool = EnvPool([make_env() for _ in task_ids])
        try:
            generate = HFGenerator(
                model,
                processing_class,
                max_new_tokens=max_new_tokens,
                temperature=temperature,
                greedy=mode == "greedy",
            )
            episodes = run_episodes(
                pool, task_ids, generate, renderer, max_completion_tokens=max_episode_tokens, seed=seed
            )
        finally:
            pool.close()
        rows += rows_from_episodes(episodes, by_id, mode, copies)
    return rows


def rows_as_dicts(rows: Iterable[AnswerRow]) -> list[dict[str, Any]]:
    """The rows as plain dicts (for a JSON file)."""
    return [asdict(row) for row in rows]
