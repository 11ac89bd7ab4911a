"""What the environment calls a reward, and where its default comes from.

The env scores a finished episode with ``reward(task, record) -> (scalar, components)``. The
core defines that interface (``RewardFn``) but not the scoring: rubric judging, mode selection
and process metrics live in the rewards layer (``vtb_rewards``), which sits above the core and
must not be imported by it. The rewards layer announces its default reward factory in the
``vtb_env.default_reward`` entry-point group (pyproject.toml); the env asks for it here when it
is given no reward. So the dependency is declared in the package metadata, the one place that
composes the layers, and the core's code never names a package above it.
"""

from __future__ import annotations

import functools
from importlib.metadata import entry_points
from typing import Callable

from vtb_env.tasks import Task
from vtb_env.trajectory import EpisodeRecord

RewardFn = Callable[[Task, EpisodeRecord], tuple[float, dict[str, float]]]

DEFAULT_REWARD_GROUP = "vtb_env.default_reward"


class NoDefaultRewardError(RuntimeError):
    """No installed package (or more than one) provides the env's default reward."""


def default_reward() -> RewardFn:
    """A new instance of the installed default reward (vtb-gym's: ``vtb_rewards.default_reward``)."""
    return _default_reward_factory()()


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
