"""A task's images as the dialogue shows them (``image_<k>.png``), cached across episodes.

Training resets the same tasks again and again: the cache keeps the last few tasks' images read
and encoded once. ``VisualToolBenchEnv`` holds one per env. A dataset image whose decoding work its
structure does not bound (``vtb_env.sandbox.plain``) is shown as the image sandbox re-encodes it
(``vtb_env.image_checks.shown_dataset_image``), so no consumer decodes a bomb.
"""

from __future__ import annotations

from collections import OrderedDict

from vtb_env.image_checks import shown_dataset_image
from vtb_env.image_names import first_image_number, task_image_name
from vtb_env.observation import ImageAsset
from vtb_env.tasks import ImageDecodeError, ImageRef, Task

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
            asset = self._assets[key] = ImageAsset(task_image_name(k), lambda: _shown(task, ref))
            if len(self._assets) > self.size:
                self._assets.popitem(last=False)
        else:
            self._assets.move_to_end(key)
        return asset


def _shown(task: Task, ref: ImageRef) -> bytes:
    try:
        return shown_dataset_image(ref.read_bytes())
    except ImageDecodeError as exc:
        raise ImageDecodeError(f"task {task.id}, {ref.name}: {exc}") from exc
