"""Figures of ``scripts/learning_check.py``: one run's GRPO curve, and several runs (with and without SFT) compared."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

HELD_OUT_MARKERS = (("sampled", "oC2"), ("greedy", "sC3"))


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)


def _minutes(result: dict[str, Any]) -> str:
    cpu = result.get("total_cpu_seconds")
    return f"{result['total_seconds'] / 60:.1f} min wall" + (f", {cpu / 60:.1f} CPU-min" if cpu is not None else "")


def plot_learning_curve(result: dict[str, Any], path: Path) -> None:
    """Reward and MCC of the training batches against steps, the held-out figures before and after,
    and the supervised bound when the run measured it."""
    plt = _pyplot()
    curve = result["curve"]
    steps = [p["step"] for p in curve]
    last = steps[-1] if steps else 0
    fig, (ax_reward, ax_mode, ax_mcc) = plt.subplots(1, 3, figsize=(13, 3.8))
    ax_reward.plot(steps, [p["reward"] for p in curve], label="train batch")
    ax_mode.plot(steps, [p["mode_reward"] for p in curve], label="train batch")
    ax_mcc.plot(steps, [p["mcc"] for p in curve], alpha=0.35, label="train batch (0 when one label only)")
    ax_mcc.plot(steps, [p["mcc_window"] for p in curve], label="train, pooled over last 5 steps")
    warmed = result["sft"]["held_out"] if "sft" in result else None  # GRPO starts from the SFT checkpoint
    for key, marker in HELD_OUT_MARKERS:
        if key not in result["after"]:
            continue
        for ax, metric in ((ax_reward, "reward"), (ax_mode, "mode_reward"), (ax_mcc, "mcc")):
            start = (warmed or result["before"])[key][metric]
            ax.plot([0, last], [start, result["after"][key][metric]], marker, linestyle=":", label=f"held-out ({key})")
            if warmed is not None:  # the initial policy, before the warm-up
                ax.plot([0], [result["before"][key][metric]], marker[0], color=marker[1:], fillstyle="none")
    bound = result.get("supervised", {}).get("held_out", {}).get("greedy")
    if bound is not None:
        ax_mcc.axhline(bound["mcc"], color="C4", linestyle="--", label="supervised bound (held-out, greedy)")
    ax_reward.set(xlabel="GRPO step", ylabel="composed reward", title="composed reward (env)")
    ax_mode.set(xlabel="GRPO step", ylabel="mode reward", title="mode reward", ylim=(-0.05, 1.05))
    ax_mcc.set(xlabel="GRPO step", ylabel="MCC", title="mode-selection MCC", ylim=(-1.05, 1.05))
    for ax in (ax_reward, ax_mode, ax_mcc):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    policy = {"text": "reading", "text-no-question": "question-blind reading"}.get(result.get("policy"), "pixel")
    warm_up = f"SFT {result['args']['sft_steps']} steps (held-out at step 0; hollow: before), then " if warmed else ""
    fig.suptitle(
        f"two-action {policy} policy: {warm_up}GRPO on {result['tasks']} ({result.get('generator', '')}), held-out "
        f"{result['eval_tasks']} ({_minutes(result)}, CPU)",
        fontsize=9,
    )
    _save(fig, path)


def _stages(result: dict[str, Any], mode: str, metric: str) -> tuple[list[str], list[float]]:
    """The held-out ``metric`` at each stage of a run: initial, after SFT (if any), after GRPO."""
    names, values = ["init"], [result["before"][mode][metric]]
    if "sft" in result:
        names.append(f"SFT {result['args']['sft_steps']}")
        values.append(result["sft"]["held_out"][mode][metric])
    names.append(f"+GRPO {len(result['curve'])}")
    values.append(result["after"][mode][metric])
    return names, values


def plot_comparison(results: Sequence[dict[str, Any]], path: Path) -> None:
    """Held-out MCC and tool-call success at each stage, and the training-batch MCC, for each run."""
    plt = _pyplot()
    fig, (ax_mcc, ax_success, ax_curve) = plt.subplots(1, 3, figsize=(13, 3.8))
    for i, result in enumerate(results):
        sft = result["args"]
        label = (
            f"SFT {sft['sft_steps']} (lr {sft['sft_learning_rate']:g}) + GRPO"
            if "sft" in result
            else "GRPO from scratch"
        )
        for mode, style in (("greedy", "-s"), ("sampled", ":o")):
            if mode not in result["after"]:
                continue
            for ax, metric in ((ax_mcc, "mcc"), (ax_success, "tool_call_success")):
                names, values = _stages(result, mode, metric)
                stages = [0, 1, 2] if len(names) == 3 else [0, 2]
                ax.plot(stages, values, style, color=f"C{i}", label=f"{label} ({mode})")
        offset = result["args"]["sft_steps"] if "sft" in result else 0
        ax_curve.plot(
            [offset + p["step"] for p in result["curve"]],
            [p["mcc_window"] for p in result["curve"]],
            color=f"C{i}",
            label=f"{label} ({_minutes(result)})",
        )
    for ax, title in ((ax_mcc, "held-out MCC"), (ax_success, "held-out tool-call success")):
        ax.set(xticks=[0, 1, 2], xticklabels=["init", "after SFT", "after GRPO"], title=title)
    ax_mcc.set(ylim=(-1.05, 1.05))
    ax_success.set(ylim=(-0.05, 1.05))
    ax_curve.set(
        xlabel="step (SFT steps, then GRPO)",
        ylabel="MCC",
        title="train MCC, pooled over 5 GRPO steps",
        ylim=(-1.05, 1.05),
    )
    for ax in (ax_mcc, ax_success, ax_curve):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"cold start: SFT on reference conversations, then GRPO ({results[0]['tasks']})", fontsize=9)
    _save(fig, path)
