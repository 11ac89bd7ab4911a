"""The repository files one episode's steps run code in, from action text to reward (docs/architecture.md).

A synthetic tool-required task, the env's default reward and tools; the first step is a hermes call of
``python_image_processing`` that crops the task's image, the second the final answer that ends the episode.
Every Python call in this process is watched (``sys.setprofile``, in every thread); the fork server runs in
its own process and is not seen. Prints each step's files in the order they first run code.

    .venv/bin/python scripts/trace_step.py [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any, Callable

from vtb_env.env import VisualToolBenchEnv
from vtb_env.synth import generate

THIS_FILE = Path(__file__).resolve()
ROOT = THIS_FILE.parent.parent
CROP = (
    "from PIL import Image\nimage = Image.open('image_1.png')\n"
    "image.crop((0, 0, image.width // 2, image.height // 2)).save('transformed_image_0.png')"
)
VISION_CALL = "<tool_call>\n%s\n</tool_call>" % json.dumps(
    {"name": "python_image_processing", "arguments": {"code": CROP}}
)
FINAL_ANSWER = "The answer is 42."


def repository_file(frame: FrameType) -> str | None:
    """The frame's file relative to the repository, or None for a file outside it (libraries, the venv) and
    for this script (its lambdas are the steps' callers)."""
    path = Path(frame.f_code.co_filename)
    if not path.is_absolute() or ".venv" in path.parts or not path.is_relative_to(ROOT) or path == THIS_FILE:
        return None
    return path.relative_to(ROOT).as_posix()


def files_run(step: Callable[[], Any]) -> list[str]:
    """The repository files whose code runs during ``step()``, in the order they first do."""
    seen: dict[str, None] = {}

    def watch(frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call" and (name := repository_file(frame)) is not None:
            seen.setdefault(name, None)

    sys.setprofile(watch)
    threading.setprofile(watch)
    try:
        step()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return list(seen)


def trace_episode() -> dict[str, list[str]]:
    """Each step's files: ``call`` (the vision call), ``answer`` (the final answer and the reward)."""
    task = next(t for t in generate(8, 0) if t.mode_label == "tool_required" and t.turncase == "single-turn")
    env = VisualToolBenchEnv(tasks=[task])
    try:
        env.reset(seed=0)
        env.tools["python_image_processing"].sandbox.start()  # the pool's start-up is not part of a step
        call = files_run(lambda: env.step(VISION_CALL))
        answer = files_run(lambda: env.step(FINAL_ANSWER))
    finally:
        env.close()
    return {"call": call, "answer": answer}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the files of each step here")
    args = parser.parse_args()
    steps = trace_episode()
    for name, files in steps.items():
        print(f"{name} step: {len(files)} files")
        print("".join(f"  {f}\n" for f in files), end="")
    print(f"both steps: {len(dict.fromkeys(steps['call'] + steps['answer']))} files")
    if args.json:
        args.json.write_text(json.dumps(steps, indent=1))


if __name__ == "__main__":
    main()
