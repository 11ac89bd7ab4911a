"""vtb-gym: VisualToolBench as a gymnasium environment."""

from vtb_env.loaders import DatasetError, LoadReport, iter_tasks, load_tasks, save_tasks
from vtb_env.tasks import (
    CRITICAL_RULES,
    DOMAINS,
    TASK_CATEGORIES,
    ImageDecodeError,
    ImageRef,
    Rubric,
    Task,
    Turn,
    normalize_domain,
)

__all__ = [
    "CRITICAL_RULES",
    "DatasetError",
    "LoadReport",
    "iter_tasks",
    "load_tasks",
    "save_tasks",
    "DOMAINS",
    "TASK_CATEGORIES",
    "ImageDecodeError",
    "ImageRef",
    "Rubric",
    "Task",
    "Turn",
    "normalize_domain",
]

import gymnasium as _gym

if "VisualToolBench-v0" not in _gym.registry:
    _gym.register(id="VisualToolBench-v0", entry_point="vtb_env.env:VisualToolBenchEnv")
