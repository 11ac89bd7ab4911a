"""Does a policy learn from the environment? GRPO learning curve of a tiny VLM on tool-required / tool-redundant twins.

    python scripts/learning_check.py --tasks synth:192:0 --eval-tasks synth:48:1 --max-steps 60 \
        --plot docs/figures/learning_curve.png

1. Build the two-action policy (``vtb_agents.two_action_vlm``: a random-weight Idefics3 whose reply
   is a well-formed ``python_image_processing`` zoom or a fixed final answer; its choice is
   predicted at the assistant header, which attends to the image tokens).
2. Evaluate it on held-out tasks (another synth seed): one episode per task in the real
   environment (sandboxed tool, tool images returned into the dialogue, composed reward).
3. Train it with GRPO (``scripts/train_grpo.py``: TRL's GRPOTrainer, rollouts in the env, the
   env's composed reward) on the training tasks; print reward and batch MCC per step.
4. Evaluate again on the same held-out tasks; print before/after and write the plot and a JSON.

Held-out metrics: mode-selection MCC (from each task's mode label and whether the episode used
a tool), mean mode reward, tool-call success (calls without error / calls), mean composed
reward; each with the policy sampled at the training temperature and greedily.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from vtb_agents.rollout import ChatRenderer, Episode, HFGenerator, run_episodes
from vtb_agents.two_action_vlm import build_two_action_vlm
from vtb_env.batch import EnvPool
from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv
from vtb_env.tasks import Task
from vtb_env.tools.base import ToolRegistry
from vtb_rewards.mode import ConfusionMatrix

ROOT = Path(__file__).resolve().parents[1]
GREEDY_TEMPERATURE = 1e-4  # HFGenerator always samples; this makes it the argmax


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--tasks", default="synth:192:0", help="training tasks: synth:N:SEED or any vtb_env.loaders source")
    p.add_argument("--eval-tasks", default="synth:48:1", help="held-out tasks (use another seed)")
    p.add_argument("--max-steps", type=int, default=60)
    p.add_argument("--num-generations", type=int, default=4)
    p.add_argument("--tasks-per-step", type=int, default=4)
    p.add_argument("--learning-rate", type=float, default=3e-3)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--max-tool-calls", type=int, default=1, help="per turn; a call after the cap truncates the episode")
    p.add_argument("--image-size", type=int, default=64, help="policy's image resolution (longest edge)")
    p.add_argument(
        "--eval-modes",
        default="sampled,greedy",
        help="held-out decoding: sampled (training temperature), greedy, or both",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--policy-dir", default=None, help="where to build the policy and save the trained one (default: a temp dir)"
    )
    p.add_argument("--plot", default=None, help="PNG path for the curve")
    p.add_argument("--json", default=None, help="write all figures here")
    args = p.parse_args(argv)
    if not args.eval_modes or set(args.eval_modes.split(",")) - {"sampled", "greedy"}:
        p.error(f"--eval-modes: a comma list of sampled, greedy; got {args.eval_modes!r}")
    return args


# The two-action policy's fixed answer meets no rubric, so only process credit can move it: the check
# trains on the unweighted process components (the env's default earns them with the rubric score).
PROCESS_CREDIT = "always"


def env_config(max_tool_calls: int) -> EnvConfig:
    """What ``train_grpo.train`` builds with ``--system-prompt none``; evaluation uses the same."""
    return EnvConfig.preset(
        "default",
        max_tool_calls=max_tool_calls,
        cap_scope="turn",
        image_parts="name",
        system_prompt=None,
        reward_options={"process_credit": PROCESS_CREDIT},
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
) -> dict[str, float]:
    """One episode per task in the real env; metrics of ``episode_metrics``."""
    pool = EnvPool([VisualToolBenchEnv(tasks=tasks, tools=tools, config=env_config(max_tool_calls)) for _ in tasks])
    try:
        generate = HFGenerator(model, processor, max_new_tokens=1, temperature=temperature)
        episodes = run_episodes(
            pool, [t.id for t in tasks], generate, ChatRenderer(processor), max_completion_tokens=4096, seed=seed
        )
    finally:
        pool.close()
    return episode_metrics(episodes)


def evaluate_modes(
    model: Any, processor: Any, tasks: Sequence[Task], tools: ToolRegistry, args: argparse.Namespace
) -> dict[str, dict[str, float]]:
    """``evaluate`` for each of ``--eval-modes``, each from the same torch seed."""
    import torch

    temperatures = {"sampled": args.temperature, "greedy": GREEDY_TEMPERATURE}
    figures = {}
    for mode in args.eval_modes.split(","):
        torch.manual_seed(args.seed)
        figures[mode] = evaluate(
            model, processor, tasks, tools, args.max_tool_calls, temperature=temperatures[mode], seed=args.seed
        )
    return figures


def training_curve(log_history: Sequence[dict[str, Any]], window: int = 5) -> list[dict[str, float]]:
    """Per optimisation step: mean composed reward, mode reward, tool use and mode MCC of the step's rollouts.

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
            **{k: int(entry.get(f"vtb/mode/{k}", 0)) for k in counts},
        }
        for entry in log_history
        if "vtb/reward" in entry
    ]
    for i, point in enumerate(curve):
        pooled = {k.lower(): sum(p[k] for p in curve[max(0, i - window + 1) : i + 1]) for k in counts}
        point["mcc_window"] = ConfusionMatrix(**pooled).mcc()
    return curve


def run(args: argparse.Namespace, *, tools: ToolRegistry | None = None) -> dict[str, Any]:
    """The whole experiment; returns the curve, the held-out figures before/after and timings."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from vtb_env.loaders import load_tasks
    from vtb_env.tools.python_tools import PythonImageProcessing

    start = time.perf_counter()
    train_tasks, eval_tasks = load_tasks(args.tasks), load_tasks(args.eval_tasks)
    for spec, tasks in ((args.tasks, train_tasks), (args.eval_tasks, eval_tasks)):
        if not tasks or any(t.mode_label is None for t in tasks):
            raise SystemExit(f"{spec!r}: every task needs a mode label (tool_required / tool_redundant)")
    from vtb_app.integrations import trl as train_grpo

    own_tools = tools is None
    tools = tools if tools is not None else ToolRegistry([PythonImageProcessing()])
    scratch = None if args.policy_dir else tempfile.TemporaryDirectory(prefix="vtb-learning-")
    policy_dir = Path(args.policy_dir or scratch.name)
    try:
        policy = build_two_action_vlm(policy_dir / "init", image_size=args.image_size, seed=args.seed)
        processor = AutoProcessor.from_pretrained(policy)
        before = evaluate_modes(AutoModelForImageTextToText.from_pretrained(policy), processor, eval_tasks, tools, args)
        _print_eval("held-out before training", before)
        train_start = time.perf_counter()
        trainer = train_grpo.train(
            _grpo_args(train_grpo, args, policy, policy_dir / "trained"), tasks=train_tasks, tools=tools
        )
        train_seconds = time.perf_counter() - train_start
        curve = training_curve(trainer.state.log_history)
        after = evaluate_modes(trainer.model, processor, eval_tasks, tools, args)
        _print_eval("held-out after training", after)
    finally:
        if own_tools:
            tools.close()
        if scratch is not None:
            scratch.cleanup()
    return {
        "tasks": args.tasks,
        "eval_tasks": args.eval_tasks,
        "n_train_tasks": len(train_tasks),
        "n_eval_tasks": len(eval_tasks),
        "args": vars(args),
        "curve": curve,
        "before": before,
        "after": after,
        "train_seconds": train_seconds,
        "total_seconds": time.perf_counter() - start,
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


def print_curve(curve: Sequence[dict[str, float]]) -> None:
    print("step  reward  mode_reward  tool_use  batch_MCC  MCC_last_5_steps")
    for p in curve:
        print(
            f"{p['step']:4d}  {p['reward']:.4f}  {p['mode_reward']:.3f}        {p['tool_use']:.2f}      "
            f"{p['mcc']:+.3f}     {p['mcc_window']:+.3f}"
        )


def plot(result: dict[str, Any], path: Path) -> None:
    """Reward and MCC of the training batches against steps, with the held-out figures before and after."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = result["curve"]
    steps = [p["step"] for p in curve]
    last = steps[-1] if steps else 0
    fig, (ax_reward, ax_mode, ax_mcc) = plt.subplots(1, 3, figsize=(13, 3.8))
    ax_reward.plot(steps, [p["reward"] for p in curve], label="train batch")
    ax_mode.plot(steps, [p["mode_reward"] for p in curve], label="train batch")
    ax_mcc.plot(steps, [p["mcc"] for p in curve], alpha=0.35, label="train batch (0 when one label only)")
    ax_mcc.plot(steps, [p["mcc_window"] for p in curve], label="train, pooled over last 5 steps")
    for key, marker in (("sampled", "oC2"), ("greedy", "sC3")):
        if key not in result["after"]:
            continue
        for ax, metric in ((ax_reward, "reward"), (ax_mode, "mode_reward"), (ax_mcc, "mcc")):
            ax.plot(
                [0, last],
                [result["before"][key][metric], result["after"][key][metric]],
                marker,
                linestyle=":",
                label=f"held-out ({key})",
            )
    ax_reward.set(xlabel="GRPO step", ylabel="composed reward", title="composed reward (env)")
    ax_mode.set(xlabel="GRPO step", ylabel="mode reward", title="mode reward", ylim=(-0.05, 1.05))
    ax_mcc.set(xlabel="GRPO step", ylabel="MCC", title="mode-selection MCC", ylim=(-1.05, 1.05))
    for ax in (ax_reward, ax_mode, ax_mcc):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(
        f"two-action Idefics3 policy, GRPO on {result['tasks']}, held-out {result['eval_tasks']} "
        f"({result['total_seconds'] / 60:.1f} min, CPU)",
        fontsize=9,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    result = run(args)
    print_curve(result["curve"])
    for mode in result["after"]:
        b, a = result["before"][mode], result["after"][mode]
        print(
            f"held-out {mode}: MCC {b['mcc']:+.3f} -> {a['mcc']:+.3f}; "
            f"mode reward {b['mode_reward']:.3f} -> {a['mode_reward']:.3f}; "
            f"tool-call success {b['tool_call_success']:.3f} -> {a['tool_call_success']:.3f}; "
            f"reward {b['reward']:.4f} -> {a['reward']:.4f}"
        )
    print(f"training {result['train_seconds']:.0f} s; total {result['total_seconds']:.0f} s")
    if args.plot:
        plot(result, Path(args.plot))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
