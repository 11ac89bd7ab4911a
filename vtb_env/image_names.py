"""The image naming rule, the one place it is computed: the model refers to images by these names.

Task images are numbered from 1 across the whole task (``image_1.png``, ``image_2.png``, ... in
turn order); images made by tools are numbered from 0 per episode (``transformed_image_0.png``, ...).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vtb_env.tasks import Task

TOOL_IMAGE_NAME = re.compile(r"transformed_image_(\d+)\.png")


def task_image_name(k: int) -> str:
    """The name of the task's k-th image (from 1, counted across turns)."""
    return f"image_{k}.png"


def tool_image_name(index: int) -> str:
    """The name of the episode's index-th tool-made image (from 0)."""
    return f"transformed_image_{index}.png"


def first_image_number(task: "Task", turn_index: int) -> int:
    """The number ``k`` of the first image of turn ``turn_index``."""
    return sum(len(turn.images) for turn in task.turns[:turn_index]) + 1


def turn_image_names(task: "Task", turn_index: int) -> list[str]:
    """The names of the images turn ``turn_index`` shows."""
    first = first_image_number(task, turn_index)
    return [task_image_name(first + j) for j in range(len(task.turns[turn_index].images))]
