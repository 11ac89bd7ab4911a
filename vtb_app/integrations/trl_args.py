"""The flags of ``scripts/train_grpo.py``: the environment's (``VTBTrainArguments``) and every ``GRPOConfig`` field.

TRL's own ``TrlParser`` builds them from the two dataclasses, so every field of TRL's ``GRPOConfig``
is a flag (``--learning_rate`` or ``--learning-rate``, ``--beta``, ``--use_vllm``, ...) and
``--config run.yaml`` reads any of them from a YAML file (command-line flags win). The script's own
defaults differ from TRL's where a short CPU-friendly run needs it (``SCRIPT_DEFAULTS``).
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Literal, Sequence

# GRPOConfig fields whose default here differs from TRL's.
SCRIPT_DEFAULTS = {
    "output_dir": "runs/grpo",
    "seed": 0,
    "max_steps": 100,
    "bf16": False,
    "logging_steps": 1,
    "save_strategy": "no",
    "report_to": "none",
}


def checkpointing(config_class: type, enabled: bool) -> dict[str, bool | None]:
    """Activation checkpointing for a ``TrainingArguments`` subclass by transformers' current name, leaving the
    deprecated alias ``gradient_checkpointing`` (gone in v6) unset; the old name before transformers renamed it."""
    if "activation_checkpointing" in {field.name for field in dataclasses.fields(config_class)}:
        return {"activation_checkpointing": enabled, "gradient_checkpointing": None}
    return {"gradient_checkpointing": enabled}


LABEL_PROBES_HELP = (
    "K: in every group, the last K rollouts run without tools (text-only probes) and the group's mode label is "
    "tool_redundant when a rollout that used no tool passed; 0: the tasks' static labels (docs/training.md)"
)


@dataclasses.dataclass
class VTBTrainArguments:
    """The environment's side of a GRPO run on VisualToolBench."""

    model: str = dataclasses.field(
        metadata={"help": "local checkpoint directory (causal LM or VLM with a tool-aware chat template)"}
    )
    tasks: str = dataclasses.field(
        default="synth:64:0", metadata={"help": "synth:N:SEED, or any vtb_env.loaders source (parquet, directory)"}
    )
    tools: str | None = dataclasses.field(
        default=None, metadata={"help": "comma-separated tool names to offer (default: all the env's tools)"}
    )
    tasks_per_step: int = dataclasses.field(
        default=2, metadata={"help": "groups per optimisation step per process: sets per_device_train_batch_size"}
    )
    max_episode_tokens: int = dataclasses.field(
        default=4096, metadata={"help": "completion budget per episode (policy + env tokens)"}
    )
    max_tool_calls: int = dataclasses.field(default=5, metadata={"help": "the env's tool-call cap (per --cap_scope)"})
    cap_scope: Literal["task", "turn"] = dataclasses.field(
        default="task", metadata={"help": "the cap counts calls per task (the paper) or per turn"}
    )
    system_prompt: str = dataclasses.field(default="strong", metadata={"help": "strong, weak, none, or text"})
    process_credit: Literal["earned", "always"] = dataclasses.field(
        default="earned",
        metadata={"help": "mode/format/tool-success credit weighted by the rubric score (earned) or not (always)"},
    )
    mode_credit: Literal["revealed", "image_work"] = dataclasses.field(
        default="revealed",
        metadata={
            "help": "a Tool-Required task's mode credit needs a call that revealed what it hides (revealed) "
            "or any call that did image work (image_work: a fixed call action)"
        },
    )
    label_probes: int = dataclasses.field(default=0, metadata={"help": LABEL_PROBES_HELP})
    answer_format: Literal["free", "slot"] = dataclasses.field(
        default="free",
        metadata={"help": "exact checks read the whole answer (free) or only its final 'Answer:' line (slot)"},
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The environment's fields and every ``GRPOConfig`` field, flat, plus ``grpo`` (the ``GRPOConfig``) and
    ``max_new_tokens`` (tokens per policy step: ``max_completion_length``, also the flag ``--max-new-tokens``)."""
    import torch
    from trl import GRPOConfig, TrlParser

    parser = TrlParser((VTBTrainArguments, GRPOConfig))
    parser.description = "GRPO on VisualToolBench with TRL: multi-turn, tool-using rollouts in the real environment."
    # checkpointing on, as TRL has it
    parser.set_defaults(**SCRIPT_DEFAULTS, **checkpointing(GRPOConfig, True), use_cpu=not torch.cuda.is_available())
    parser.add_argument("--max-new-tokens", "--max_new_tokens", dest="max_completion_length", type=int, help="alias")
    env, grpo = parser.parse_args_and_config(None if argv is None else list(argv))
    grpo.per_device_train_batch_size = env.tasks_per_step * grpo.num_generations
    values = {field.name: getattr(grpo, field.name) for field in dataclasses.fields(GRPOConfig)}
    return argparse.Namespace(**values, **vars(env), grpo=grpo, max_new_tokens=grpo.max_completion_length)
