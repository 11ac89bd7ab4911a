"""Benchmark the synthetic task generator: speed on one core and the OCR tool-necessity probe.

    .venv/bin/python scripts/bench_synth.py --n 60 --probe 40 --seed 11 [--generator v1]

Speed: tasks/s generated in this process (one core). Probe (tesseract, ``vtb_env.synth.probe``):
the share of tool-required tasks whose key facts the OCR cannot all read as shown but reads
after the reference code, and the share of tool-redundant twins it reads directly.
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
        "--generator", default="v2", help="v2 (default) or v1; speed is also measured for the other one"
    )
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core

    from vtb_env.synth import generate
    from vtb_env.synth.probe import probe_task, summarize_probes

    speed = {}
    for generator in sorted({"v1", "v2"}, key=lambda g: g != args.generator):
        start = time.perf_counter()
        made = generate(args.n, args.seed, difficulty=args.difficulty, generator=generator)
        speed[generator] = len(made) / (time.perf_counter() - start)
        print(
            f"generation {generator}: {len(made)} tasks = {speed[generator]:.1f} tasks/s "
            f"(one core, difficulty {args.difficulty})"
        )
        if generator == args.generator:
            tasks = made
    print(f"speed v2/v1: {speed['v2'] / speed['v1']:.2f}")

    start = time.perf_counter()
    results = [probe_task(task) for task in tasks[: args.probe]]
    print(f"probe: {len(results)} tasks in {time.perf_counter() - start:.1f} s")
    print(json.dumps(summarize_probes(results), indent=2))
    by_scene: dict[str, list] = defaultdict(list)
    for task, result in zip(tasks, results, strict=True):
        by_scene[f"{task.metadata['scene']}/{task.mode_label}"].append(result)
    for key in sorted(by_scene):
        group = by_scene[key]
        ok = sum(r.needs_tools if r.mode_label == "tool_required" else r.readable_directly for r in group)
        print(f"  {key:32s} {ok}/{len(group)} as labelled")


if __name__ == "__main__":
    main()
