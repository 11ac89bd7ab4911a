"""The learning check's held-out evaluation: the env it trains and evaluates in, the figures of a set of
episodes (MCC, mode reward, tool-call success, reward, tool use), and the per-step training curve.
"""

from __future__ import annotations

import argparse
from typing import Any, Sequence

from vtb_agents.chat_render import ChatRenderer
from vtb_agents.generation import HFGenerator
from vtb_agents.rollout import Episode, run_episodes
from vtb_env.batch import EnvPool
from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv
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


def print_eval(title: str, figures: dict[str, dict[str, float]]) -> None:
    """One line per evaluation mode: the held-out figures of ``evaluate_modes``."""
    for mode, m in figures.items():
        print(
            f"{title} ({mode}): MCC {m['mcc']:+.3f}  mode reward {m['mode_reward']:.3f}  "
            f"tool-call success {m['tool_call_success']:.3f}  reward {m['reward']:.4f}  tool use {m['tool_use']:.2f}  "
            f"TP/FN/TN/FP {m['TP']}/{m['FN']}/{m['TN']}/{m['FP']}",
            flush=True,
        )
