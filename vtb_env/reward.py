"""What the environment calls a reward, and where its default comes from.

The env scores a finished episode with ``reward(task, record) -> (scalar, components)``. The
core defines that interface (``RewardFn``) but not the scoring: rubric judging, mode selection
and process metrics live in the rewards layer (``vtb_rewards``), which sits above the core and
must not be imported by it. The rewards layer announces its default reward factory in the
``vtb_env.default_reward`` entry-point group (pyproject.toml); the env asks for it here when it
is given no reward. So the dependency is declared in the package metadata, the one place that
composes the layers, and the core's code never names a package above it.

``score_episode`` is the one place a reward is called. A reward that can say how it scored
(rubric verdicts, the task score) also has ``explain(task, record) -> (scalar, components,
details)``; the env then puts ``details`` into ``info["reward_details"]``, so nothing downstream
(the evaluation runner) judges the same answers again. A reward that raises never crashes a
rollout: the episode gets 0.0 and ``info["reward_error"]``.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Callable, Mapping

from vtb_env.tasks import Task
from vtb_env.trajectory import EpisodeRecord

logger = logging.getLogger(__name__)

RewardFn = Callable[[Task, EpisodeRecord], tuple[float, dict[str, float]]]

DEFAULT_REWARD_GROUP = "vtb_env.default_reward"


class NoDefaultRewardError(RuntimeError):
    """No installed package (or more than one) provides the env's default reward."""


def default_reward(
    judge_options: Mapping[str, Any] | None = None, reward_options: Mapping[str, Any] | None = None
) -> RewardFn:
    """A new instance of the installed default reward (vtb-gym's: ``vtb_rewards.default_reward``).

    ``judge_options`` and ``reward_options`` (``EnvConfig``'s) go to the provider as they are: the
    judge's request options and the reward's configuration, which the rewards layer checks (an
    unknown name is a clear error)."""
    options = {"judge_options": judge_options, "reward_options": reward_options}
    return _default_reward_factory()(**{name: dict(value) for name, value in options.items() if value})


@functools.cache
def _default_reward_factory() -> Callable[[], RewardFn]:
    found = sorted(entry_points(group=DEFAULT_REWARD_GROUP), key=lambda ep: ep.value)
    if len(found) != 1:
        providers = ", ".join(ep.value for ep in found) or "none"
        raise NoDefaultRewardError(
            f"the env's default reward comes from the {DEFAULT_REWARD_GROUP!r} entry point; found {providers}. "
            "Install vtb-gym (pip install -e .) or pass reward=... to the env."
        )
    return found[0].load()


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


def score_episode(reward_fn: RewardFn, task: Task, record: EpisodeRecord) -> EpisodeScore:
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
