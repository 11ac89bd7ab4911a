"""GRPO glue: group-relative advantages, a TRL reward function, a verl ``compute_score`` adapter.

All three score a completion with the same ``EpisodeReward`` the environment uses; the
completion is read into an ``EpisodeRecord`` by ``vtb_env.completion.record_from_completion``.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from vtb_env.completion import record_from_completion
from vtb_env.tasks import Task
from vtb_rewards.compose import EpisodeReward, default_reward


def group_advantages(
    rewards: Sequence[float],
    group_size: int | None = None,
    group_ids: Sequence[Any] | None = None,
    *,
    scale: bool = True,
    eps: float = 1e-6,
) -> list[float]:
    """GRPO advantages: ``(r - mean(group)) / (std(group) + eps)`` (``scale=False``: no division).

    Groups are consecutive blocks of ``group_size`` (TRL's layout), or given by ``group_ids``.
    The std is the population std; a group with identical rewards gets zero advantages.
    A NaN reward (a masked episode: ``RewardConfig(judge_incomplete="mask")``) is left out of its
    group's mean and std and gets advantage 0, so it moves no gradient.
    """
    if group_ids is None:
        if not group_size or len(rewards) % group_size:
            raise ValueError(f"{len(rewards)} rewards do not split into groups of {group_size}")
        group_ids = [i // group_size for i in range(len(rewards))]
    if len(group_ids) != len(rewards):
        raise ValueError("one group id per reward")
    members: dict[Any, list[int]] = {}
    for index, gid in enumerate(group_ids):
        members.setdefault(gid, []).append(index)
    advantages = [0.0] * len(rewards)
    for indices in members.values():
        kept = [(i, float(rewards[i])) for i in indices if not math.isnan(float(rewards[i]))]
        if not kept:
            continue
        mean = sum(v for _, v in kept) / len(kept)
        std = math.sqrt(sum((v - mean) ** 2 for _, v in kept) / len(kept))
        for i, v in kept:
            advantages[i] = (v - mean) / (std + eps) if scale else v - mean
    return advantages


def _single_turn(task: Task, turn_index: int | None) -> Task:
    """The task restricted to one turn (the completion answers that turn only)."""
    index = 0 if turn_index is None else int(turn_index)
    if not 0 <= index < len(task.turns):
        raise ValueError(f"task {task.id} has no turn {index}")
    return replace(task, turns=(task.turns[index],))


def make_trl_reward_func(
    tasks: Mapping[str, Task],
    reward: EpisodeReward | None = None,
    *,
    task_id_key: str = "task_id",
    judge_options: Mapping[str, Any] | None = None,
) -> Callable[..., list[float]]:
    """A TRL ``reward_funcs`` entry: ``f(prompts, completions, **kwargs) -> list[float]``.

    The dataset needs a ``task_id`` column (TRL passes columns as keyword lists) and may have a
    ``turn_index`` column (default 0). Components of the last call are kept in ``f.last_components``.
    A string completion is the policy's text alone: a tool call in it never ran, so it earns no mode or
    tool-success credit; in a conversational completion a call counts when a ``tool`` message answers it.
    Without ``reward``: the default reward, its judge from ``VTB_JUDGE_*`` with ``judge_options`` over them.
    """
    episode_reward = reward or default_reward(judge_options=judge_options)

    def vtb_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        task_ids = kwargs.get(task_id_key)
        if task_ids is None:
            raise ValueError(f"the dataset needs a {task_id_key!r} column to find each completion's task")
        turn_indices = kwargs.get("turn_index") or [None] * len(completions)
        scores, components = [], []
        for task_id, completion, turn_index in zip(task_ids, completions, turn_indices, strict=True):
            task = _single_turn(tasks[task_id], turn_index)
            record = record_from_completion(task_id, completion, results_in_text=False)
            value, info = episode_reward(task, record)
            scores.append(None if math.isnan(value) else value)  # TRL skips None rewards (a masked episode)
            components.append(info)
        vtb_reward.last_components = components  # type: ignore[attr-defined]
        return scores

    vtb_reward.__name__ = "vtb_reward"
    return vtb_reward


_VERL_REWARDS: dict[str, EpisodeReward] = {}  # by judge options and VTB_JUDGE_* variables, built once per process


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    judge_options: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """verl custom reward: ``ground_truth`` is the task (``Task.to_dict()``, as a dict or JSON string).

    ``extra_info`` may give ``turn_index``; other keywords newer verl versions pass are ignored. The
    response is read as verl decodes a multi-turn rollout: a call counts only when a tool result follows
    it in the text (``vtb_env.completion``). Returns
    ``{"score": reward, **components}``; the judge comes from the ``VTB_JUDGE_*`` variables (see
    ``vtb_rewards.judge.factory``), its request options overridden by ``judge_options`` (set them in
    verl's ``custom_reward_function.reward_kwargs``, e.g. ``{judge_options: {temperature: none}}``).
    """
    judge_env = sorted((name, value) for name, value in os.environ.items() if name.startswith("VTB_JUDGE_"))
    key = json.dumps([dict(judge_options or {}), judge_env], sort_keys=True)
    if key not in _VERL_REWARDS:
        _VERL_REWARDS[key] = default_reward(judge_options=judge_options)
    data = json.loads(ground_truth) if isinstance(ground_truth, (str, bytes)) else ground_truth
    task = _single_turn(Task.from_dict(data), (extra_info or {}).get("turn_index"))
    value, info = _VERL_REWARDS[key](task, record_from_completion(task.id, solution_str))
    return {"score": value, **info}
