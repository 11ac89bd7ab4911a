"""Tool images in the environment process: memory of big ones (issue 11), time of decode bombs (issue 32).

Default: one ``env.step`` whose call to the real vision tool (sandbox) writes four 8000x8000 (64 Mpx)
PNGs; the environment checks, names and keeps them (``vtb_env.tool_images``). Prints the process's RSS
before, after and at peak, and how many images came through. ``--no-call-cap`` lifts the per-call
pixel budget (the env's and the sandbox check's) to isolate the effect of keeping images encoded.

``--decode-bombs``: for each image whose decoding is the attack (``tests/support/decode_bombs.py``:
progressive and arithmetic JPEG with the last scan repeated 600 times, interlaced PNG, APNG/GIF/WebP with
20,000 frames, TIFF with a strip per row; ``--scale`` sizes them), model code writes it through the real
tool in ``env.step``, once per tool timeout of ``--timeouts``. *Before* is the old path, measured here on the
same bytes: the env decoded the tool's bytes in its own thread (``decode_image`` and the conversion) and,
for a PNG/JPEG/WebP in a shown mode, passed them on as they were, so each consumer decoded them again.
*After* is the step time now (the decode happens in the sandbox call's checking child, within the call's
time) and the decode time of what reached the observation.

    .venv/bin/python scripts/bench_tool_images.py [--no-call-cap]
    .venv/bin/python scripts/bench_tool_images.py --decode-bombs [--scale 1.0] [--timeouts 0.6,20]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import sys
import time
from pathlib import Path

from PIL import Image

from vtb_env import env as env_module
from vtb_env import tool_images
from vtb_env.sandbox import Limits, Sandbox
from vtb_env.sandbox.image_modes import SHOWN_MODES
from vtb_env.tasks import ImageDecodeError, decode_image
from vtb_env.tools import python_tools
from vtb_env.tools.base import ToolRegistry

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.decode_bombs import bomb_bytes, bombs  # noqa: E402

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


def timed_decode(data: bytes) -> tuple[float, Image.Image | None]:
    """Seconds to decode ``data`` fully, and the image (None when it does not decode)."""
    start = time.perf_counter()
    try:
        image = decode_image(data)
    except ImageDecodeError:
        image = None
    return time.perf_counter() - start, image


def before(data: bytes) -> tuple[float, float]:
    """The old path on ``data``: (the env's decode in its own thread, each consumer's decode of what it passed on)."""
    env_s, image = timed_decode(data)
    passed_on = (
        image is not None
        and image.format in ("PNG", "JPEG", "WEBP")
        and image.mode in SHOWN_MODES
        and getattr(image, "n_frames", 1) == 1
    )
    return env_s, (timed_decode(data)[0] if passed_on else 0.0)


def step_through_tool(code: str, timeout: float) -> tuple[float, str, float]:
    """One ``env.step`` whose vision call runs ``code`` with ``timeout``: (step seconds, what was shown, and the
    decode seconds of the bytes that reached the observation)."""
    with Sandbox(1, limits=Limits(timeout_s=timeout, memory_mb=4096)) as sandbox:
        sandbox.start()
        env = env_module.VisualToolBenchEnv(
            tasks="demo", tools=ToolRegistry([python_tools.PythonImageProcessing(sandbox)])
        )
        env.reset(seed=0)
        call = {"name": "python_image_processing", "arguments": {"code": code}}
        start = time.perf_counter()
        obs, *_ = env.step(f"<tool_call>{json.dumps(call)}</tool_call>")
        step_s = time.perf_counter() - start
        if not obs["image_names"][-1].startswith("transformed_image_"):
            return step_s, "refused", 0.0
        shown = obs["images"][-1]
        decode_s, _ = timed_decode(env._episode.dialogue.assets[-1].data)
        env.close()
    return step_s, f"{shown.format} {shown.width}x{shown.height}", decode_s


def decode_bombs(scale: float, timeouts: list[float]) -> None:
    """The table of the module doc, one row per bomb, one pair of *after* columns per tool timeout."""
    after = "".join(f" after, timeout {t:g} s: env.step s / shown as / consumer decode s |" for t in timeouts)
    print(f"bombs at scale {scale:g}")
    print(f"| image | bytes | before: env decode s | before: consumer decode s |{after}")
    print("|---|---:|---:|---:|" + "---:|---|---:|" * len(timeouts))
    for name, code in bombs(scale).items():
        data = bomb_bytes(code)
        env_s, consumer_s = before(data)
        cells = [
            f"{step_s:.2f} | {label} | {decode_s:.3f}"
            for step_s, label, decode_s in (step_through_tool(code, t) for t in timeouts)
        ]
        print(f"| {name} | {len(data)} | {env_s:.2f} | {consumer_s:.2f} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-call-cap", action="store_true")
    parser.add_argument("--decode-bombs", action="store_true")
    parser.add_argument("--scale", type=float, default=1.0, help="size of the decode bombs (1.0: 16 Mpx, 20k frames)")
    parser.add_argument(
        "--timeouts", default="0.6,20", help="the vision tool's timeouts for the decode bombs (comma list)"
    )
    args = parser.parse_args()
    if args.decode_bombs:
        decode_bombs(args.scale, [float(t) for t in args.timeouts.split(",")])
        return
    if args.no_call_cap:
        tool_images.MAX_TOOL_PIXELS_PER_CALL = 10**12
        python_tools.RETURNED_IMAGES = dataclasses.replace(python_tools.RETURNED_IMAGES, max_call_pixels=10**12)
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
