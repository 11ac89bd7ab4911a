"""An episode's state inside the env, what ``info`` shows of its task, and where tasks come from.

``VisualToolBenchEnv`` (``vtb_env/env.py``) drives these: ``EpisodeState`` is one running episode
(its dialogue, counters, record and whether it has ended), ``PendingStep`` one action between
``begin_step`` and ``end_step``. A finished episode is closed: stepping it raises
``EpisodeOverError`` until ``reset``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from vtb_env.loaders import load_tasks
from vtb_env.observation import Dialogue, ImageAsset
from vtb_env.parsers import ParsedAction
from vtb_env.tasks import Task
from vtb_env.tool_images import ToolImages
from vtb_env.trajectory import EpisodeRecord, StepRecord, ToolCallRecord, TurnRecord


class EpisodeOverError(RuntimeError):
    """``step`` or ``truncate`` after the episode ended: nothing more is run, recorded or paid."""


@dataclass
class PendingStep:
    """A parsed action and its planned tool calls: ``begin_step`` makes it, ``execute`` fills in the
    calls' results and images, ``end_step`` applies it. Plain data: it holds no reference to the env."""

    parsed: ParsedAction
    record: StepRecord
    calls: list[ToolCallRecord] = field(default_factory=list)
    new_images: list[ImageAsset] = field(default_factory=list)
    overhead_s: float = 0.0


@dataclass
class EpisodeState:
    task: Task
    record: EpisodeRecord
    info: dict[str, Any]
    dialogue: Dialogue = field(default_factory=Dialogue)
    turn_record: TurnRecord = field(default_factory=lambda: TurnRecord(index=0))
    turn_index: int = 0
    turn_start: int = 0
    calls_in_turn: int = 0
    rounds_in_turn: int = 0
    awaiting_final: bool = False
    tool_images: ToolImages = field(default_factory=ToolImages)
    call_counter: int = 0
    call_ids: set[str] = field(default_factory=set)
    done: bool = False


# Task metadata keys that carry answers (the synthetic generator's values to read): never in ``info``.
ANSWER_METADATA = frozenset({"key_facts"})


def task_info(task: Task) -> dict[str, Any]:
    """What ``info["task"]`` shows: identification and labels, never golden answers, rubrics or answer facts."""
    return {
        "id": task.id,
        "turncase": task.turncase,
        "num_turns": len(task.turns),
        "domain": task.domain,
        "prompt_category": task.prompt_category,
        "eval_focus": task.eval_focus,
        "mode_label": task.mode_label,
        "metadata": copy.deepcopy({key: value for key, value in task.metadata.items() if key not in ANSWER_METADATA}),
    }


def resolve_tasks(tasks: Any) -> tuple[Task, ...]:
    """Tasks from a list of Task, or from any source ``load_tasks`` reads (default: the demo set)."""
    if isinstance(tasks, (list, tuple)) and all(isinstance(task, Task) for task in tasks):
        loaded = tuple(tasks)
    else:
        loaded = tuple(load_tasks("demo" if tasks is None else tasks))
    if not loaded:
        raise ValueError(f"no tasks in {tasks if tasks is not None else 'the demo set'!r}")
    ids = [task.id for task in loaded]
    if len(set(ids)) != len(ids):
        raise ValueError("task ids must be unique")
    return loaded
