"""Benchmark: stream N official-schema rows with realistic images through ``iter_tasks``.

Writes a temporary parquet file in the exact Hub schema (1-3 PNGs of ~1000x800 per row, row
groups of 100 rows like ``datasets`` writes for image data), then measures, each phase in a
fresh process so peak RSS is its own:

- ``stream``: ``iter_tasks`` over the file (each image decoded once by the loader's
  validation; the consumer then touches every image's bytes);
- ``baseline``: ``pyarrow.parquet.read_table`` of the whole file + the same decode of every image.

Usage: .venv/bin/python scripts/bench_loading.py [--rows 1000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.support (the project itself is installed)

from tests.support.official_parquet import CURRENT_SCHEMA, HF_METADATA, make_row, rubric  # noqa: E402

POOL_SIZE = 16  # distinct images; rows draw from them (dictionary encoding off, so no dedup)
ROW_GROUP_ROWS = 100


def photo_like_png(rng: np.random.Generator, width: int = 1000, height: int = 800) -> bytes:
    """A gradient plus sensor-like noise: compresses like a photo (~1.4 MB PNG), unlike a flat colour."""
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 / width, y * 255 / height, (x + y) * 127 / (width + height)], axis=-1)
    shift = rng.uniform(-60, 60, size=3)
    pixels = np.clip(base + shift + rng.normal(0, 4, (height, width, 3)), 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def generate(path: Path, rows: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    pool = [photo_like_png(rng) for _ in range(POOL_SIZE)]
    schema = CURRENT_SCHEMA.with_metadata(HF_METADATA)
    n_images = 0
    with pq.ParquetWriter(path, schema, use_dictionary=False) as writer:
        for start in range(0, rows, ROW_GROUP_ROWS):
            batch = []
            for i in range(start, min(start + ROW_GROUP_ROWS, rows)):
                n_turns = 1 if i % 2 == 0 else int(rng.integers(2, 4))
                per_turn = [[] for _ in range(n_turns)]
                for _ in range(int(rng.integers(1, 4))):  # 1-3 images, some turns bring none
                    per_turn[int(rng.integers(0, n_turns))].append(pool[int(rng.integers(0, POOL_SIZE))])
                n_images += sum(map(len, per_turn))
                turns = [
                    {
                        "prompt": f"question {i}.{t}",
                        "answer": "42",
                        "images": images,
                        "rubrics": {f"r{i}-{t}": rubric("says 42", 5, "yes")},
                    }
                    for t, images in enumerate(per_turn)
                ]
                batch.append(make_row(f"{i:024x}", turns, prompt_category="physics", eval_focus="region_switch_qa"))
            writer.write_table(pa.Table.from_pylist(batch, schema=schema), row_group_size=ROW_GROUP_ROWS)
    return {"rows": rows, "images": n_images, "file_mb": round(path.stat().st_size / 1e6, 1)}


def peak_rss_mb() -> float:
    """This process's resident-set high-water mark (VmHWM; ru_maxrss survives exec on Linux)."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def phase_stream(path: Path) -> dict:
    from vtb_env.loaders import LoadReport, iter_tasks

    report = LoadReport()
    start, rows, images, nbytes = time.perf_counter(), 0, 0, 0
    for task in iter_tasks(path, report=report):
        rows += 1
        for image in task.images:
            nbytes += len(image.read_bytes())
            images += 1
    assert not report.skipped, report.skipped
    return {"seconds": time.perf_counter() - start, "rows": rows, "images": images, "image_mb": nbytes / 1e6}


def phase_baseline(path: Path) -> dict:
    from vtb_env.tasks import decode_image

    start, rows, images = time.perf_counter(), 0, 0
    column = pq.read_table(path).column("images_by_turn")  # the whole file in memory
    for index in range(len(column)):
        row_images = column[index].as_py()
        rows += 1
        for turn in row_images:
            for image in turn:
                decode_image(image["bytes"])
                images += 1
    return {"seconds": time.perf_counter() - start, "rows": rows, "images": images}


def run_phase(name: str, path: Path) -> dict:
    """Each phase in its own process: ru_maxrss is a per-process high-water mark."""
    out = subprocess.run(
        [sys.executable, __file__, "--phase", name, str(path)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--keep", type=Path, help="write the parquet here and keep it")
    parser.add_argument("--phase", choices=("stream", "baseline"), help=argparse.SUPPRESS)
    parser.add_argument("path", nargs="?", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        import_mb = peak_rss_mb()
        result = (phase_stream if args.phase == "stream" else phase_baseline)(args.path)
        print(json.dumps({**result, "peak_rss_mb": peak_rss_mb(), "rss_after_imports_mb": import_mb}))
        return

    workdir = args.keep or Path(tempfile.mkdtemp(prefix="vtb-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "test-00000-of-00001.parquet"
    started = time.perf_counter()
    info = generate(path, args.rows)
    print(
        f"generated {info['rows']} rows, {info['images']} images, {info['file_mb']} MB "
        f"in {time.perf_counter() - started:.1f}s: {path}"
    )
    with path.open("rb") as handle:  # warm the page cache so neither phase pays the first disk read
        while handle.read(1 << 24):
            pass
    results = {name: run_phase(name, path) for name in ("stream", "baseline")}
    for name, r in results.items():
        print(
            f"{name:<9} {r['seconds']:7.2f}s  {r['rows'] / r['seconds']:7.1f} rows/s  "
            f"{r['images'] / r['seconds']:7.1f} images/s  "
            f"peak RSS {r['peak_rss_mb']:7.0f} MB (after imports {r['rss_after_imports_mb']:.0f} MB)"
        )
    stream, base = results["stream"], results["baseline"]
    print(
        f"stream/baseline: time x{stream['seconds'] / base['seconds']:.2f}, "
        f"peak RSS x{stream['peak_rss_mb'] / base['peak_rss_mb']:.2f}"
    )
    if not args.keep:
        path.unlink()
        workdir.rmdir()


if __name__ == "__main__":
    main()
