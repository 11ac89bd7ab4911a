"""Memory of big tool images in the environment process (issue 11, item 7).

One ``env.step`` whose call to the real vision tool (sandbox) writes four 8000x8000 (64 Mpx)
PNGs; the environment checks, names and keeps them (``vtb_env.tool_images``). Prints the process's RSS
before, after and at peak, and how many images came through. ``--no-call-cap`` lifts the per-call
pixel budget to isolate the effect of keeping images encoded.

    .venv/bin/python scripts/bench_tool_images.py [--no-call-cap]
"""

from __future__ import annotations

import argparse
import json
import resource
import time

from vtb_env import env as env_module
from vtb_env import tool_images
from vtb_env.sandbox import Limits, Sandbox
from vtb_env.tools import python_tools
from vtb_env.tools.base import ToolRegistry

CODE = (
    "from PIL import Image, ImageDraw\n"
    "for i in range(4):\n"
    "    im = Image.new('RGB', (8000, 8000), (i * 40, 90, 160))\n"
    "    ImageDraw.Draw(im).line((0, 0, 7999, 7999), fill=(255, 255, 255), width=9)\n"
    "    im.save(f'transformed_image_{i}.png')\n"
    "    del im\n"
)
CALL = f"<tool_call>{json.dumps({'name': 'python_image_processing', 'arguments': {'code': CODE}})}</tool_call>"


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-call-cap", action="store_true")
    args = parser.parse_args()
    if args.no_call_cap:
        tool_images.MAX_TOOL_PIXELS_PER_CALL = 10**12
    with Sandbox(1, limits=Limits(timeout_s=120, memory_mb=4096)) as sandbox:
        sandbox.start()
        tools = ToolRegistry([python_tools.PythonImageProcessing(sandbox)])
        env = env_module.VisualToolBenchEnv(tasks="demo", tools=tools)
        env.reset(seed=0)
        start_rss = rss_mib()
        start = time.perf_counter()
        pending = env.execute(env.begin_step(CALL))
        tool_s = pending.calls[0].latency_s
        obs, *_ = env.end_step(pending)
        total_s = time.perf_counter() - start
        end_rss = rss_mib()
        kept = pending.new_images
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"images kept: {len(kept)} (encoded {sum(len(a.data) for a in kept) / 2**20:.1f} MiB); "
        f"tool message {len(obs['messages'][-2]['content'])} chars"
    )
    print(f"RSS before {start_rss:.0f} MiB, after {end_rss:.0f} MiB (+{end_rss - start_rss:.0f}), peak {peak:.0f} MiB")
    print(f"time: tool call {tool_s:.1f} s (sandbox work), step with the env's checks {total_s:.1f} s")


if __name__ == "__main__":
    main()
