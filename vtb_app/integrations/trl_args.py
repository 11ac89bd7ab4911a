"""The flags of ``scripts/train_grpo.py``: the environment's (``VTBTrainArguments``) and every ``GRPOConfig`` field.

TRL's own ``TrlParser`` builds them from the two dataclasses, so every field of TRL's ``GRPOConfig``
is a flag (``--learning_rate`` or ``--learning-rate``, ``--beta``, ``--use_vllm``, ...) and
``--config run.yaml`` reads any of them from a YAML file (command-line flags win). The script's own
defaults differ from TRL's where a short CPU-friendly run needs it (``SCRIPT_DEFAULTS``). ``run_tasks``,
``run_tools`` and ``run_env_config`` turn the environment's flags into the run's tasks, tools and env.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Literal, Sequence

from vtb_app.integrations.task_filter import filter_tasks
from vtb_env.config import EnvConfig
from vtb_env.tasks import Task
from vtb_env.tools.base import ToolRegistry

NO_TOOLS = "none"  # --tools none: the env offers no tool

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
        default=None,
        metadata={
            "help": "comma-separated tool names to offer (default: all the env's tools); none: no tools (the "
            "default strong system prompt becomes the no_tools one)"
        },
    )
    task_filter: str | None = dataclasses.field(
        default=None,
        metadata={"help": "keep tasks by turns, label, variant: 'turns=1,label=tool_redundant,variant=map|portfolio'"},
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
    # a real checkpoint (vtb_app.integrations.trl_model)
    chat_template: str | None = dataclasses.field(
        default=None,
        metadata={"help": "a Jinja chat template file, or chatml-text (shipped), for the run (saved with the output)"},
    )
    image_view: str | None = dataclasses.field(
        default=None,
        metadata={"help": "pixels, ocr or ocr-pages: how the policy reads images (default: its tokenizer config's)"},
    )
    ocr_cache: str | None = dataclasses.field(
        default=None, metadata={"help": "a JSON file of OCR reads: loaded when it exists, written back at the end"}
    )
    lora_rank: int = dataclasses.field(default=0, metadata={"help": "LoRA rank through peft (0: train the weights)"})
    lora_alpha: float | None = dataclasses.field(default=None, metadata={"help": "LoRA alpha (default: 2 x rank)"})
    lora_dropout: float = dataclasses.field(default=0.0, metadata={"help": "LoRA dropout"})
    lora_target_modules: str = dataclasses.field(
        default="all-linear", metadata={"help": "all-linear, or comma-separated module names (q_proj,v_proj)"}
    )
    train_layers: int = dataclasses.field(
        default=-1,
        metadata={"help": "K: only the top K transformer blocks, the final norm and the head train (-1: all)"},
    )
    bf16_autocast: bool = dataclasses.field(
        default=False,
        metadata={"help": "fp32 weights, forward in bfloat16 autocast (--bf16 true alone loads bf16 weights)"},
    )
    kv_reuse: bool = dataclasses.field(
        default=False, metadata={"help": "keep each episode's KV cache between its rounds (text policies, no vLLM)"}
    )
    loop: Literal["rollout", "environment_factory"] = dataclasses.field(
        default="rollout",
        metadata={
            "help": "who plays the episode: the project's rollout_func (multi-turn, every flag) or TRL's own "
            "tool loop through environment_factory (single-turn tasks)"
        },
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


def run_tasks(args: argparse.Namespace, tasks: Sequence[Task] | None = None) -> list[Task]:
    """The run's tasks: ``tasks`` or those ``args.tasks`` loads, kept by ``args.task_filter``; exits when none."""
    from vtb_env import loaders

    tasks = list(tasks) if tasks is not None else loaders.load_tasks(args.tasks)
    if not tasks:
        raise SystemExit(f"no tasks in {args.tasks!r}")
    try:
        return filter_tasks(tasks, getattr(args, "task_filter", None))
    except ValueError as exc:
        raise SystemExit(f"--task-filter: {exc}") from None


def run_tools(args: argparse.Namespace, tools: ToolRegistry | None = None) -> ToolRegistry:
    """``tools`` (default: the env's default tools) limited to ``args.tools``; ``none`` keeps the registry whole
    (``run_env_config`` withdraws every tool); exits on an unknown name."""
    if tools is None:
        try:
            from vtb_env.tools import default_tools
        except ImportError as exc:
            raise SystemExit(f"the env's default tools are unavailable ({exc}); pass tools= to train()") from exc
        tools = default_tools()
    if args.tools == NO_TOOLS:
        return tools
    try:
        return tools.select(args.tools)
    except ValueError as exc:
        raise SystemExit(f"--tools: {exc}") from exc


def run_env_config(args: argparse.Namespace) -> EnvConfig:
    """The env's configuration from the run's flags (``--tools none``: no tools offered, no-tools prompt)."""
    no_tools = args.tools == NO_TOOLS
    system_prompt = {"none": None, "strong": "no_tools" if no_tools else "strong"}.get(
        args.system_prompt, args.system_prompt
    )
    return EnvConfig.preset(
        "default",
        max_tool_calls=args.max_tool_calls,
        cap_scope=args.cap_scope,
        image_parts="name",
        system_prompt=system_prompt,
        tool_set="none" if no_tools else "all",
        reward_options={"process_credit": args.process_credit, "mode_credit": args.mode_credit},
        answer_format=args.answer_format,
    )
