"""Benchmark the synthetic task generator: speed on one core and the OCR tool-necessity probe.

    .venv/bin/python scripts/bench_synth.py --n 60 --probe 40 --seed 11

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
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core

    from vtb_env.synth import generate
    from vtb_env.synth.probe import probe_task, summarize_probes

    start = time.perf_counter()
    tasks = generate(args.n, args.seed, difficulty=args.difficulty)
    elapsed = time.perf_counter() - start
    print(f"generation: {len(tasks)} tasks in {elapsed:.2f} s = {len(tasks) / elapsed:.1f} tasks/s (one core, difficulty {args.difficulty})")

    start = time.perf_counter()
    results = [probe_task(task) for task in tasks[: args.probe]]
    print(f"probe: {len(results)} tasks in {time.perf_counter() - start:.1f} s")
    print(json.dumps(summarize_probes(results), indent=2))
    by_scene: dict[str, list] = defaultdict(list)
    for task, result in zip(tasks, results):
        by_scene[f"{task.metadata['scene']}/{task.mode_label}"].append(result)
    for key in sorted(by_scene):
        group = by_scene[key]
        ok = sum(r.needs_tools if r.mode_label == "tool_required" else r.readable_directly for r in group)
        print(f"  {key:32s} {ok}/{len(group)} as labelled")


if __name__ == "__main__":
    main()
