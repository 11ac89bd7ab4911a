"""The learning check's experiment (``scripts/learning_check.py`` is its command line; its docstring says what runs).

The stages: held-out evaluation before training (``learning_eval.evaluate_modes``), the supervised bound,
the SFT cold start, GRPO through ``vtb_app.integrations.trl.train``, held-out evaluation after it, and the
per-step training curve (``learning_eval.training_curve``). The task sets: ``learning_tasks``.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from vtb_app.learning_eval import MODE_CREDIT, PROCESS_CREDIT, env_config, evaluate_modes, print_eval, training_curve
from vtb_app.learning_policies import (
    TEXT_VIEWS,
    build_policy,
    load_model,
    load_ocr_cache,
    load_processing_class,
    ocr_cache_file,
    prepare_reading,
)
from vtb_app.learning_tasks import load_learning_tasks, reader_labels, selection
from vtb_env.ocr_view import default_cache
from vtb_env.tasks import Task
from vtb_env.tools.base import ToolRegistry


def cpu_seconds() -> float:
    """CPU time of this process (all threads) and of its children that have finished."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def run(args: argparse.Namespace, *, tools: ToolRegistry | None = None) -> dict[str, Any]:
    """The whole experiment; returns the curve, the held-out figures before/after and timings."""
    from vtb_env.tools.python_tools import PythonImageProcessing

    start, cpu_start, misses = time.perf_counter(), cpu_seconds(), default_cache().misses
    loaded = load_ocr_cache(args) if args.policy in TEXT_VIEWS or args.labels == "reader" else 0
    reader = reader_labels(args)
    train_tasks = load_learning_tasks(args.tasks, args.generator, reader, args.ocr_workers)
    eval_tasks = load_learning_tasks(args.eval_tasks, args.generator, reader, args.ocr_workers)
    labels = {
        "labels": args.labels,
        "train": selection(train_tasks),
        "eval": selection(eval_tasks),
        "read": default_cache().misses - misses,
        "seconds": time.perf_counter() - start,
    }
    if reader is not None and labels["read"] and ocr_cache_file(args) is not None:
        default_cache().save(ocr_cache_file(args))
    from vtb_app.integrations import trl as train_grpo

    own_tools = tools is None
    tools = tools if tools is not None else ToolRegistry([PythonImageProcessing()])
    scratch = None if args.policy_dir else tempfile.TemporaryDirectory(prefix="vtb-learning-")
    policy_dir = Path(args.policy_dir or scratch.name)
    result: dict[str, Any] = {
        "tasks": args.tasks,
        "eval_tasks": args.eval_tasks,
        "generator": args.generator,
        "n_train_tasks": len(train_tasks),
        "n_eval_tasks": len(eval_tasks),
        "policy": args.policy,
        "labels": labels,
        "args": vars(args),
    }
    try:
        result["ocr"] = prepare_reading(args, [*train_tasks, *eval_tasks], loaded)
        policy = build_policy(args, policy_dir / "init")
        processor = load_processing_class(policy)
        result["before"] = evaluate_modes(load_model(policy), processor, eval_tasks, tools, args)
        print_eval("held-out before training", result["before"])
        if args.supervised_epochs:
            result["supervised"] = supervised_bound(policy, processor, train_tasks, eval_tasks, tools, args)
        if args.sft_steps:
            result["sft"] = sft_stage(policy, processor, train_tasks, eval_tasks, tools, args, policy_dir / "sft")
            policy = Path(result["sft"]["path"])
        train_start, train_cpu = time.perf_counter(), cpu_seconds()
        trainer = train_grpo.train(
            _grpo_args(train_grpo, args, policy, policy_dir / "trained"), tasks=train_tasks, tools=tools
        )
        result["train_seconds"] = time.perf_counter() - train_start
        result["train_cpu_seconds"] = cpu_seconds() - train_cpu
        result["curve"] = training_curve(trainer.state.log_history)
        result["after"] = evaluate_modes(trainer.model, processor, eval_tasks, tools, args)
        print_eval("held-out after training", result["after"])
        if args.policy in TEXT_VIEWS:
            read = default_cache().misses - misses
            result["ocr"]["read_during_run"] = read - result["ocr"]["read"] - labels["read"]
            if ocr_cache_file(args) is not None:
                default_cache().save(ocr_cache_file(args))
    finally:
        if own_tools:
            tools.close()
        if scratch is not None:
            scratch.cleanup()
    result["total_seconds"] = time.perf_counter() - start
    result["total_cpu_seconds"] = cpu_seconds() - cpu_start
    return result


def evaluate_saved(args: argparse.Namespace, policy: Path, *, tools: ToolRegistry | None = None) -> dict[str, Any]:
    """A saved policy (e.g. a run's ``--policy-dir``/trained) on ``--eval-tasks``, under the same labels and
    evaluation as ``run``: how a trained policy fares on other held-out seeds."""
    from vtb_env.tools.python_tools import PythonImageProcessing

    start = time.perf_counter()
    load_ocr_cache(args)
    eval_tasks = load_learning_tasks(args.eval_tasks, args.generator, reader_labels(args), args.ocr_workers)
    own_tools = tools is None
    tools = tools if tools is not None else ToolRegistry([PythonImageProcessing()])
    try:
        figures = evaluate_modes(load_model(policy), load_processing_class(policy), eval_tasks, tools, args)
    finally:
        if own_tools:
            tools.close()
    if ocr_cache_file(args) is not None and default_cache().misses:
        default_cache().save(ocr_cache_file(args))
    print_eval(f"held-out {args.eval_tasks}, {policy}", figures)
    return {
        "policy_path": str(policy),
        "eval_tasks": args.eval_tasks,
        "n_eval_tasks": len(eval_tasks),
        "labels": {"labels": args.labels, "eval": selection(eval_tasks)},
        "held_out": figures,
        "seconds": time.perf_counter() - start,
    }


def supervised_bound(
    policy: Path,
    processor: Any,
    train_tasks: Sequence[Task],
    eval_tasks: Sequence[Task],
    tools: ToolRegistry,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """A copy of the initial policy trained on the labels (``vtb_agents.mode_supervision``), evaluated held-out."""
    import torch

    from vtb_agents.mode_supervision import first_decisions, fit_mode_labels

    start, cpu_start = time.perf_counter(), cpu_seconds()
    torch.manual_seed(args.seed)
    model = load_model(policy)
    decisions = first_decisions(train_tasks, processor, tools, env_config(args.max_tool_calls))
    history = fit_mode_labels(
        model,
        processor,
        decisions,
        epochs=args.supervised_epochs,
        learning_rate=args.supervised_learning_rate,
        seed=args.seed,
    )
    for entry in history:
        print(f"supervised epoch {entry['epoch']}: loss {entry['loss']:.4f}  train accuracy {entry['accuracy']:.3f}")
    figures = evaluate_modes(model, processor, eval_tasks, tools, args)
    print_eval("held-out, supervised bound", figures)
    return {
        "history": history,
        "held_out": figures,
        "seconds": time.perf_counter() - start,
        "cpu_seconds": cpu_seconds() - cpu_start,
    }


def sft_stage(
    policy: Path,
    processor: Any,
    train_tasks: Sequence[Task],
    eval_tasks: Sequence[Task],
    tools: ToolRegistry,
    args: argparse.Namespace,
    out: Path,
) -> dict[str, Any]:
    """Export the training tasks' reference conversations (all offline tools, no system prompt, the check's cap:
    a turn's calls past ``--max-tool-calls`` are left out, as an episode would not run them), run ``--sft-steps``
    of TRL's SFTTrainer on them from ``policy``, evaluate held-out."""
    from vtb_agents.chat_render import policy_view
    from vtb_app.integrations.trl_sft import sft_cold_start
    from vtb_env.sft import export_sft
    from vtb_env.tools import default_tools

    start, cpu_start = time.perf_counter(), cpu_seconds()
    reference_tools = default_tools()
    try:
        data, rows, skipped = export_sft(
            train_tasks, out / "data", reference_tools, env_config(args.max_tool_calls), policy_view(processor)
        )
    finally:
        reference_tools.close()
    print(f"SFT data: {rows} reference conversations ({len(skipped)} skipped) in {data}")
    cold = sft_cold_start(
        policy,
        data,
        out / "model",
        max_steps=args.sft_steps,
        learning_rate=args.sft_learning_rate,
        batch_size=args.sft_batch_size,
        seed=args.seed,
    )
    figures = evaluate_modes(load_model(cold.path), processor, eval_tasks, tools, args)
    print_eval(f"held-out after {args.sft_steps} SFT steps", figures)
    return {
        "path": str(cold.path),
        "rows": rows,
        "skipped": len(skipped),
        "log": [e for e in cold.log_history if "loss" in e],
        "held_out": figures,
        "seconds": time.perf_counter() - start,
        "cpu_seconds": cpu_seconds() - cpu_start,
    }


def _grpo_args(train_grpo: Any, args: argparse.Namespace, policy: Path, output_dir: Path) -> argparse.Namespace:
    return train_grpo.parse_args(
        [
            "--model",
            str(policy),
            "--output-dir",
            str(output_dir),
            "--tasks",
            args.tasks,
            "--num-generations",
            str(args.num_generations),
            "--tasks-per-step",
            str(args.tasks_per_step),
            "--max-steps",
            str(args.max_steps),
            "--learning-rate",
            str(args.learning_rate),
            "--temperature",
            str(args.temperature),
            "--max-new-tokens",
            "1",
            "--max-tool-calls",
            str(args.max_tool_calls),
            "--cap-scope",
            "turn",
            "--system-prompt",
            "none",
            "--loss-type",
            "grpo",
            "--seed",
            str(args.seed),
            "--process-credit",
            PROCESS_CREDIT,
            "--mode-credit",
            MODE_CREDIT,
            "--label-probes",
            str(getattr(args, "label_probes", 0)),
            "--lr-scheduler-type",
            getattr(args, "lr_scheduler_type", "linear"),
        ]
    )
