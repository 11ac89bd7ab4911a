"""Memory of big tool images in the environment process (issue 11, item 7).

The real vision tool (sandbox) returns four 8000x8000 (64 Mpx) PNGs; the environment ingests
them as it does after a call (``ImageAsset.validated``). Prints the process's RSS before, after
and at peak, and how many images came through. ``--no-call-cap`` lifts the per-call pixel budget
to isolate the effect of keeping images encoded.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_tool_images.py [--no-call-cap]
"""

from __future__ import annotations

import argparse
import resource
import time

from vtb_env.observation import ImageAsset
from vtb_env.sandbox import Limits, Sandbox
from vtb_env.tools import ToolContext, python_tools

CODE = (
    "from PIL import Image, ImageDraw\n"
    "for i in range(4):\n"
    "    im = Image.new('RGB', (8000, 8000), (i * 40, 90, 160))\n"
    "    ImageDraw.Draw(im).line((0, 0, 7999, 7999), fill=(255, 255, 255), width=9)\n"
    "    im.save(f'transformed_image_{i}.png')\n"
    "    del im\n"
)


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-call-cap", action="store_true")
    args = parser.parse_args()
    if args.no_call_cap and hasattr(python_tools, "MAX_PIXELS_PER_CALL"):
        python_tools.MAX_PIXELS_PER_CALL = 10**12
    with Sandbox(1, limits=Limits(timeout_s=120, memory_mb=4096)) as sandbox:
        sandbox.start()
        tool = python_tools.PythonImageProcessing(sandbox)
        start_rss = rss_mib()
        start = time.perf_counter()
        result = tool.run({"code": CODE}, ToolContext(task_id="bench"))
        tool_s = time.perf_counter() - start
        assets = [
            ImageAsset.validated(f"transformed_image_{i}.png", image.data) for i, image in enumerate(result.images)
        ]
        total_s = time.perf_counter() - start
        end_rss = rss_mib()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"images returned: {len(assets)} (encoded {sum(len(a.data) for a in assets) / 2**20:.1f} MiB); "
        f"tool message {len(result.text)} chars"
    )
    print(f"RSS before {start_rss:.0f} MiB, after {end_rss:.0f} MiB (+{end_rss - start_rss:.0f}), peak {peak:.0f} MiB")
    print(f"time: tool call {tool_s:.1f} s (sandbox work + checks), with ingestion {total_s:.1f} s")


if __name__ == "__main__":
    main()
