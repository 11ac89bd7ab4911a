"""vtb-gym: VisualToolBench as a gymnasium environment."""

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
    "DOMAINS",
    "TASK_CATEGORIES",
    "ImageDecodeError",
    "ImageRef",
    "Rubric",
    "Task",
    "Turn",
    "normalize_domain",
]
