"""The learning check's experiment (``scripts/learning_check.py`` is its command line; its docstring says what runs).

Held-out evaluation in the real env (``evaluate_modes``), the supervised bound, the SFT cold start,
GRPO through ``vtb_app.integrations.trl.train``, and the per-step training curve.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from vtb_agents.rollout import ChatRenderer, Episode, HFGenerator, run_episodes
from vtb_app.learning_policies import (
    TEXT_VIEWS,
    build_policy,
    cached_reader,
    load_model,
    load_ocr_cache,
    load_processing_class,
    ocr_cache_file,
    prepare_reading,
)
from vtb_env.batch import EnvPool
from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv
from vtb_env.ocr_view import default_cache
from vtb_env.tasks import Task
from vtb_env.tools.base import ToolRegistry
from vtb_rewards.mode import ConfusionMatrix

GREEDY_TEMPERATURE = 1e-4  # HFGenerator always samples; this makes it the argmax


# The two-action policy's fixed answer meets no rubric, so only process credit can move it: the check
# trains on the unweighted process components (the env's default earns them with the rubric score).
PROCESS_CREDIT = "always"
# The two-action policy's CALL is one fixed zoom: it learns *when* to call, never *what* to look at, so the mode
# credit it can earn is the did-image-work rule's (under the default "revealed" rule its zoom reveals a hidden
# fact on 1 of 17 tool-required v1 tasks of synth:32:1, and no policy of two fixed actions can learn to call)
MODE_CREDIT = "image_work"


def env_config(max_tool_calls: int) -> EnvConfig:
    """What ``train_grpo.train`` builds with ``--system-prompt none``; evaluation uses the same."""
    return EnvConfig.preset(
        "default",
        max_tool_calls=max_tool_calls,
        cap_scope="turn",
        image_parts="name",
        system_prompt=None,
        reward_options={"process_credit": PROCESS_CREDIT, "mode_credit": MODE_CREDIT},
    )


def episode_metrics(episodes: Sequence[Episode]) -> dict[str, float]:
    """Held-out figures: MCC, mode reward, tool-call success, composed reward, tool-use rate."""
    outcomes = [e.mode_outcome for e in episodes if e.mode_outcome is not None]
    mode_rewards = [e.components["mode"] for e in episodes if "mode" in e.components]
    calls = [
        call for e in episodes for call in e.record.tool_calls
    ]  # calls past the cap count as failed, as in the env's tool_success
    confusion = ConfusionMatrix.from_outcomes(outcomes)
    return {
        "mcc": confusion.mcc(),
        "mode_reward": sum(mode_rewards) / len(mode_rewards),
        "tool_call_success": sum(call.error is None for call in calls) / len(calls) if calls else float("nan"),
        "reward": sum(e.reward for e in episodes) / len(episodes),
        "tool_use": sum(e.record.used_tools for e in episodes) / len(episodes),
        **{k: confusion.to_dict()[k] for k in ("TP", "FN", "TN", "FP")},
    }


def evaluate(
    model: Any,
    processor: Any,
    tasks: Sequence[Task],
    tools: ToolRegistry,
    max_tool_calls: int,
    *,
    temperature: float,
    seed: int,
    samples: int = 1,
) -> dict[str, Any]:
    """``samples`` episodes per task in the real env; metrics of ``episode_metrics`` over all of them, and each
    task's outcomes (``outcomes``: task id -> TP/FN/TN/FP per episode)."""
    task_ids = [t.id for t in tasks for _ in range(samples)]
    pool = EnvPool([VisualToolBenchEnv(tasks=tasks, tools=tools, config=env_config(max_tool_calls)) for _ in task_ids])
    try:
        generate = HFGenerator(model, processor, max_new_tokens=1, temperature=temperature)
        episodes = run_episodes(
            pool, task_ids, generate, ChatRenderer(processor), max_completion_tokens=4096, seed=seed
        )
    finally:
        pool.close()
    outcomes: dict[str, list[str]] = {}
    for episode in episodes:  # per task, for reading where a policy errs (docs/training.md)
        outcomes.setdefault(episode.task_id, []).append(episode.mode_outcome or "")
    return {**episode_metrics(episodes), "outcomes": outcomes}


def evaluate_modes(
    model: Any, processor: Any, tasks: Sequence[Task], tools: ToolRegistry, args: argparse.Namespace
) -> dict[str, dict[str, Any]]:
    """``evaluate`` for each of ``--eval-modes`` (sampled: ``--eval-samples`` per task; greedy: one), each from
    the same torch seed."""
    import torch

    settings = {"sampled": (args.temperature, args.eval_samples), "greedy": (GREEDY_TEMPERATURE, 1)}
    figures = {}
    for mode in args.eval_modes.split(","):
        temperature, samples = settings[mode]
        torch.manual_seed(args.seed)
        figures[mode] = evaluate(
            model,
            processor,
            tasks,
            tools,
            args.max_tool_calls,
            temperature=temperature,
            seed=args.seed,
            samples=samples,
        )
    return figures


def training_curve(log_history: Sequence[dict[str, Any]], window: int = 5) -> list[dict[str, float]]:
    """Per optimisation step: mean composed reward, mode reward, tool use and mode MCC of the step's rollouts, and
    with text-only probes (``--label-probes``) how often the groups' online labels disagree with the static ones.

    ``mcc_window`` pools the confusion counts of the last ``window`` steps: a single step's MCC
    is 0 whenever its few tasks happen to share one label.
    """
    counts = ("TP", "FN", "TN", "FP")
    curve = [
        {
            "step": entry["step"],
            "reward": entry["vtb/reward"],
            "mode_reward": entry.get("vtb/reward/mode", float("nan")),
            "mcc": entry.get("vtb/mode/mcc", float("nan")),
            "tool_use": entry.get("vtb/reward/used_tools", float("nan")),
            "label_disagreement": entry.get("vtb/mode/online_label_disagreement", float("nan")),
            **{k: int(entry.get(f"vtb/mode/{k}", 0)) for k in counts},
        }
        for entry in log_history
        if "vtb/reward" in entry
    ]
    for i, point in enumerate(curve):
        pooled = {k.lower(): sum(p[k] for p in curve[max(0, i - window + 1) : i + 1]) for k in counts}
        point["mcc_window"] = ConfusionMatrix(**pooled).mcc()
    return curve


def load_learning_tasks(
    spec: str, generator: str, reader: Callable[[Any], str] | None = None, ocr_workers: int = 2
) -> list[Task]:
    """``synth:N:SEED`` from ``generator``; any other ``vtb_env.loaders`` source as it is; every task mode-labelled.

    ``reader`` (image -> text; synth specs only): keep only the pairs whose labels that reader confirms
    (``vtb_env.synth.stream(solvable=True)``: a tool-required task it cannot solve as shown but can after the
    reference code, a twin it reads as shown)."""
    from vtb_env.loaders import load_tasks
    from vtb_env.loaders.synth import parse_synth_spec
    from vtb_env.synth import generate

    if spec.strip().startswith("synth:"):
        n, seed, _, split = parse_synth_spec(spec)
        confirmed = {"solvable": True, "reader": reader, "prefetch": _reading(ocr_workers)} if reader else {}
        tasks = generate(n, seed, generator=generator, split=split, **confirmed)
    elif reader is not None:
        raise SystemExit(f"{spec!r}: reader labels confirm synth:N:SEED pairs only; use --labels generator")
    else:
        tasks = load_tasks(spec)
    if not tasks or any(t.mode_label is None for t in tasks):
        raise SystemExit(f"{spec!r}: every task needs a mode label (tool_required / tool_redundant)")
    return tasks


def _reading(workers: int) -> Callable[[Sequence[Task]], int]:
    """Fill the OCR cache with a pair's pictures, ``workers`` at a time, before the probe reads them one by one."""
    return lambda pair: default_cache().fill([ref.open() for task in pair for ref in task.images], workers=workers)


def selection(tasks: Sequence[Task]) -> dict[str, int]:
    """How a synthetic set was drawn: tasks, the pairs (generator indices) they come from, and the indices
    scanned for them (with reader labels, ``indices_scanned - pairs`` pairs were refused: the probe did not
    confirm their labels, or the split left them out)."""
    indices = {t.metadata.get("index") for t in tasks if isinstance(t.metadata.get("index"), int)}
    return {"tasks": len(tasks), "pairs": len(indices), "indices_scanned": max(indices) + 1 if indices else 0}


def reader_labels(args: argparse.Namespace) -> Callable[[Any], str] | None:
    """The probe's reader for ``--labels reader`` (the text policies' own readings, through the OCR cache)."""
    return cached_reader if args.labels == "reader" else None


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
        _print_eval("held-out before training", result["before"])
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
        _print_eval("held-out after training", result["after"])
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
    _print_eval(f"held-out {args.eval_tasks}, {policy}", figures)
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
    _print_eval("held-out, supervised bound", figures)
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
    from vtb_agents.rollout import policy_view
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
    _print_eval(f"held-out after {args.sft_steps} SFT steps", figures)
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


def _print_eval(title: str, figures: dict[str, dict[str, float]]) -> None:
    for mode, m in figures.items():
        print(
            f"{title} ({mode}): MCC {m['mcc']:+.3f}  mode reward {m['mode_reward']:.3f}  "
            f"tool-call success {m['tool_call_success']:.3f}  reward {m['reward']:.4f}  tool use {m['tool_use']:.2f}  "
            f"TP/FN/TN/FP {m['TP']}/{m['FN']}/{m['TN']}/{m['FP']}",
            flush=True,
        )
