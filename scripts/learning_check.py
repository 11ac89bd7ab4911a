"""Does a policy learn from the environment? A tiny two-action policy on tool-required / tool-redundant twins.

    python scripts/learning_check.py --json docs/figures/learning_check_reading.json \
        --plot docs/figures/learning_check_reading.png

1. Build the two-action policy, whose reply is a well-formed ``python_image_processing`` zoom or a
   fixed final answer, from random weights: ``--policy text`` (default), ``vtb_agents.two_action_text``
   over the question and the words Tesseract reads in the pictures (``vtb_env.ocr_view``);
   ``text-no-question``, the same shown the pages' words alone; ``vlm``, ``vtb_agents.two_action_vlm``,
   an Idefics3 with a CNN patch embedding over the pixels.
2. Evaluate it on held-out tasks (another synth seed) in the real environment (sandboxed tool,
   tool images returned into the dialogue, composed reward): ``--eval-samples`` sampled episodes
   per task and one greedy episode per task.
3. ``--supervised-epochs E``: the supervised bound, a copy of the same initial policy trained on
   the mode labels directly (``vtb_agents.mode_supervision``), evaluated the same way.
4. ``--sft-steps K``: a cold start, K steps of TRL's SFTTrainer on the training tasks' reference
   conversations (``vtb_env.sft``, ``vtb_app.integrations.trl_sft``), evaluated, then GRPO from it.
5. Train with GRPO (``vtb_app.integrations.trl.train``: TRL's GRPOTrainer, rollouts in the env,
   the env's composed reward) on the training tasks; print reward and batch MCC per step.
6. Evaluate again on the same held-out tasks; print before/after and write the plot and a JSON
   (``--compare A.json B.json ... --plot P`` draws several runs' figures side by side instead).

``synth:N:SEED`` task specs use ``--generator`` (default: the library's default generator). v3's mode labels
are defined by a reader, Tesseract (``metadata["mode_label_reader"]``); with ``--labels reader`` (v3's default)
the check keeps only the pairs whose labels Tesseract's own readings confirm (``stream(solvable=True)``), the
same readings the text policies are shown, so no policy is scored against a label its reader contradicts.
Held-out metrics: mode-selection MCC (from each task's mode label and whether the episode used
a tool), mean mode reward, tool-call success (calls without error / calls), mean composed
reward, tool-use rate. Timings: wall seconds and CPU seconds (this process and its finished
children, e.g. the sandbox workers).
"""

from __future__ import annotations

import vtb_app.openmp  # noqa: F401  (OMP_WAIT_POLICY=PASSIVE before torch loads)

# isort: split
import argparse
import json
from pathlib import Path
from typing import Sequence

from vtb_agents.two_action_vlm import DEFAULT_IMAGE_SIZE, DEFAULT_PATCH_SIZE, DEFAULT_STEM_WIDTH
from vtb_app.learning_check import evaluate_saved, run
from vtb_app.learning_policies import POLICIES, POLICY_LEARNING_RATES
from vtb_env.synth.stream import DEFAULT_GENERATOR
from vtb_env.synth.twins import GENERATORS

__all__ = ["main", "parse_args", "print_curve", "run"]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        allow_abbrev=False,  # learning_check_seeds.py forwards some options by their full names
    )
    p.add_argument("--tasks", default="synth:288:0", help="training tasks: synth:N:SEED or any vtb_env.loaders source")
    p.add_argument("--eval-tasks", default="synth:48:1", help="held-out tasks (use another seed)")
    p.add_argument(
        "--generator", default=DEFAULT_GENERATOR, choices=GENERATORS, help="the synthetic generator of synth:N:SEED"
    )
    p.add_argument(
        "--labels",
        default=None,
        choices=("reader", "generator"),
        help="synth:N:SEED: reader (v3's default): only the pairs whose mode labels Tesseract (the reader that "
        "defines v3's labels, and the text policies' own) confirms, through the OCR cache; generator (v1/v2's and "
        "task files' default): every task, labels as generated",
    )
    p.add_argument(
        "--policy",
        default="text",
        choices=POLICIES,
        help="text: the reading policy (question + OCR words); text-no-question: its control (OCR words only); "
        "vlm: the pixel policy",
    )
    p.add_argument("--hidden-size", type=int, default=64, help="text policies' width")
    p.add_argument(
        "--ocr-cache",
        default=str(Path("~/.cache/vtb-gym/ocr-tesseract.json")),
        help="the OCR readings file (text policies, --labels reader), loaded first and saved after ('': none)",
    )
    p.add_argument("--ocr-workers", type=int, default=2, help="OCR engine calls at a time while filling the cache")
    p.add_argument("--max-steps", type=int, default=60)
    p.add_argument("--num-generations", type=int, default=4)
    p.add_argument("--tasks-per-step", type=int, default=4)
    p.add_argument(
        "--learning-rate", type=float, default=None, help="GRPO's (default per policy: POLICY_LEARNING_RATES)"
    )
    p.add_argument("--lr-scheduler-type", default="linear", help="GRPO's learning-rate schedule (TRL's names)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--max-tool-calls", type=int, default=1, help="per turn; a call after the cap truncates the episode")
    p.add_argument("--image-size", type=int, default=DEFAULT_IMAGE_SIZE, help="policy's image resolution (square)")
    p.add_argument("--patch-size", type=int, default=DEFAULT_PATCH_SIZE, help="pixels per patch (a power of two)")
    p.add_argument(
        "--stem-width",
        type=int,
        default=DEFAULT_STEM_WIDTH,
        help="CNN patch embedding's first width; 0: Idefics3's own linear patch embedding",
    )
    p.add_argument(
        "--eval-modes",
        default="sampled,greedy",
        help="held-out decoding: sampled (training temperature), greedy, or both",
    )
    p.add_argument("--eval-samples", type=int, default=4, help="sampled episodes per held-out task (greedy: one)")
    p.add_argument("--supervised-epochs", type=int, default=0, help="measure the supervised bound first (0: skip)")
    p.add_argument("--supervised-learning-rate", type=float, default=1e-3)
    p.add_argument(
        "--sft-steps", type=int, default=135, help="SFT warm-up steps on the reference conversations (0: none)"
    )
    p.add_argument(
        "--sft-learning-rate",
        type=float,
        default=None,
        help="default per policy (POLICY_LEARNING_RATES); the pixel policy's is high: its action tokens must first "
        "rise past the suppressed vocabulary",
    )
    p.add_argument("--sft-batch-size", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--label-probes", type=int, default=0, help="text-only probes per group: online mode labels (docs/training.md)"
    )
    p.add_argument(
        "--policy-dir", default=None, help="where to build the policy and save the trained one (default: a temp dir)"
    )
    p.add_argument("--plot", default=None, help="PNG path for the curve")
    p.add_argument("--json", default=None, help="write all figures here")
    p.add_argument("--compare", nargs="+", metavar="JSON", help="plot runs' JSON side by side (to --plot); no run")
    p.add_argument(
        "--evaluate",
        metavar="POLICY_DIR",
        default=None,
        help="no run: evaluate a saved policy (a run's --policy-dir/trained) on --eval-tasks (other held-out seeds)",
    )
    args = p.parse_args(argv)
    if args.compare and not args.plot:
        p.error("--compare needs --plot")
    synthetic = all(spec.strip().startswith("synth:") for spec in (args.tasks, args.eval_tasks))
    if args.labels is None:
        args.labels = "reader" if args.generator == "v3" and synthetic else "generator"
    if args.labels == "reader" and args.generator != "v3":
        p.error("--labels reader: only v3's labels are defined by a reader (Tesseract); v1/v2's by design")
    sft_rate, grpo_rate = POLICY_LEARNING_RATES[args.policy]
    args.sft_learning_rate = sft_rate if args.sft_learning_rate is None else args.sft_learning_rate
    args.learning_rate = grpo_rate if args.learning_rate is None else args.learning_rate
    if args.supervised_epochs and args.policy != "vlm":
        p.error("--supervised-epochs: the supervised bound is measured for --policy vlm only")
    if not args.eval_modes or set(args.eval_modes.split(",")) - {"sampled", "greedy"}:
        p.error(f"--eval-modes: a comma list of sampled, greedy; got {args.eval_modes!r}")
    return args


def print_curve(curve: Sequence[dict[str, float]]) -> None:
    print("step  reward  mode_reward  tool_use  batch_MCC  MCC_last_5_steps")
    for p in curve:
        print(
            f"{p['step']:4d}  {p['reward']:.4f}  {p['mode_reward']:.3f}        {p['tool_use']:.2f}      "
            f"{p['mcc']:+.3f}     {p['mcc_window']:+.3f}"
        )


def write_json(result: dict, path: str | None) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(result, indent=1, default=str))


def main(argv: Sequence[str] | None = None) -> None:
    from vtb_app.evaluation.learning_plots import plot_comparison, plot_learning_curve

    args = parse_args(argv)
    if args.compare:
        plot_comparison([json.loads(Path(path).read_text()) for path in args.compare], Path(args.plot))
        return
    if args.evaluate:
        write_json(evaluate_saved(args, Path(args.evaluate)), args.json)
        return
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
    print(
        f"GRPO {result['train_seconds']:.0f} s ({result['train_cpu_seconds']:.0f} CPU s); "
        f"total {result['total_seconds']:.0f} s ({result['total_cpu_seconds']:.0f} CPU s)"
    )
    write_json(result, args.json)
    if args.plot:
        plot_learning_curve(result, Path(args.plot))


if __name__ == "__main__":
    main()
