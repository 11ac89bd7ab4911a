"""Benchmark the environment's own overhead per step (parsing + observation building, tool time excluded).

Measures p50/p99 of ``StepRecord.env_overhead_s`` for text steps (a calculator call) and for
steps whose tool returns a 2000x1500 PNG, in the default and official presets, and compares
them with the raw work measured in the same run: one ``json.loads`` of the call and one encode
of the image (PNG for the default preset's pass-through, JPEG q85 for the official one).

    .venv/bin/python scripts/bench_env.py [--steps 200]
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import time
from typing import Any, Callable, Mapping

import numpy as np
from PIL import Image

from vtb_env.env import VisualToolBenchEnv
from vtb_env.tasks import ImageRef, Task, Turn
from vtb_env.tools.base import NamedImage, Tool, ToolContext, ToolRegistry, ToolResult

CALL = '<tool_call>{"name": "calculator", "arguments": {"expression": "13 + 3"}}</tool_call>'
IMAGE_CALL = (
    '<tool_call>{"name": "python_image_processing", '
    '"arguments": {"code": "img.crop((0, 0, 10, 10)).save(\'transformed_image_0.png\')"}}</tool_call>'
)


def photo_like(width: int = 2000, height: int = 1500, seed: int = 0) -> Image.Image:
    """Smooth gradients plus sensor-like noise: compresses like a photo, not like a flat test card."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 / width, y * 255 / height, (x + y) * 127 / (width + height)], axis=-1)
    pixels = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
    return Image.fromarray(pixels, "RGB")


def encode(image: Image.Image, fmt: str, **options: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


class FixedTool(Tool):
    """Returns prepared output instantly, so the step's time is the env's own."""

    def __init__(self, name: str, image: bytes | None = None):
        self.name = name
        self.schema = {
            "type": "function",
            "function": {
                "name": name,
                "description": "bench",
                "parameters": {
                    "type": "object",
                    "properties": {"code": {"type": "string", "maxLength": 5000}, "expression": {"type": "string"}},
                },
            },
        }
        self.image = image

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        images = [NamedImage(f"transformed_image_{context.next_image_index}.png", self.image)] if self.image else []
        return ToolResult(text=json.dumps({"result": "16", "saved": [i.name for i in images]}), images=images)


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]


def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, float]:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return percentiles(samples)


def env_overheads(
    preset: str, action: str, tools: ToolRegistry, task: Task, steps: int, steps_per_episode: int = 10
) -> tuple[float, float]:
    env = VisualToolBenchEnv(tasks=[task], tools=tools, config=preset)  # the default reward (no rubrics here)
    samples: list[float] = []
    while len(samples) < steps:
        env.reset(seed=len(samples))
        for _ in range(steps_per_episode):
            _, _, _, _, info = env.step(action)
            samples.append(info["record"].turns[-1].steps[-1].env_overhead_s)
    return percentiles(samples[:steps])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="measured steps per case")
    args = parser.parse_args(argv)

    image = photo_like()
    png, task_png = encode(image, "PNG"), encode(photo_like(seed=1), "PNG")
    task = Task(id="bench", turns=(Turn(prompt="How much is it?", images=(ImageRef(name="menu.png", data=task_png),)),))
    tools = ToolRegistry([FixedTool("calculator"), FixedTool("python_image_processing", png)])
    call_json = CALL.removeprefix("<tool_call>").removesuffix("</tool_call>")

    raw_json = timed(lambda: json.loads(call_json), 2000)
    raw_png = timed(lambda: encode(image, "PNG"), 5)
    raw_jpeg = timed(lambda: encode(image, "JPEG", quality=85), 20)
    print(
        f"raw work: json.loads p50 {raw_json[0] * 1e6:.1f} us | PNG encode 2000x1500 p50 {raw_png[0] * 1e3:.1f} ms | "
        f"JPEG q85 encode p50 {raw_jpeg[0] * 1e3:.1f} ms"
    )
    print(f"image: 2000x1500, PNG {len(png) / 1e6:.1f} MB")
    print(f"{'case':<28}{'p50':>12}{'p99':>12}{'p50 / raw':>14}  raw")
    image_steps = max(20, args.steps // 5)
    for preset in ("default", "official"):
        text = env_overheads(preset, CALL, tools, task, args.steps)
        print(
            f"{preset + ' text step':<28}{text[0] * 1e6:>10.0f}us{text[1] * 1e6:>10.0f}us"
            f"{text[0] / raw_json[0]:>13.0f}x  json.loads"
        )
        img = env_overheads(preset, IMAGE_CALL, tools, task, image_steps, steps_per_episode=5)
        print(
            f"{preset + ' 2000x1500 image step':<28}{img[0] * 1e3:>10.1f}ms{img[1] * 1e3:>10.1f}ms"
            f"{img[0] / raw_jpeg[0]:>13.2f}x  JPEG q85 encode ({img[0] / raw_png[0]:.3f}x PNG encode)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
