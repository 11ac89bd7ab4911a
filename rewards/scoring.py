"""Rubric scores (paper §2.3 and appendix B.1) from verdicts, per turn, per task and per dataset.

- Weighted rubric score ``s_i = sum(1[met] * w) / sum(w)`` (eq. 1); pass = every critical rubric
  Met, with the critical rule ``weight>=4`` (official toolkit), ``flag`` or ``either``.
- Multi-turn tasks: ``pooled`` (official: all turns' rubrics in one score and one pass) or
  ``per_turn`` (task score = mean of the scores of the turns that have rubrics, pass = every
  turn passes).
- APR = mean pass, ARS = mean score (eq. 2), overall and by group, with counts.

A ``judge_error`` verdict counts as not Met in the score (a lower bound) and marks the task
incomplete; incomplete tasks stay in every denominator and are counted in every report.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal, Mapping, Sequence

from vtb_env.tasks import CriticalRule, Rubric, Task
from vtb_rewards.judge.verdict import JUDGE_ERROR, MET, Verdict

MultiTurnMode = Literal["pooled", "per_turn"]
VerdictLike = Verdict | str  # a Verdict or its status string ("Met", "Not Met", "judge_error")


def _status(verdict: VerdictLike | None) -> str:
    if verdict is None:
        return JUDGE_ERROR  # a rubric nobody judged is not silently Not Met
    return verdict.status if isinstance(verdict, Verdict) else verdict


@dataclass(frozen=True)
class RubricScore:
    """The score and pass of one set of rubrics (a turn, or a task's pooled rubrics)."""

    score: float
    passed: bool
    met_weight: int
    total_weight: int
    n_rubrics: int
    n_judge_errors: int

    @property
    def complete(self) -> bool:
        return self.n_judge_errors == 0


def score_rubrics(
    rubrics: Sequence["Rubric"], verdicts: Mapping[str, VerdictLike], rule: "CriticalRule" = "weight>=4"
) -> RubricScore:
    """Eq. (1) and the critical-rubric pass for one set of rubrics; missing verdicts are judge errors.

    A set without rubrics scores 0.0 and passes vacuously (no critical rubric fails), as the toolkit.
    """
    statuses = {r.id: _status(verdicts.get(r.id)) for r in rubrics}
    met_weight = sum(r.weight for r in rubrics if statuses[r.id] == MET)
    total_weight = sum(r.weight for r in rubrics)
    return RubricScore(
        score=met_weight / total_weight if total_weight else 0.0,
        passed=all(statuses[r.id] == MET for r in rubrics if r.is_critical(rule)),
        met_weight=met_weight,
        total_weight=total_weight,
        n_rubrics=len(rubrics),
        n_judge_errors=sum(s == JUDGE_ERROR for s in statuses.values()),
    )


@dataclass(frozen=True)
class TaskScore:
    task_id: str
    score: float
    passed: bool
    turns: tuple[RubricScore, ...]
    n_judge_errors: int

    @property
    def complete(self) -> bool:
        return self.n_judge_errors == 0


def score_task(
    task: "Task",
    verdicts_by_turn: Sequence[Mapping[str, VerdictLike]],
    rule: "CriticalRule" = "weight>=4",
    multi_turn: MultiTurnMode = "pooled",
) -> TaskScore:
    """Task score and pass from per-turn verdicts (``[{rubric_id: verdict}]``, one dict per turn)."""
    if len(verdicts_by_turn) != len(task.turns):
        raise ValueError(f"task {task.id}: {len(verdicts_by_turn)} verdict sets for {len(task.turns)} turns")
    turns = tuple(score_rubrics(turn.rubrics, v, rule) for turn, v in zip(task.turns, verdicts_by_turn, strict=False))
    if multi_turn == "pooled":  # one score over all turns' rubrics; pooled pass = every turn passes
        total = sum(t.total_weight for t in turns)
        score = sum(t.met_weight for t in turns) / total if total else 0.0
    elif multi_turn == "per_turn":  # a turn without rubrics has nothing to score: it does not count
        scored = [t.score for t in turns if t.total_weight]
        score = sum(scored) / len(scored) if scored else 0.0
    else:
        raise ValueError(f"unknown multi_turn mode {multi_turn!r}; choose 'pooled' or 'per_turn'")
    passed = all(t.passed for t in turns)
    return TaskScore(task.id, score, passed, turns, sum(t.n_judge_errors for t in turns))


def scored_report(
    task: "Task", verdicts_by_turn: Sequence[Mapping[str, Verdict]], scored: TaskScore, rule: "CriticalRule"
) -> dict[str, Any]:
    """Verdicts (per turn, with rubric text and weight, for reports) and the task score, as records store them."""
    return {
        "verdicts": [
            [
                {
                    "rubric_id": rubric.id,
                    "description": rubric.description,
                    "weight": rubric.weight,
                    "critical": rubric.is_critical(rule),
                    "status": turn_verdicts[rubric.id].status,
                    "explanation": turn_verdicts[rubric.id].explanation,
                    "source": turn_verdicts[rubric.id].source,
                    "error": turn_verdicts[rubric.id].error,
                }
                for rubric in turn.rubrics
            ]
            for turn, turn_verdicts in zip(task.turns, verdicts_by_turn, strict=False)
        ],
        "score": {
            "score": scored.score,
            "passed": scored.passed,
            "complete": scored.complete,
            "n_judge_errors": scored.n_judge_errors,
        },
    }


@dataclass
class GroupStats:
    """APR / ARS of one group of tasks, with its counts."""

    n: int = 0
    n_passed: int = 0
    score_sum: float = 0.0
    n_incomplete: int = 0

    @property
    def apr(self) -> float:
        return self.n_passed / self.n if self.n else 0.0

    @property
    def ars(self) -> float:
        return self.score_sum / self.n if self.n else 0.0

    def add(self, result: TaskScore) -> None:
        self.add_outcome(result.passed, result.score, result.complete)

    def add_outcome(self, passed: bool, score: float, complete: bool = True) -> None:
        """Count one task from its stored numbers (e.g. a ``vtb eval`` record)."""
        self.n += 1
        self.n_passed += bool(passed)
        self.score_sum += float(score)
        self.n_incomplete += not complete

    def to_dict(self) -> dict[str, float | int]:
        return {
            "n": self.n,
            "apr": self.apr,
            "ars": self.ars,
            "n_passed": self.n_passed,
            "n_incomplete": self.n_incomplete,
        }


@dataclass
class DatasetReport:
    """APR/ARS overall and by turncase, domain (STEM merged), eval_focus and turncase x domain."""

    overall: GroupStats = field(default_factory=GroupStats)
    by_group: dict[str, dict[str, GroupStats]] = field(default_factory=lambda: defaultdict(dict))

    def to_dict(self) -> dict:
        return {
            "overall": self.overall.to_dict(),
            **{
                name: {key: stats.to_dict() for key, stats in sorted(groups.items())}
                for name, groups in self.by_group.items()
            },
        }


def aggregate(results: Iterable[tuple["Task", TaskScore]]) -> DatasetReport:
    """Dataset-level APR and ARS; every task counts in every denominator, complete or not."""
    report = DatasetReport()
    for task, result in results:
        report.overall.add(result)
        keys = {
            "turncase": task.turncase,
            "domain": task.domain,
            "eval_focus": task.eval_focus or "unknown",
            "turncase_domain": f"{task.turncase}/{task.domain}",
        }
        for name, key in keys.items():
            report.by_group[name].setdefault(key, GroupStats()).add(result)
    report.by_group = dict(report.by_group)
    return report
