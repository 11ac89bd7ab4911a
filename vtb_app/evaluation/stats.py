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
from typing import Any, Iterable, Sequence

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


def _mean(values: Sequence[float]) -> float | None:
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
    task_passes = [_mean([float(e.passed) for e in eps]) or 0.0 for eps in by_task.values()]
    task_scores = [_mean([e.score for e in eps]) or 0.0 for eps in by_task.values()]
    sample_ids = sorted({e.sample for eps in by_task.values() for e in eps})
    apr_by_sample = [
        _mean([float(e.passed) for eps in by_task.values() for e in eps if e.sample == s]) for s in sample_ids
    ]
    ars_by_sample = [_mean([e.score for eps in by_task.values() for e in eps if e.sample == s]) for s in sample_ids]
    counts = [(len(eps), sum(e.passed for e in eps)) for eps in by_task.values()]
    judged = [[e for e in eps if e.judged] for eps in by_task.values()]
    judged = [eps for eps in judged if eps]
    return {
        "n": len(by_task),
        "samples": samples,
        "n_episodes": sum(len(eps) for eps in by_task.values()),
        "n_passed": sum(c for _, c in counts),
        "apr": _mean(task_passes),
        "ars": _mean(task_scores),
        "apr_std": _std([v for v in apr_by_sample if v is not None]),
        "ars_std": _std([v for v in ars_by_sample if v is not None]),
        "apr_ci": bootstrap_ci(task_passes),
        "ars_ci": bootstrap_ci(task_scores),
        "apr_by_sample": {str(s): v for s, v in zip(sample_ids, apr_by_sample, strict=True)},
        "ars_by_sample": {str(s): v for s, v in zip(sample_ids, ars_by_sample, strict=True)},
        "pass_at_k": _per_k(counts, samples, pass_at_k),
        "pass_hat_k": _per_k(counts, samples, pass_hat_k),
        "n_incomplete": sum(not e.judged for eps in by_task.values() for e in eps),
        "n_fully_judged": len(judged),
        "apr_fully_judged": _mean([_mean([float(e.passed) for e in eps]) or 0.0 for eps in judged]),
        "ars_fully_judged": _mean([_mean([e.score for e in eps]) or 0.0 for eps in judged]),
    }


def _per_k(counts: Sequence[tuple[int, int]], samples: int, estimator: Any) -> dict[str, float]:
    """``{k: mean over tasks with at least k samples}`` for k = 1..samples."""
    result = {}
    for k in range(1, samples + 1):
        values = [estimator(n, c, k) for n, c in counts if n >= k]
        if values:
            result[str(k)] = sum(values) / len(values)
    return result
