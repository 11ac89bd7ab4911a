"""GRPO glue: group-relative advantages, a TRL reward function, a verl ``compute_score`` adapter.

All three score a completion with the same ``EpisodeReward`` the environment uses; the
completion is read into an ``EpisodeRecord`` by ``vtb_env.completion.record_from_completion``, and
its calls are judged as the env judges them (``vtb_env.replay.judge_record``: a lookup from its result,
vision calls replayed in the env), so the mode credit pays what it pays through the env.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from vtb_env.completion import record_from_completion
from vtb_env.replay import Replayer, judge_record
from vtb_env.tasks import ImageRef, Task
from vtb_env.trajectory import EpisodeRecord
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


ROW_IMAGES_KEY = "vtb_images"  # where a verl row keeps its images (vtb_app.integrations.verl_rows.IMAGES_KEY)


def _turn(task: Task, turn_index: int | None) -> int:
    index = 0 if turn_index is None else int(turn_index)
    if not 0 <= index < len(task.turns):
        raise ValueError(f"task {task.id} has no turn {index}")
    return index


def _single_turn(task: Task, index: int) -> Task:
    """The task restricted to one turn (the completion answers that turn only). The turn keeps the images its
    prompt shows, those of the turns before it too: a later turn of an image task is still one (the vision
    decision: ``vtb_rewards.mode.counted_tools``), so a search there is no use of tools unless the task needs one."""
    shown = tuple(image for turn in task.turns[: index + 1] for image in turn.images)
    return replace(task, turns=(replace(task.turns[index], images=shown),))


def _judges_reveals(reward: EpisodeReward) -> bool:
    """Does ``reward`` read what calls revealed? Not under ``mode_credit="image_work"`` or ``mode_reading="any"``
    (then nothing is replayed)."""
    config = getattr(reward, "config", None)
    return config is None or (config.mode_reading == "vision" and config.mode_credit == "revealed")


def _scored(
    reward: EpisodeReward, task: Task, index: int, record: EpisodeRecord, replayer: Replayer | None
) -> tuple[float, dict[str, float]]:
    """``reward`` of ``record`` (turn ``index`` of ``task``), its calls judged as the env judges them first."""
    if _judges_reveals(reward):
        judge_record(task, record, index, replayer)
    return reward(_single_turn(task, index), record)


def make_trl_reward_func(
    tasks: Mapping[str, Task],
    reward: EpisodeReward | None = None,
    *,
    task_id_key: str = "task_id",
    judge_options: Mapping[str, Any] | None = None,
    replayer: Replayer | None = None,
) -> Callable[..., list[float]]:
    """A TRL ``reward_funcs`` entry: ``f(prompts, completions, **kwargs) -> list[float]``.

    The dataset needs a ``task_id`` column (TRL passes columns as keyword lists) and may have a
    ``turn_index`` column (default 0). Components of the last call are kept in ``f.last_components``.
    A string completion is the policy's text alone: a tool call in it never ran, so it earns no mode or
    tool-success credit; in a conversational completion a call counts when a ``tool`` message answers it.
    Without ``reward``: the default reward, its judge from ``VTB_JUDGE_*`` with ``judge_options`` over them.
    Answered vision calls are replayed by ``replayer`` (default: the process's, ``vtb_env.replay``).
    """
    episode_reward = reward or default_reward(judge_options=judge_options)

    def vtb_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        task_ids = kwargs.get(task_id_key)
        if task_ids is None:
            raise ValueError(f"the dataset needs a {task_id_key!r} column to find each completion's task")
        turn_indices = kwargs.get("turn_index") or [None] * len(completions)
        scores, components = [], []
        for task_id, completion, turn_index in zip(task_ids, completions, turn_indices, strict=True):
            task = tasks[task_id]
            record = record_from_completion(task_id, completion, results_in_text=False)
            value, info = _scored(episode_reward, task, _turn(task, turn_index), record, replayer)
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

    ``extra_info`` may give ``turn_index`` and the row's images (``vtb_images``, at its top level or in its
    ``tools_kwargs``, as ``tool_agent_row`` stores them for a text-only policy): the ground truth names its
    images only, and replaying a vision call needs them (without them a vision call earns no mode credit on a
    task with key facts); other keywords newer verl versions pass are ignored. The
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
    task = _with_row_images(Task.from_dict(data), extra_info or {})
    index = _turn(task, (extra_info or {}).get("turn_index"))
    value, info = _scored(_VERL_REWARDS[key], task, index, record_from_completion(task.id, solution_str), None)
    return {"score": value, **info}


def _with_row_images(task: Task, extra_info: Mapping[str, Any]) -> Task:
    """``task`` with the row's images (``ROW_IMAGES_KEY``) in memory, in order from ``image_1.png`` (a row holds
    those of the turns up to its own); as it is when the row has none."""
    images = extra_info.get(ROW_IMAGES_KEY) or (extra_info.get("tools_kwargs") or {}).get(ROW_IMAGES_KEY)
    if not images:
        return task
    data = iter(images)

    def held(ref: ImageRef) -> ImageRef:
        image = next(data, None)
        return ref if image is None else ImageRef(ref.name, data=bytes(image))

    return replace(task, turns=tuple(replace(turn, images=tuple(map(held, turn.images))) for turn in task.turns))
