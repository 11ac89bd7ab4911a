"""The learning check over several training seeds, with its two controls, and how many seeds reach the target.

    python scripts/learning_check_seeds.py --seeds 0-4 --controls --jobs 1 --out runs/learning_seeds

Runs ``scripts/learning_check.py`` once per seed with ``--policy text`` (the reading policy), and with
``--controls`` once more per control at the first seed (``text-no-question``: the same policy shown the
pages' words alone; ``vlm``: the pixel policy), each with the same budget (the check's defaults, or the
arguments after ``--``). ``--jobs N`` runs N at a time, each with ``--threads`` torch threads (on a
16-core machine: ``--jobs 7 --threads 2``). Writes ``OUT/<policy>_seed<S>.json`` per run, their logs,
and ``OUT/summary.json``: per run the held-out greedy MCC before, after SFT and after GRPO, wall and
CPU seconds, and the count of reading-policy seeds that went from <= 0.2 to >= 0.8. ``--held-out
synth:48:2,synth:48:3`` also scores each trained reading policy on those held-out draws (its policy kept in
``OUT/<run>/``): a seed reaches the target only if it does on every one. Exit status 0 even when some seeds
miss the target (the summary says which); 1 when a run failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

CHECK = Path(__file__).resolve().parent / "learning_check.py"
START_AT_MOST, TARGET = 0.2, 0.8  # held-out greedy MCC: the check's bar (docs/training.md)


def parse_seeds(text: str) -> list[int]:
    """``"0-4"`` or ``"0,3,7"``."""
    if "-" in text:
        first, last = (int(x) for x in text.split("-", 1))
        return list(range(first, last + 1))
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="0-4", help="training seeds: 0-4 or 0,3,7")
    p.add_argument("--controls", action="store_true", help="also run text-no-question and vlm at the first seed")
    p.add_argument("--jobs", type=int, default=1, help="runs at a time")
    p.add_argument("--threads", type=int, default=1, help="torch / OpenMP threads per run")
    p.add_argument("--timeout", type=float, default=None, help="seconds a run may take (then stopped: exit 124)")
    p.add_argument("--out", required=True, help="folder for the runs' JSON, logs and summary.json")
    p.add_argument(
        "--held-out",
        default="",
        help="more held-out sets (comma list, e.g. synth:48:2,synth:48:3): each trained reading policy is scored on "
        "each too (learning_check.py --evaluate), and reaches the target only if it does on every one",
    )
    return p.parse_args(own), extra


def _check(command: Sequence[str], log_path: Path, threads: int, timeout: float | None) -> int:
    """learning_check.py with ``command``, its output to ``log_path``; the exit status (124: timed out)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    with open(log_path, "w") as log:
        try:
            return subprocess.run(
                [sys.executable, str(CHECK), *command], stdout=log, stderr=subprocess.STDOUT, env=env, timeout=timeout
            ).returncode
        except subprocess.TimeoutExpired:
            return 124


def run_one(
    policy: str,
    seed: int,
    out: Path,
    threads: int,
    extra: Sequence[str],
    timeout: float | None = None,
    held_out: Sequence[str] = (),
) -> dict[str, Any]:
    name = f"{policy}_seed{seed}"
    held_out = held_out if policy == "text" else ()  # the controls are scored on the check's own held-out set
    command = ["--policy", policy, "--seed", str(seed), "--json", str(out / f"{name}.json")]
    command += ["--policy-dir", str(out / name)] if held_out else []
    start = time.perf_counter()
    code = _check([*command, *extra], out / f"{name}.log", threads, timeout)
    row: dict[str, Any] = {"run": name, "policy": policy, "seed": seed, "exit": code}
    if code == 0:
        result = json.loads((out / f"{name}.json").read_text())
        greedy = lambda stage: stage["greedy"]["mcc"] if "greedy" in stage else float("nan")  # noqa: E731
        row.update(
            before=greedy(result["before"]),
            after_sft=greedy(result["sft"]["held_out"]) if "sft" in result else None,
            after=greedy(result["after"]),
            sampled_after=result["after"].get("sampled", {}).get("mcc"),
            train_mcc_last5=result["curve"][-1]["mcc_window"] if result["curve"] else None,
            seconds=result["total_seconds"],
            cpu_seconds=result["total_cpu_seconds"],
        )
        row["reached"] = row["before"] <= START_AT_MOST and row["after"] >= TARGET
        if held_out:
            row["held_out"] = {spec: _score(out, name, spec, threads, extra, timeout) for spec in held_out}
            row["reached"] = row["reached"] and all(mcc >= TARGET for mcc in row["held_out"].values())
            row["exit"] = 1 if any(mcc != mcc for mcc in row["held_out"].values()) else 0  # nan: it failed
    row["wall_seconds"] = time.perf_counter() - start
    print(json.dumps(row), flush=True)
    return row


def _score(out: Path, name: str, spec: str, threads: int, extra: Sequence[str], timeout: float | None) -> float:
    """Held-out greedy MCC of run ``name``'s trained policy on ``spec`` (nan if the evaluation failed)."""
    tag = spec.replace(":", "_")
    path = out / f"{name}_{tag}.json"
    command = ["--evaluate", str(out / name / "trained"), "--eval-tasks", spec, "--eval-modes", "greedy"]
    command += ["--json", str(path), *_shared_options(extra)]
    code = _check(command, out / f"{name}_{tag}.log", threads, timeout)
    return json.loads(path.read_text())["held_out"]["greedy"]["mcc"] if code == 0 else float("nan")


def _shared_options(extra: Sequence[str]) -> list[str]:
    """The options of ``extra`` an evaluation needs too (where its labels and readings come from)."""
    keep, shared = [], {"--ocr-cache", "--labels", "--generator", "--max-tool-calls"}
    for i, arg in enumerate(extra):
        if arg.split("=", 1)[0] in shared:
            keep += [arg] if "=" in arg else [arg, extra[i + 1]]
    return keep


def main(argv: Sequence[str] | None = None) -> int:
    args, extra = parse_args(argv)
    if args.held_out and any(arg.split("=", 1)[0] == "--policy-dir" for arg in extra):
        raise SystemExit("learning_check_seeds: --held-out keeps each run's policy in OUT/<run>; drop --policy-dir")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = parse_seeds(args.seeds)
    runs = [("text", s) for s in seeds] + ([("text-no-question", seeds[0]), ("vlm", seeds[0])] if args.controls else [])
    start = time.perf_counter()
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        held_out = [spec.strip() for spec in args.held_out.split(",") if spec.strip()]
        rows = list(pool.map(lambda r: run_one(r[0], r[1], out, args.threads, extra, args.timeout, held_out), runs))
    reading = [r for r in rows if r["policy"] == "text" and r["exit"] == 0]
    summary = {
        "arguments": extra,
        "runs": rows,
        "reading_seeds_reaching_target": sum(r["reached"] for r in reading),
        "reading_seeds": len(reading),
        "target": {
            "before_at_most": START_AT_MOST,
            "after_at_least": TARGET,
            "metric": "held-out greedy MCC",
            "also_held_out": held_out,
        },
        "wall_seconds": time.perf_counter() - start,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(
        f"{summary['reading_seeds_reaching_target']}/{len(reading)} reading-policy seeds reach the target; "
        f"{summary['wall_seconds']:.0f} s"
    )
    return 1 if any(r["exit"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
