#!/usr/bin/env python
"""Benchmark the sandbox against plain Python, all in one run on this machine.

The standard job (open a 2000x1500 PNG, crop 1200x900, raise contrast, save PNG) and a trivial
``print(1)``, each run (a) in-process, (b) as a fresh ``python -c`` subprocess, (c) in our sandbox
(end to end: image bytes in over the pipe, the result file back). Prints medians, p95, ratios,
throughput with 1 and 2 slots, and the active isolation layers.

    .venv/bin/python scripts/bench_sandbox.py [--runs 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from PIL import Image

from vtb_env.sandbox import Sandbox

JOB = (
    "from PIL import Image, ImageEnhance\n"
    "img = Image.open('image_1.png')\n"
    "out = ImageEnhance.Contrast(img.crop((400, 300, 1600, 1200))).enhance(1.5)\n"
    "out.save('transformed_image_0.png'{level})\n"
)
TRIVIAL = "print(1)"
# What a fresh interpreter must import to offer what the tool advertises (the sandbox preloads it).
PRELOAD = "import numpy, cv2, PIL.Image, PIL.ImageEnhance, PIL.ImageFilter, PIL.ImageOps\n"


def test_image() -> bytes:
    """A photo-like 2000x1500 PNG: smooth shapes plus mild sensor noise (about 2.5 bytes/pixel, like a photo)."""
    rng = np.random.default_rng(0)
    small = rng.integers(0, 256, (150, 200, 3), dtype=np.uint8)
    image = Image.fromarray(small).resize((2000, 1500), Image.BICUBIC)
    noise = rng.integers(-3, 4, (1500, 2000, 3))
    image = Image.fromarray(np.clip(np.asarray(image, dtype=np.int16) + noise, 0, 255).astype(np.uint8))
    buf = io.BytesIO()
    image.save(buf, "PNG")
    return buf.getvalue()


def timed(fn, runs: int) -> list[float]:
    fn()  # warm-up
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": statistics.median(ordered) * 1e3,
        "p95_ms": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1e3,
    }


def in_process(code: str, workdir: str):
    def run():
        cwd = os.getcwd()
        os.chdir(workdir)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(code, "<job>", "exec"), {"__name__": "__main__"})
        finally:
            os.chdir(cwd)

    return run


def fresh_subprocess(code: str, workdir: str):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    return lambda: subprocess.run(
        [sys.executable, "-c", code], cwd=workdir, env=env, check=True, stdout=subprocess.DEVNULL
    )


def in_sandbox(sandbox: Sandbox, code: str, files: dict[str, bytes]):
    def run():
        result = sandbox.run(code, files, collect_files=True)
        assert result.exit_code == 0, result.stderr

    return run


def throughput(sandbox: Sandbox, code: str, files: dict[str, bytes], calls: int) -> float:
    in_sandbox(sandbox, code, files)()
    start = time.perf_counter()
    with ThreadPoolExecutor(sandbox.slots) as pool:
        list(pool.map(lambda _: in_sandbox(sandbox, code, files)(), range(calls)))
    return calls / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="timed runs per configuration (image job)")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    png = test_image()
    files = {"image_1.png": png}
    scratch = tempfile.TemporaryDirectory(prefix="vtb-bench-")
    workdir = scratch.name
    print(f"test image: 2000x1500 PNG, {len(png) / 1e6:.1f} MB")
    with open(os.path.join(workdir, "image_1.png"), "wb") as f:
        f.write(png)
    job6, job1, job_default = (
        JOB.format(level=", compress_level=6"),
        JOB.format(level=", compress_level=1"),
        JOB.format(level=""),
    )
    import cv2  # noqa: F401  (in-process gets the same imports the sandbox preloads)

    cv2.setNumThreads(1)
    figures: dict[str, dict] = {}
    with Sandbox(1) as sandbox:
        sandbox.start()
        layers, notes = sandbox.layers, sandbox.notes
        trivial_runs = max(50, args.runs)
        figures["image (a) in-process, PNG level 6 (PIL default)"] = summary(
            timed(in_process(job_default, workdir), args.runs)
        )
        figures["image (a) in-process, PNG level 1"] = summary(timed(in_process(job1, workdir), args.runs))
        figures["image (b) fresh python -c, advertised imports"] = summary(
            timed(fresh_subprocess(PRELOAD + job_default, workdir), max(5, args.runs // 2))
        )
        figures["image (b') fresh python -c, PIL import only"] = summary(
            timed(fresh_subprocess(job_default, workdir), max(5, args.runs // 2))
        )
        figures["image (c) sandbox, PNG level 6"] = summary(timed(in_sandbox(sandbox, job6, files), args.runs))
        figures["image (c) sandbox, default (PNG level 1)"] = summary(
            timed(in_sandbox(sandbox, job_default, files), args.runs)
        )
        figures["trivial (a) in-process"] = summary(timed(in_process(TRIVIAL, workdir), trivial_runs))
        figures["trivial (b) fresh python -c, advertised imports"] = summary(
            timed(fresh_subprocess(PRELOAD + TRIVIAL, workdir), max(10, args.runs // 2))
        )
        figures["trivial (b') fresh python -c, no imports"] = summary(
            timed(fresh_subprocess(TRIVIAL, workdir), max(10, args.runs // 2))
        )
        figures["trivial (c) sandbox"] = summary(timed(in_sandbox(sandbox, TRIVIAL, {}), trivial_runs))
        rates = {
            "image jobs/s, 1 slot": throughput(sandbox, job_default, files, 2 * args.runs),
            "trivial calls/s, 1 slot": throughput(sandbox, TRIVIAL, {}, 200),
        }
    with Sandbox(2) as sandbox:
        sandbox.start()
        rates["image jobs/s, 2 slots"] = throughput(sandbox, job_default, files, 2 * args.runs)
        rates["trivial calls/s, 2 slots"] = throughput(sandbox, TRIVIAL, {}, 200)
    a = figures["image (a) in-process, PNG level 6 (PIL default)"]["p50_ms"]
    b = figures["image (b) fresh python -c, advertised imports"]["p50_ms"]
    b_min = figures["image (b') fresh python -c, PIL import only"]["p50_ms"]
    c = figures["image (c) sandbox, default (PNG level 1)"]["p50_ms"]
    c6 = figures["image (c) sandbox, PNG level 6"]["p50_ms"]
    ratios = {
        "image (c)/(a)": c / a,
        "image (b)/(c)": b / c,
        "image (b')/(c)": b_min / c,
        "image (c, level 6)/(a)": c6 / a,
        "image (c, level 6)/(a, level 1)": c6 / figures["image (a) in-process, PNG level 1"]["p50_ms"],
    }
    print(f"\ncpus: {os.cpu_count()}   python {sys.version.split()[0]}")
    print(f"active layers: {', '.join(layers)}")
    for note in notes:
        print(f"note: {note}")
    print(f"\n{'configuration':52s} {'p50 ms':>9s} {'p95 ms':>9s}")
    for name, s in figures.items():
        print(f"{name:52s} {s['p50_ms']:9.1f} {s['p95_ms']:9.1f}")
    print()
    for name, value in ratios.items():
        print(f"{name:52s} {value:9.2f}x")
    for name, value in rates.items():
        print(f"{name:52s} {value:9.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"layers": layers, "notes": notes, "latency": figures, "ratios": ratios, "throughput": rates},
                f,
                indent=2,
            )


if __name__ == "__main__":
    main()
