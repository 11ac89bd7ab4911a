"""Does a real pretrained LM learn to *answer* through the environment? base -> SFT -> GRPO, with a control.

For each training seed: the base checkpoint, an SFT warm-up on the training tasks' reference conversations
(``vtb_env.sft`` through the OCR view, ``vtb_app.integrations.trl_sft``), GRPO from the SFT model through
``vtb_app.integrations.trl.train``, and the same GRPO with the rewards shuffled across each batch (the control: same
updates, same reward scale, no link between an episode and its reward). Every stage is evaluated on held-out tasks
of a synth seed never trained on (``vtb_app.answer_eval``). No tools are offered, so what the policy can learn is to
answer; a text LM reads the question and the words Tesseract reads in the pictures (``--image-view ocr``, attached
with ``--chat-template`` to the SFT checkpoint, so GRPO and every evaluation read the same text).
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from vtb_app.answer_eval import AnswerRow, evaluate_policy, rows_as_dicts, summarize
from vtb_app.integrations.trl import EnvRollout
from vtb_app.learning_check import cpu_seconds
from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv
from vtb_env.tasks import Task
from vtb_env.tools.base import ToolRegistry

SYSTEM_PROMPT = "no_tools"


class ShuffledRewardRollout(EnvRollout):
    """``EnvRollout`` whose episodes' rewards are permuted across the batch before the trainer reads them: the
    shuffled-reward control (the reward distribution and update sizes stay, their link to the episodes goes)."""

    def __call__(self, prompts: list[list[dict[str, Any]]], trainer: Any) -> dict[str, Any]:
        output = super().__call__(prompts, trainer)
        episodes = output["vtb_episode"]
        rewards = [episode.reward for episode in episodes]
        random.Random(self.args.seed * 7919 + self.calls).shuffle(rewards)
        for episode, reward in zip(episodes, rewards, strict=True):
            episode.reward = reward
        return output


def env_config() -> EnvConfig:
    """No tools, the no-tools system prompt, images by name (the OCR view replaces them), the default reward."""
    return EnvConfig.preset("default", tool_set="none", image_parts="name", system_prompt=SYSTEM_PROMPT)


def held_out(path: Path, tasks: Sequence[Task], args: argparse.Namespace) -> dict[str, Any]:
    """``evaluate_policy`` of the checkpoint at ``path``: its rows, summary, wall and CPU seconds."""
    start, cpu_start = time.perf_counter(), cpu_seconds()
    from vtb_app.integrations.trl_model import load_policy

    policy = load_policy(path, chat_template=args.chat_template, image_view=args.image_view)
    rows = evaluate_policy(
        policy.model,
        policy.processing_class,
        tasks,
        lambda: VisualToolBenchEnv(tasks=list(tasks), tools=ToolRegistry([]), config=env_config()),
        samples=args.eval_samples,
        temperature=args.temperature,
        max_new_tokens=args.max_new_tokens,
        max_episode_tokens=args.max_episode_tokens,
        seed=args.eval_seed,
    )
    return _timed(rows, start, cpu_start)


def _timed(rows: list[AnswerRow], start: float, cpu_start: float) -> dict[str, Any]:
    return {
        "summary": summarize(rows),
        "rows": rows_as_dicts(rows),
        "seconds": time.perf_counter() - start,
        "cpu_seconds": cpu_seconds() - cpu_start,
    }


def sft_data(tasks: Sequence[Task], out: Path, image_view: str | None) -> tuple[Path, int]:
    """The training tasks' reference conversations as the policy reads them (OCR view, no tools): tasks whose
    reference calls a tool cannot replay without one and are left out."""
    from vtb_env.ocr_view import VIEWS, make_view
    from vtb_env.sft import export_sft

    path, rows, _ = export_sft(
        tasks, out, ToolRegistry([]), env_config(), make_view(image_view if image_view in VIEWS else None)
    )
    if rows == 0:
        raise SystemExit("no training task replays without tools: no SFT data")
    return path, rows


def grpo_args(policy: Path, output_dir: Path, seed: int, args: argparse.Namespace) -> argparse.Namespace:
    """``vtb_app.integrations.trl.parse_args`` for one GRPO stage from ``policy``."""
    from vtb_app.integrations.trl import parse_args

    flags = {
        "--model": policy,
        "--output-dir": output_dir,
        "--tasks": args.tasks,
        "--num-generations": args.num_generations,
        "--tasks-per-step": args.tasks_per_step,
        "--max-steps": args.grpo_steps,
        "--learning-rate": args.grpo_learning_rate,
        "--temperature": args.temperature,
        "--max-new-tokens": args.max_new_tokens,
        "--max-episode-tokens": args.max_episode_tokens,
        "--tools": "none",
        "--seed": seed,
        "--beta": 0.0,
        "--lr-scheduler-type": "constant",
        "--lora-rank": args.grpo_lora_rank,
        "--train-layers": args.grpo_train_layers,
    }
    parsed = parse_args([str(part) for flag, value in flags.items() for part in (flag, value)])
    parsed.label_probes = args.label_probes
    return parsed


def grpo_stage(policy: Path, output_dir: Path, seed: int, args: argparse.Namespace, rollout: type) -> dict[str, Any]:
    """GRPO from ``policy`` (``rollout``: ``EnvRollout`` or the control); its per-step log and CPU seconds."""
    from vtb_app.integrations.trl import train

    start, cpu_start = time.perf_counter(), cpu_seconds()
    trainer = train(
        grpo_args(policy, output_dir, seed, args), tasks=args.train_tasks, tools=ToolRegistry([]), rollout_class=rollout
    )
    log = [entry for entry in trainer.state.log_history if "reward" in entry]
    return {"log": log, "seconds": time.perf_counter() - start, "cpu_seconds": cpu_seconds() - cpu_start}


def run_seed(
    seed: int,
    base: Path,
    eval_tasks: Sequence[Task],
    data: Path | None,
    args: argparse.Namespace,
    stages: dict[str, Any],
    saved: Callable[[], None],
) -> None:
    """The stages of ``args.stages`` for one training seed (SFT, GRPO, the control), each evaluated held-out.
    GRPO and the control start from this run's SFT model, or from ``args.sft_model`` when SFT is not a stage here
    (several processes can then share one seed's stages). Each finished stage goes into ``stages``, then
    ``saved()`` is called."""
    out = args.out / f"seed{seed}"
    sft_path = args.sft_model
    if "sft" in args.stages:
        stages["sft"] = sft_stage(base, data, out / "sft", seed, args)
        sft_path = Path(stages["sft"]["path"])
        stages["sft"]["held_out"] = held_out(sft_path, eval_tasks, args)
        _print_stage(seed, "sft", stages["sft"])
        saved()
    for name, rollout in (("grpo", EnvRollout), ("control", ShuffledRewardRollout)):
        if name in args.stages:
            if sft_path is None:
                raise SystemExit(f"stage {name} starts from an SFT model: add the stage sft or give --sft-model")
            stages[name] = {"train": grpo_stage(sft_path, out / name, seed, args, rollout)}
            stages[name]["held_out"] = held_out(out / name, eval_tasks, args)
            _print_stage(seed, name, stages[name])
            saved()


def sft_stage(base: Path, data: Path, output_dir: Path, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """``args.sft_steps`` of TRL's SFTTrainer from ``base`` on ``data`` (``args.chat_template`` and the OCR view
    attached, and saved with the model, so GRPO and evaluation read the same text): where it saved, its loss
    log, CPU seconds."""
    from vtb_app.integrations.trl_sft import sft_cold_start

    start, cpu_start = time.perf_counter(), cpu_seconds()
    cold = sft_cold_start(
        base,
        data,
        output_dir,
        max_steps=args.sft_steps,
        learning_rate=args.sft_learning_rate,
        batch_size=args.sft_batch_size,
        seed=seed,
        chat_template=args.chat_template,
        image_view=args.image_view,
    )
    train = {
        "log": [entry for entry in cold.log_history if "loss" in entry],
        "seconds": time.perf_counter() - start,
        "cpu_seconds": cpu_seconds() - cpu_start,
    }
    return {"path": str(cold.path), "train": train}


def _print_stage(seed: Any, name: str, stage: dict[str, Any]) -> None:
    greedy = stage["held_out"]["summary"]["greedy"]
    train_cpu = stage.get("train", {}).get("cpu_seconds", 0.0)
    print(
        f"seed {seed} {name}: greedy reward {greedy['reward']:.3f} rubric {greedy['rubric']:.3f} "
        f"pass {greedy['passed']:.3f} rubric>0 {greedy['tasks_rubric_pos']:.0f}/{greedy['n_tasks']}  "
        f"train CPU-s {train_cpu:.0f}  eval CPU-s {stage['held_out']['cpu_seconds']:.0f}",
        flush=True,
    )


def run(args: argparse.Namespace, save: Callable[[dict[str, Any]], None] = lambda result: None) -> dict[str, Any]:
    """The whole check; returns what ``scripts/answer_check.py`` writes as JSON, and gives it to ``save`` after
    every stage (a long run keeps what it finished)."""
    from vtb_env import loaders

    args.train_tasks = loaders.load_tasks(args.tasks)
    eval_tasks = loaders.load_tasks(args.eval_tasks)
    if {t.id for t in args.train_tasks} & {t.id for t in eval_tasks}:
        raise SystemExit("--eval-tasks share tasks with --tasks: held-out tasks must never be trained on")
    base = args.model
    result: dict[str, Any] = {"settings": _settings(args), "seeds": {}}
    data = None
    if "sft" in args.stages:
        data, result["sft_rows"] = sft_data(args.train_tasks, args.out / "data", args.image_view)
    if "base" in args.stages:  # the same for every seed: one run of several evaluates it
        result["base"] = {"held_out": held_out(base, eval_tasks, args)}
        _print_stage("-", "base", result["base"])
        save(result)
    for seed in args.seeds:
        stages = result["seeds"].setdefault(str(seed), {})
        run_seed(seed, base, eval_tasks, data, args, stages, lambda: save(result))
    return result


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "train_tasks"}
