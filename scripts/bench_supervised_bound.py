"""The supervised bound of the learning check's policy, per variant: how well can it tell the twins apart at all?

    python scripts/bench_supervised_bound.py --train synth:256:0 --eval synth:96:1 --epochs 4
    python scripts/bench_supervised_bound.py --image-size 768 --patch-size 64 ...   # one more stride-2 conv
    python scripts/bench_supervised_bound.py --stem-width 32 --augment ...          # wider stem, label-keeping jitter
    python scripts/bench_supervised_bound.py --train synth:256:0,synth:256:2,synth:256:3 ...  # more tasks

Builds the two-action policy (``vtb_agents.two_action_vlm``) with the given vision settings, trains
it on the mode labels at each training task's first decision (``vtb_agents.mode_supervision``:
the prompt and images exactly as the env shows them, cross-entropy over CALL/ANSWER) and prints,
after every epoch, the training loss and the train / held-out MCC of the argmax decision, with
CPU seconds (this process) and wall seconds. What GRPO could at best learn about mode selection
with the same policy. ``--json`` writes the rows.
"""

from __future__ import annotations

import argparse
import json
import pickle
import tempfile
import time
from pathlib import Path
from typing import Sequence

from vtb_agents.mode_supervision import Decision, decision_mcc, first_decisions, fit_mode_labels, keep_label_jitter
from vtb_agents.two_action_vlm import build_two_action_vlm
from vtb_app.learning_eval import env_config
from vtb_app.learning_tasks import load_learning_tasks
from vtb_env.synth.stream import DEFAULT_GENERATOR
from vtb_env.synth.twins import GENERATORS


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train", default="synth:256:0", help="comma list of task specs (synth:N:SEED, ...)")
    p.add_argument("--eval", default="synth:96:1", help="held-out task spec (another seed)")
    p.add_argument("--generator", default=DEFAULT_GENERATOR, choices=GENERATORS)
    p.add_argument("--image-size", type=int, default=384)
    p.add_argument("--patch-size", type=int, default=32)
    p.add_argument("--stem-width", type=int, default=16, help="0: Idefics3's linear patch embedding")
    p.add_argument("--hidden-size", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--augment", action="store_true", help="keep_label_jitter on every training image")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--cache", default=None, help="directory for the rendered first decisions (reused across runs)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None)
    return p.parse_args(argv)


def decisions_for(spec: str, args: argparse.Namespace, processor, tools) -> list[Decision]:
    """The first decisions of ``spec``'s tasks, from ``--cache`` when rendered before (same tokens per image)."""
    tokens = (args.image_size // args.patch_size) ** 2 // 4
    cached = Path(args.cache) / f"{args.generator}-{spec.replace(':', '_')}-{tokens}tok.pkl" if args.cache else None
    if cached is not None and cached.exists():
        return pickle.loads(cached.read_bytes())
    decisions = first_decisions(load_learning_tasks(spec, args.generator), processor, tools, env_config(1))
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_bytes(pickle.dumps(decisions))
    return decisions


def main(argv: Sequence[str] | None = None) -> None:
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from vtb_env.tools.base import ToolRegistry
    from vtb_env.tools.python_tools import PythonImageProcessing

    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    wall, cpu = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory(prefix="vtb-bound-") as scratch:
        path = build_two_action_vlm(
            scratch,
            image_size=args.image_size,
            patch_size=args.patch_size,
            stem_width=args.stem_width or None,
            hidden_size=args.hidden_size,
            layers=args.layers,
            seed=args.seed,
        )
        model, processor = AutoModelForImageTextToText.from_pretrained(path), AutoProcessor.from_pretrained(path)
    tools = ToolRegistry([PythonImageProcessing()])
    try:
        train = [d for spec in args.train.split(",") for d in decisions_for(spec, args, processor, tools)]
        held_out = decisions_for(args.eval, args, processor, tools)
    finally:
        tools.close()
    params = sum(p.numel() for p in model.parameters())
    print(
        f"{params} parameters; {len(train)} training / {len(held_out)} held-out decisions; "
        f"data {time.process_time() - cpu:.0f} CPU s",
        flush=True,
    )
    rows = []

    def evaluate(entry: dict[str, float]) -> None:
        row = {
            **entry,
            "train_mcc": decision_mcc(model, processor, train),
            "held_out_mcc": decision_mcc(model, processor, held_out),
            "cpu_seconds": time.process_time() - cpu,
            "wall_seconds": time.perf_counter() - wall,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)

    torch.manual_seed(args.seed)
    fit_mode_labels(
        model,
        processor,
        train,
        epochs=args.epochs,
        learning_rate=args.learning_rate,
        seed=args.seed,
        augment=keep_label_jitter if args.augment else None,
        on_epoch=evaluate,
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "params": params, "epochs": rows}, indent=1))


if __name__ == "__main__":
    main()
