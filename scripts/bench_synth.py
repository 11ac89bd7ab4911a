"""Benchmark the synthetic task generator: speed on one core and the OCR tool-necessity probe.

    .venv/bin/python scripts/bench_synth.py --n 60 --probe 40 --seed 11 [--generator v2] [--split heldout]

Speed: tasks generated per CPU-second of this process (one core), for every generator, and the mean
bytes of their images. Probe (tesseract,
``vtb_env.synth.probe``): the share of tool-required tasks whose key facts the OCR cannot all read
as shown but reads after the reference code, and the share of tool-redundant twins it reads
directly; then the same per scene type, category, hiding mechanism, font and surface (the solvability
residue: tool-required tasks whose reference code still leaves a key fact unread). ``--readers
tesseract,rapidocr`` runs the probe once per reader: the labels are Tesseract's (docs/synth.md).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=60, help="tasks generated for the speed figure")
    parser.add_argument("--probe", type=int, default=40, help="tasks (of those) run through the OCR probe")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--difficulty", type=float, default=0.5)
    parser.add_argument(
        "--generator", default="v3", help="v3 (default), v2 or v1; speed is also measured for the others"
    )
    parser.add_argument("--split", default="all", help="v3: all, train or heldout")
    parser.add_argument(
        "--readers", default="tesseract", help="comma list: tesseract (the labels' reader), rapidocr (the [ocr2] extra)"
    )
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core

    from vtb_env import ocr
    from vtb_env.synth import generate
    from vtb_env.synth.probe import probe_task, summarize_probes

    speed = {}
    for generator in sorted({"v1", "v2", "v3"}, key=lambda g: g != args.generator):
        split = args.split if generator == args.generator else "all"
        start = time.process_time()  # CPU time: other processes on the machine do not count
        made = generate(args.n, args.seed, difficulty=args.difficulty, generator=generator, split=split)
        cpu = time.process_time() - start
        speed[generator] = len(made) / cpu
        images = [image.data for task in made for image in task.images]
        pairs = len({task.metadata.get("pair_id", task.id) for task in made})
        print(
            f"generation {generator}: {len(made)} tasks = {speed[generator]:.1f} tasks per CPU-s, "
            f"{cpu / pairs:.3f} CPU-s per pair (one core, difficulty {args.difficulty}); {len(images)} images, "
            f"{sum(map(len, images)) / len(images) / 1024:.0f} KiB each"
        )
        if generator == args.generator:
            tasks = made
    print(f"speed v2/v1: {speed['v2'] / speed['v1']:.2f}, v3/v1: {speed['v3'] / speed['v1']:.2f}")

    hidden: dict[str, set[str]] = defaultdict(set)  # a pair's hiding mechanisms (its twin's too)
    for task in tasks:
        hidden[task.metadata.get("pair_id", task.id)] |= {m for v in task.metadata["degradations"].values() for m in v}
    for reader in args.readers.split(","):
        engine = ocr.TesseractEngine() if reader == "tesseract" else ocr.RapidOcrEngine()
        start = time.perf_counter()
        results = [probe_task(task, engine) for task in tasks[: args.probe]]
        print(f"\nprobe, reader {engine.name}: {len(results)} tasks in {time.perf_counter() - start:.1f} s")
        print(json.dumps(summarize_probes(results), indent=2))
        groups: dict[str, list] = defaultdict(list)
        for task, result in zip(tasks, results, strict=False):
            keys = [f"scene {task.metadata['scene']}", f"category {task.eval_focus}"]
            keys += [f"{what} {task.metadata[what]}" for what in ("font", "surface") if what in task.metadata]  # v3
            keys += [f"hidden by {m}" for m in sorted(hidden[task.metadata.get("pair_id", task.id)])]
            for key in keys:
                groups[key].append(result)
        print(
            "group: tool-required unreadable as shown | read after the reference code (every key fact)"
            " | twins read directly"
        )
        for key in sorted(groups):
            required = [r for r in groups[key] if r.mode_label == "tool_required"]
            redundant = [r for r in groups[key] if r.mode_label != "tool_required"]
            unread = sum(r.read_before < r.facts for r in required)
            solved = sum(r.read_after == r.facts for r in required)
            direct = sum(r.readable_directly for r in redundant)
            n = len(required)
            print(f"  {key:42s} {unread}/{n} | {solved}/{n} | {direct}/{len(redundant)}")


if __name__ == "__main__":
    main()
