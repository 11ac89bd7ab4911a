"""The reward the env is given, and the one place it is called: ``score_episode``.

A reward is ``reward(task, record) -> (scalar, components)``. One that can say how it scored
(rubric verdicts, the task score) also has ``explain(task, record) -> (scalar, components,
details)``; the env then puts ``details`` into ``info["reward_details"]``, so nothing downstream
(the evaluation runner) judges the same answers again. A reward that raises never crashes a
rollout: the episode gets 0.0 and ``info["reward_error"]``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from vtb_env.tasks import Task
    from vtb_env.trajectory import EpisodeRecord

logger = logging.getLogger(__name__)

RewardFn = Callable[["Task", "EpisodeRecord"], tuple[float, dict[str, float]]]


@dataclass(frozen=True)
class EpisodeScore:
    """What a reward said about one finished episode (or why it could not say)."""

    reward: float
    components: dict[str, float] | None  # None when the reward failed
    details: dict[str, Any] | None  # the reward's own account (verdicts, task score), when it gives one
    error: str | None  # "Type: message" when the reward raised

    def info(self) -> dict[str, Any]:
        """The ``info`` keys of the episode's last step: ``reward_components``, ``reward_details``, ``reward_error``."""
        keys = {"reward_components": self.components, "reward_details": self.details, "reward_error": self.error}
        return {key: value for key, value in keys.items() if value is not None}


def score_episode(reward_fn: RewardFn, task: "Task", record: "EpisodeRecord") -> EpisodeScore:
    """Call ``reward_fn`` (its ``explain`` when it has one); a failure is reported, never raised."""
    try:
        explain = getattr(reward_fn, "explain", None)
        if callable(explain):
            reward, components, details = explain(task, record)
            return EpisodeScore(float(reward), dict(components), dict(details), None)
        reward, components = reward_fn(task, record)
        return EpisodeScore(float(reward), dict(components), None, None)
    except Exception as exc:  # a judge outage must not crash the rollout or the run; it is reported
        logger.warning("reward failed for task %s: %s: %s", task.id, type(exc).__name__, exc)
        return EpisodeScore(0.0, None, None, f"{type(exc).__name__}: {exc}")
