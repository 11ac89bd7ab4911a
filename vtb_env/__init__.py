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
