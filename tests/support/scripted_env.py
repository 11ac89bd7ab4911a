"""A small scripted environment (``tests.support.env_tools``' tasks, tools and exact reward) for the env tests."""

from __future__ import annotations

from tests.support.env_tools import (
    exact_reward,
    make_task,
    small_tools,
)
from vtb_env.env import VisualToolBenchEnv


def make_env(tasks=None, config="default", **kwargs) -> VisualToolBenchEnv:
    """An env over ``tasks`` (default: one two-turn task) with the small tools and the exact reward."""
    return VisualToolBenchEnv(
        tasks=tasks or [make_task("a", turns=2)], tools=small_tools(), reward=exact_reward(), config=config, **kwargs
    )


def roles(observation) -> list[str]:
    """The roles of an observation's messages, in order."""
    return [message["role"] for message in observation["messages"]]
