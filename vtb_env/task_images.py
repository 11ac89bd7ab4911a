"""A task's images as the dialogue shows them (``image_<k>.png``), cached across episodes.

Training resets the same tasks again and again: the cache keeps the last few tasks' images read
and encoded once. ``VisualToolBenchEnv`` holds one per env.
"""

from __future__ import annotations

from collections import OrderedDict

from vtb_env.image_names import first_image_number, task_image_name
from vtb_env.observation import ImageAsset
from vtb_env.tasks import ImageRef, Task

TASK_IMAGE_CACHE_SIZE = 32


class TaskImageCache:
    """The images of a task's turns as ``ImageAsset``s, least recently used dropped past ``size``."""

    def __init__(self, size: int = TASK_IMAGE_CACHE_SIZE):
        self.size = size
        self._assets: OrderedDict[tuple[str, int], ImageAsset] = OrderedDict()

    def turn_images(self, task: Task, turn_index: int) -> list[ImageAsset]:
        """The images turn ``turn_index`` brings, numbered on from the turns before it."""
        first = first_image_number(task, turn_index)
        return [self._asset(task, first + j, ref) for j, ref in enumerate(task.turns[turn_index].images)]

    def _asset(self, task: Task, k: int, ref: ImageRef) -> ImageAsset:
        key = (task.id, k)
        asset = self._assets.get(key)
        if asset is None:
            asset = self._assets[key] = ImageAsset(task_image_name(k), ref.read_bytes)
            if len(self._assets) > self.size:
                self._assets.popitem(last=False)
        else:
            self._assets.move_to_end(key)
        return asset
