"""Label leakage of the synthetic twins: can a linear probe on a thumbnail tell tool-required from tool-redundant?

    .venv/bin/python scripts/bench_synth_leakage.py --n 220 --train-seed 1 --test-seed 2

For each generator (v1, the first one, and v2, the default) it generates ``--n`` tasks with each
of two seeds (timed: tasks/s on one core), takes each task's first image downscaled to 64x64 RGB,
and fits a logistic regression on the seed-A tasks, tested on the seed-B tasks (and the other
way round): on the pixels, and on 256 random ReLU features of the pixels. Figure: held-out MCC
(Matthews correlation) of the predicted vs true mode label; 0 = no leak, 1 = the thumbnail gives
the label away. Target for v2: at most 0.3.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def thumbnails(tasks) -> tuple[np.ndarray, np.ndarray]:
    from PIL import Image

    x = np.stack(
        [
            np.asarray(t.images[0].open().convert("RGB").resize((64, 64), Image.Resampling.BOX), np.float32).ravel()
            / 255
            for t in tasks
        ]
    )
    y = np.array([t.mode_label == "tool_required" for t in tasks], int)
    return x, y


def probe_mcc(
    train: tuple[np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray], features: str, seed: int = 0
) -> float:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import matthews_corrcoef
    from sklearn.preprocessing import StandardScaler

    (xa, ya), (xb, yb) = train, test
    if features == "relu256":
        rng = np.random.default_rng(seed)
        weights = rng.normal(0, 1 / np.sqrt(xa.shape[1]), size=(xa.shape[1], 256)).astype(np.float32)
        bias = rng.normal(0, 1, size=256).astype(np.float32)
        centre = xa.mean(axis=0)
        xa, xb = (np.maximum(0, (x - centre) @ weights * 8 + bias) for x in (xa, xb))
    scaler = StandardScaler().fit(xa)
    model = LogisticRegression(max_iter=3000, C=1.0).fit(scaler.transform(xa), ya)
    return float(matthews_corrcoef(yb, model.predict(scaler.transform(xb))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=220, help="tasks per seed (twins count)")
    parser.add_argument("--train-seed", type=int, default=1)
    parser.add_argument("--test-seed", type=int, default=2)
    parser.add_argument("--difficulty", type=float, default=0.5)
    parser.add_argument("--generators", default="v1,v2")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core

    from vtb_env.synth import generate

    report = {}
    for generator in args.generators.split(","):
        data, elapsed = {}, 0.0
        for seed in (args.train_seed, args.test_seed):
            start = time.perf_counter()
            tasks = generate(args.n, seed, difficulty=args.difficulty, generator=generator)
            elapsed += time.perf_counter() - start
            data[seed] = thumbnails(tasks)
        a, b = data[args.train_seed], data[args.test_seed]
        row = {
            "tasks_per_seed": args.n,
            "tasks_per_s": round(2 * args.n / elapsed, 2),
            "required_share": [round(float(a[1].mean()), 3), round(float(b[1].mean()), 3)],
        }
        for features in ("pixels64", "relu256"):
            row[f"mcc_{features}_{args.train_seed}->{args.test_seed}"] = round(probe_mcc(a, b, features), 3)
            row[f"mcc_{features}_{args.test_seed}->{args.train_seed}"] = round(probe_mcc(b, a, features), 3)
        report[generator] = row
        print(generator, json.dumps(row), flush=True)
    if {"v1", "v2"} <= set(report):
        print(f"speed v2/v1: {report['v2']['tasks_per_s'] / report['v1']['tasks_per_s']:.2f}")


if __name__ == "__main__":
    main()
