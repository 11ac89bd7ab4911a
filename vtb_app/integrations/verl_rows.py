"""verl dataset rows and YAML configs for VisualToolBench (no verl import: build data anywhere).

Two ways to train with verl (``vtb_app.integrations.verl`` has the classes):

* ``agent_row`` -> ``agent_name: vtb_agent``: the ``VTBAgentLoop`` plays the whole task in a
  ``VisualToolBenchEnv`` (all turns, their images, any tool-call format, the tool cap, the env's
  reward). The task and its images are stored once per row in ``extra_info``.
* ``tool_agent_row`` -> ``agent_name: tool_agent``: verl's own ``ToolAgentLoop`` with the
  ``VTBTool`` adapter; one row per task turn (verl's loop has one user turn), later-turn rows
  carry the earlier turns (their golden answers as the assistant replies). The reward is
  ``vtb_rewards.grpo.compute_score`` (``reward.custom_reward_function.path: pkg://vtb_rewards.grpo``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Sequence

from vtb_env.image_names import turn_image_names
from vtb_env.tasks import ImageRef, Task
from vtb_rewards.grpo import ROW_IMAGES_KEY

DATA_SOURCE = "visualtoolbench"
AGENT_NAME = "vtb_agent"
DEFAULT_FACTORY = "vtb_env.tools:default_tools"
DEFAULT_REWARD_FACTORY = "vtb_rewards:default_reward"  # the env's default reward (judge from VTB_JUDGE_*)
TASK_KEY, IMAGES_KEY = "vtb_task", ROW_IMAGES_KEY  # extra_info keys of agent rows; IMAGES_KEY also in tools_kwargs


def task_images(task: Task, turns: int | None = None) -> list[bytes]:
    """The bytes of the images of the first ``turns`` turns (all by default), in order: image_1.png, ..."""
    return [ref.read_bytes() for turn in task.turns[:turns] for ref in turn.images]


def agent_row(task: Task, *, index: int = 0) -> dict[str, Any]:
    """A ``vtb_agent`` row: the whole task (JSON) and its images, each stored once."""
    first = task.turns[0]
    return {
        "data_source": DATA_SOURCE,
        "agent_name": AGENT_NAME,
        "prompt": [{"role": "user", "content": first.prompt}],  # for verl's length filter; the env builds the real one
        "reward_model": {"style": "env", "ground_truth": task.id},
        "extra_info": {"index": index, TASK_KEY: json.dumps(task.to_dict()), IMAGES_KEY: task_images(task)},
    }


def task_from_row(extra_info: dict[str, Any]) -> Task:
    """The task an ``agent_row`` carries, with its images in memory."""
    try:
        task = Task.from_dict(json.loads(extra_info[TASK_KEY]))
        images = list(extra_info[IMAGES_KEY])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"not a vtb_agent row (extra_info needs {TASK_KEY!r} and {IMAGES_KEY!r}; see agent_row): {exc}"
        ) from exc
    count = sum(len(turn.images) for turn in task.turns)
    if count != len(images):
        raise ValueError(f"task {task.id!r} names {count} images but the row stores {len(images)}")
    data = iter(images)
    turns = tuple(
        replace(turn, images=tuple(ImageRef(name=ref.name, data=bytes(next(data))) for ref in turn.images))
        for turn in task.turns
    )
    return replace(task, turns=turns)


def tool_agent_row(
    task: Task,
    tool_names: Sequence[str],
    *,
    turn_index: int = 0,
    show_images: bool = True,
    system_prompt: str | None = None,
    index: int = 0,
) -> dict[str, Any]:
    """A ``tool_agent`` row for one task turn, with the earlier turns as dialogue.

    ``show_images``: the images go in verl's ``images`` column with ``<image>`` markers (a VLM
    policy sees them; the tools read the same bytes from the prompt). ``False`` for a text-only
    policy: the prompt names the images and the tools get their bytes from
    ``tools_kwargs["vtb_images"]``. A task with key facts (a synthetic one) also keeps its images in
    ``extra_info["vtb_images"]`` when shown: ``compute_score`` replays the response's vision calls on them to
    judge what they revealed (``vtb_env.replay``); otherwise each image is stored once.
    """
    if not 0 <= turn_index < len(task.turns):
        raise ValueError(f"task {task.id!r} has {len(task.turns)} turns; turn_index {turn_index} is out of range")
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}] if system_prompt else []
    for k, turn in enumerate(task.turns[: turn_index + 1]):
        names = turn_image_names(task, k)
        marker = "<image>" if show_images else ""
        messages.append({"role": "user", "content": turn.prompt + "".join(f"\n[{name}]{marker}" for name in names)})
        if k < turn_index:
            messages.append({"role": "assistant", "content": turn.golden_answer})
    create_kwargs = {"task_id": task.id, "turn_index": turn_index}
    tools_kwargs: dict[str, Any] = {name: {"create_kwargs": create_kwargs} for name in tool_names}
    images = task_images(task, turn_index + 1)
    row: dict[str, Any] = {
        "data_source": DATA_SOURCE,
        "agent_name": "tool_agent",
        "prompt": messages,
        "reward_model": {"style": "rule", "ground_truth": json.dumps(task.to_dict())},
        "extra_info": {
            "index": index,
            "turn_index": turn_index,
            "need_tools_kwargs": True,
            "tools_kwargs": tools_kwargs,
        },
    }
    if show_images:
        row["images"] = [{"bytes": data} for data in images]
        if task.metadata.get("key_facts"):
            row["extra_info"][IMAGES_KEY] = images
    else:
        tools_kwargs[IMAGES_KEY] = images
    return row


def tools_config(
    tool_names: Sequence[str], factory: str = DEFAULT_FACTORY, *, return_images: bool = True
) -> dict[str, Any]:
    """The verl tools YAML (``rollout.multi_turn.tool_config_path``) offering ``tool_names`` as ``VTBTool``.

    ``return_images=False`` for text-only policies (verl refuses tool images without a processor).
    """
    return {
        "tools": [
            {
                "class_name": "vtb_app.integrations.verl.VTBTool",
                "config": {"type": "native", "tool": name, "factory": factory, "return_images": return_images},
                "tool_schema": None,
            }
            for name in tool_names
        ]
    }


def agent_loop_config(
    factory: str = DEFAULT_FACTORY, reward_factory: str = DEFAULT_REWARD_FACTORY, **env: Any
) -> list[dict[str, Any]]:
    """The verl agent-loop YAML (``rollout.agent.agent_loop_config_path``) registering ``vtb_agent``.

    ``env``: ``EnvConfig`` fields (``preset``, ``max_tool_calls``, ``system_prompt``, ...).
    """
    return [
        {
            "name": AGENT_NAME,
            "_target_": "vtb_app.integrations.verl.VTBAgentLoop",
            "tools_factory": factory,
            "reward_factory": reward_factory,
            "env": dict(env),
        }
    ]
