"""Statistics over samples and tasks: what a published number needs beside its mean.

A run has ``k`` samples (episodes) of each task. Every statistic here counts **tasks**, each task
weighted once whatever its number of samples:

- APR / ARS: the mean over tasks of the task's mean pass / score over its samples (with every
  sample present this is the pooled mean over episodes, and the mean of the per-sample values);
- per sample ("trial", the paper averages two): APR / ARS of sample ``s`` over the tasks that
  have it, and their standard deviation across samples (``ddof=1``; none with one sample);
- a 95% percentile-bootstrap confidence interval over tasks (tasks resampled with replacement,
  ``BOOTSTRAP_RESAMPLES`` times, fixed seed: a report is reproducible);
- pass@k (at least one of k samples passes; the unbiased estimator of Chen et al. 2021,
  ``1 - C(n-c, k) / C(n, k)``) and pass^k (all k pass, ``C(c, k) / C(n, k)``, as tau-bench), for
  k = 1..samples, over the tasks with at least k samples;
- the same APR / ARS over the episodes whose judging is complete (``fully_judged``): beside the
  headline, which counts an unjudged rubric as not Met (a lower bound).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Episode:
    """One (task, sample) as the statistics see it. Failed and never-run episodes are not passed,
    score 0, and judged (nothing is left to judge); ``judged`` is False while a rubric is unjudged."""

    task_id: str
    sample: int
    passed: bool
    score: float
    judged: bool = True


def mean_or_none(values: Sequence[float]) -> float | None:
    """The mean; None for no values (shown as n/a, never 0)."""
    return sum(values) / len(values) if values else None


def _std(values: Sequence[float]) -> float | None:
    return statistics.stdev(values) if len(values) >= 2 else None


def bootstrap_ci(
    values: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> list[float] | None:
    """The 95% percentile-bootstrap interval of the mean of ``values`` (one value per task)."""
    if not values:
        return None
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return [float(low), float(high)]


def pass_at_k(n: int, c: int, k: int) -> float:
    """P(at least one of k samples drawn from n, c of which pass, passes): unbiased estimator."""
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """P(all k samples drawn from n, c of which pass, pass)."""
    return math.comb(c, k) / math.comb(n, k)


def group_stats(episodes: Iterable[Episode], samples: int) -> dict[str, Any]:
    """Every statistic of one group of episodes (a run, or a cell of a table); see the module doc."""
    by_task: dict[str, list[Episode]] = defaultdict(list)
    for episode in episodes:
        by_task[episode.task_id].append(episode)
    tasks = list(by_task.values())
    sample_ids = sorted({e.sample for eps in tasks for e in eps})
    apr_by_sample = {str(s): _mean_over(tasks, _passed, s) for s in sample_ids}
    ars_by_sample = {str(s): _mean_over(tasks, _score, s) for s in sample_ids}
    counts = [(len(eps), sum(e.passed for e in eps)) for eps in tasks]
    judged = [kept for eps in tasks if (kept := [e for e in eps if e.judged])]
    task_passes = [_task_mean(eps, _passed) for eps in tasks]
    task_scores = [_task_mean(eps, _score) for eps in tasks]
    return {
        "n": len(tasks),
        "samples": samples,
        "n_episodes": sum(len(eps) for eps in tasks),
        "n_passed": sum(c for _, c in counts),
        "apr": mean_or_none(task_passes),
        "ars": mean_or_none(task_scores),
        "apr_std": _std([v for v in apr_by_sample.values() if v is not None]),
        "ars_std": _std([v for v in ars_by_sample.values() if v is not None]),
        "apr_ci": bootstrap_ci(task_passes),
        "ars_ci": bootstrap_ci(task_scores),
        "apr_by_sample": apr_by_sample,
        "ars_by_sample": ars_by_sample,
        "pass_at_k": _per_k(counts, samples, pass_at_k),
        "pass_hat_k": _per_k(counts, samples, pass_hat_k),
        "n_incomplete": sum(not e.judged for eps in tasks for e in eps),
        "incomplete_by_sample": {
            str(s): sum(not e.judged for eps in tasks for e in eps if e.sample == s) for s in sample_ids
        },
        "n_fully_judged": len(judged),
        "apr_fully_judged": mean_or_none([_task_mean(eps, _passed) for eps in judged]),
        "ars_fully_judged": mean_or_none([_task_mean(eps, _score) for eps in judged]),
    }


def _passed(episode: Episode) -> float:
    return float(episode.passed)


def _score(episode: Episode) -> float:
    return episode.score


def _task_mean(episodes: Sequence[Episode], value: Callable[[Episode], float]) -> float:
    """A task's value: the mean over its samples."""
    return sum(value(e) for e in episodes) / len(episodes)


def _mean_over(tasks: Sequence[Sequence[Episode]], value: Callable[[Episode], float], sample: int) -> float | None:
    """Sample ``sample``'s value over the tasks that have it (one trial's APR or ARS)."""
    return mean_or_none([value(e) for eps in tasks for e in eps if e.sample == sample])


def _per_k(counts: Sequence[tuple[int, int]], samples: int, estimator: Any) -> dict[str, float]:
    """``{k: mean over tasks with at least k samples}`` for k = 1..samples."""
    result = {}
    for k in range(1, samples + 1):
        values = [estimator(n, c, k) for n, c in counts if n >= k]
        if values:
            result[str(k)] = sum(values) / len(values)
    return result
