"""Benchmark ``--executor ray`` against the thread executor on the same episodes, at 1, 2 and all cores.

The workload is the OCR baseline on the demo tasks (deterministic; tesseract and the sandboxed
vision tool make it CPU-bound, as tool-heavy rollouts are), judged by exact checks. At each core
count k the process and everything it starts are pinned to k cores (``sched_setaffinity``); the
thread executor runs k episodes at once, and Ray a fresh local cluster of k CPUs (one actor, k
episodes in flight). For each executor: wall time, episodes/s, and Ray's overhead per episode
against threads; the cluster's start-up is timed apart (a user on an existing cluster does not pay it).

    .venv/bin/python scripts/bench_ray.py [--tasks 12] [--samples 1] [--cores 1,2,all]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from vtb_agents.ocr_baseline import OcrBaselineAgent
from vtb_app.evaluation.judging import episode_reward
from vtb_app.evaluation.ray_executor import RunSpec, evaluate_on_ray
from vtb_app.evaluation.records import iter_records
from vtb_app.evaluation.runner import evaluate
from vtb_app.evaluation.specs import judge_from_spec
from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv
from vtb_env.loaders import load_tasks
from vtb_env.ray_cluster import connect, import_ray
from vtb_env.sandbox.shared import close_shared
from vtb_rewards.compose import RewardConfig


def run_threads(tasks: list, samples: int, cores: int, out: Path) -> float:
    judge, env_config = judge_from_spec("exact"), EnvConfig.preset("default")
    reward = episode_reward(judge, RewardConfig())
    start = time.perf_counter()
    result = evaluate(
        tasks,
        OcrBaselineAgent(),
        lambda ts: VisualToolBenchEnv(ts, reward=reward, config=env_config),
        judge,
        out,
        samples=samples,
        concurrency=cores,
        progress=False,
    )
    wall = time.perf_counter() - start
    close_shared()  # the next core count starts its own sandbox servers, pinned to its cores
    assert result.failed == 0, f"{result.failed} thread episodes failed"
    return wall


def run_ray(tasks: list, samples: int, cores: int, out: Path, temp_dir: str) -> tuple[float, float]:
    ray = import_ray()
    start = time.perf_counter()
    connect(temp_dir=temp_dir, num_cpus=cores)
    started = time.perf_counter() - start
    spec = RunSpec(agent="ocr-baseline", judge="exact", env_config=EnvConfig.preset("default"))
    start = time.perf_counter()
    result = evaluate_on_ray(tasks, spec, out, samples=samples, concurrency=cores, progress=False)
    wall = time.perf_counter() - start
    ray.shutdown()
    assert result.failed == 0, f"{result.failed} ray episodes failed"
    return started, wall


def outcomes(run_dir: Path) -> dict:
    return {r["key"]: (r["answers"], r["score"]["score"]) for r in iter_records(run_dir / "records.jsonl")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=12, help="demo tasks")
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--cores", default="1,2,all", help="comma-separated core counts; all = this machine's")
    args = parser.parse_args()
    available = sorted(os.sched_getaffinity(0))
    levels = sorted({len(available) if c == "all" else int(c) for c in args.cores.split(",")})
    tasks = load_tasks("demo", limit=args.tasks)
    episodes = len(tasks) * args.samples
    print(
        f"{episodes} episodes (OCR baseline, demo tasks, exact judge); {len(available)} cores available; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'cores':>5} {'threads s':>10} {'ep/s':>6} {'ray start s':>11} {'ray s':>7} {'ep/s':>6} "
        f"{'ray/threads':>11} {'overhead/ep s':>13} same"
    )
    with tempfile.TemporaryDirectory(prefix="vtb-bench-ray-") as scratch:
        for cores in levels:
            os.sched_setaffinity(0, available[:cores])
            root = Path(scratch) / str(cores)
            threads_s = run_threads(tasks, args.samples, cores, root / "threads")
            ray_start_s, ray_s = run_ray(
                tasks, args.samples, cores, root / "ray", temp_dir=str(Path(scratch) / f"r{cores}")
            )
            same = outcomes(root / "threads") == outcomes(root / "ray")
            print(
                f"{cores:>5} {threads_s:>10.2f} {episodes / threads_s:>6.2f} {ray_start_s:>11.2f} {ray_s:>7.2f} "
                f"{episodes / ray_s:>6.2f} "
                f"{ray_s / threads_s:>11.2f} {(ray_s - threads_s) / episodes:>13.3f} {same}"
            )
    os.sched_setaffinity(0, available)


if __name__ == "__main__":
    main()
