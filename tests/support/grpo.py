"""One GRPO step on CPU, the configuration the trainer tests share."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def one_step_grpo_config(output_dir: Path, **overrides: Any):
    """One GRPO step of a tiny policy on CPU: 2 prompts x 4 generations, a large learning rate so one step
    visibly moves the weights; ``overrides`` replace or add ``GRPOConfig`` fields."""
    from trl import GRPOConfig

    fields: dict[str, Any] = {
        "output_dir": str(output_dir),
        "max_steps": 1,
        "per_device_train_batch_size": 8,
        "num_generations": 4,
        "max_completion_length": 512,
        "learning_rate": 0.05,
        "use_cpu": True,
        "report_to": "none",
        "logging_steps": 1,
        "save_strategy": "no",
        "seed": 1,
        "loss_type": "grpo",
        "beta": 0.0,
    }
    return GRPOConfig(**{**fields, **overrides})
