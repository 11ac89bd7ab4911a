"""Real vLLM servers (OpenAI-compatible, 127.0.0.1) for the `vllm` integration stage.

Servers are session-scoped: each starts once (25-70 s on 2 CPU cores) through
``scripts/vllm_server.sh`` and is stopped by PID at the end. Start-up and request timings are
collected in the ``vllm_metrics`` dict and written as JSON to ``$VTB_VLLM_METRICS`` if set.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.support import tiny_models

ROOT = Path(__file__).resolve().parents[2]
SERVER_SCRIPT = ROOT / "scripts" / "vllm_server.sh"

# What the scripted VLM does on each user turn: crop the first task image, then answer.
SCRIPTED_CALL = {
    "name": "python_image_processing",
    "arguments": {
        "code": (
            "from PIL import Image\n"
            "img = Image.open('image_1.png')\n"
            "img.crop((0, 0, img.width // 2, img.height // 2)).save('transformed_image_0.png')\n"
            "print(img.size)"
        )
    },
}
SCRIPTED_ANSWER = "The answer is 3."
# 4096 tokens: the env's prompt with all six tool schemas is ~3300 tokens with the tiny tokenizer
# (the scripted model ignores position up to 4096).
# --enable-scale-out: the token-in endpoints (/inference/v1/generate, /v1/chat/completions/render) that TRL's
# server mode uses for VLM prompts and test_vllm_vlm_rollout.py reads vLLM's final prompt ids from.
SCRIPTED_SERVER_OPTIONS = ("--max-images", "8", "--max-model-len", "4096", "--", "--enable-scale-out")
# The reply format vtb_rewards.judge parses (rewards/judge/verdict.py).
JUDGE_VERDICT = '{"explanation": "The response states the count.", "judge_result": "Met"}'


@dataclass(frozen=True)
class VLLMServer:
    """A running server: OpenAI base URL, the served model name, its state dir (pid, log) and checkpoint dir."""

    base_url: str
    model: str
    state: Path
    model_dir: Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _server_script(*args: str) -> str:
    done = subprocess.run(["bash", str(SERVER_SCRIPT), *args], stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/vllm_server.sh {args[0]} failed (exit {done.returncode})")
    return done.stdout.strip()


@pytest.fixture(scope="session")
def vllm_metrics() -> Iterator[dict[str, float]]:
    metrics: dict[str, float] = {}
    yield metrics
    if target := os.environ.get("VTB_VLLM_METRICS"):
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        Path(target).write_text(json.dumps(metrics, indent=2) + "\n")


def _serve(model_dir: Path, name: str, state: Path, metrics: dict, *extra: str) -> Iterator[VLLMServer]:
    began = time.perf_counter()
    url = _server_script(
        "start",
        "--model",
        str(model_dir),
        "--family",
        "tiny",
        "--name",
        name,
        "--port",
        str(_free_port()),
        "--state",
        str(state),
        *extra,
    )
    metrics[f"{name}_startup_s"] = round(time.perf_counter() - began, 1)
    try:
        yield VLLMServer(url.splitlines()[-1], name, state, model_dir)
    finally:
        _server_script("stop", "--state", str(state))
        assert not (state / "server.pid").exists()


@pytest.fixture(scope="session")
def scripted_vlm_server(tmp_path_factory, vllm_metrics) -> Iterator[VLLMServer]:
    """The scripted Idefics3 model: calls python_image_processing until the first tool result, then answers.

    ``call_each_turn=False`` because the env returns a tool's images in a separate ``user``
    message after the tool messages (the paper's placement): a model that calls once per user
    message would read that message as a new turn and call again, up to the env's tool cap.
    """
    root = tmp_path_factory.mktemp("scripted_vlm")
    model = tiny_models.build_scripted_model(
        root / "model", "idefics3", SCRIPTED_CALL, SCRIPTED_ANSWER, call_each_turn=False
    )
    yield from _serve(model, "scripted-vlm", root / "state", vllm_metrics, *SCRIPTED_SERVER_OPTIONS)


@pytest.fixture(scope="session")
def judge_server(tmp_path_factory, vllm_metrics) -> Iterator[VLLMServer]:
    """A text model standing in for the rubric judge: always replies ``JUDGE_VERDICT``."""
    root = tmp_path_factory.mktemp("judge")
    model = tiny_models.build_scripted_model(root / "model", "llama", None, JUDGE_VERDICT)
    yield from _serve(model, "judge", root / "state", vllm_metrics)
