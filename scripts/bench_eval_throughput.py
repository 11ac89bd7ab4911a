"""Evaluation throughput against an OpenAI-compatible server, and client CPU per request.

1. Requests/s of `vtb eval`'s runner (``evaluate``: env, agent over HTTP, exact judge, records)
   against a local server that answers every request after a fixed latency, at concurrency
   1/8/32/64/128, as a ratio to the ideal ``concurrency / latency``, next to the HTTP agent alone
   (no env). Concurrency 1 was the old default; 64 is the new one for OpenAI-compatible agents.
2. Client CPU per request for a dialogue holding four 12-megapixel JPEG photos (as the env sends
   them: original bytes in data URLs), before and after, in the same run:
   - before: the old code path (each request base64-decodes and fully decodes every image to
     read its size; a policy that needs a resize re-encodes every image on every request);
   - after: ``vtb_agents.messages.to_chat_messages`` with the agent's ``EncodedImages`` cache
     (sizes from the header, each image encoded once per episode).

    .venv/bin/python scripts/bench_eval_throughput.py [--latency 0.25] [--requests-per-slot 2]
"""

from __future__ import annotations

import argparse
import base64
import binascii
import io
import json
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.support (the project itself is installed)

from tests.support.chat_server import ChatServer  # noqa: E402
from vtb_agents.images import EncodedImages, ImagePolicy, image_data_url  # noqa: E402
from vtb_agents.messages import to_chat_messages  # noqa: E402


def write_tasks(root: Path, n: int) -> Path:
    (root / "images").mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (64, 48), "white").save(root / "images" / "img.png")
    rubric = {"r1": {"description": "states 9", "weight": 5, "check": {"type": "number", "value": 9}}}
    with open(root / "tasks.jsonl", "w") as handle:
        for i in range(n):
            turn = {
                "prompt": f"[t{i}] What is the total?",
                "images": ["img.png"],
                "golden_answer": "9",
                "rubrics": rubric,
            }
            handle.write(json.dumps({"id": f"t{i}", "turns": [turn]}) + "\n")
    return root


def requests_per_second(latency: float, concurrency: int, per_slot: int, workdir: Path) -> tuple[float, int]:
    """(requests/s, requests) of one `evaluate` run with ``concurrency`` episodes in flight."""
    from vtb_agents.openai_chat import OpenAIChatAgent
    from vtb_app.evaluation.runner import evaluate
    from vtb_env.env import VisualToolBenchEnv
    from vtb_env.loaders import load_tasks
    from vtb_env.tools import default_tools
    from vtb_rewards.judge.judge import Judge

    n = max(8, concurrency * per_slot)
    tasks = load_tasks(str(write_tasks(workdir / f"data{concurrency}", n)))
    tools = default_tools()
    with ChatServer(lambda request: {"content": "The total is 9."}, latency_s=latency) as server:
        agent = OpenAIChatAgent("m", server.base_url)
        start = time.perf_counter()
        evaluate(
            tasks,
            agent,
            lambda ts: VisualToolBenchEnv(ts, tools=tools),
            Judge(backend=None),
            workdir / f"run{concurrency}",
            concurrency=concurrency,
            progress=False,
            save_images=False,
        )
        elapsed = time.perf_counter() - start
        agent.close()
        requests = len(server.requests)
    tools.close()
    return requests / elapsed, requests


def agent_requests_per_second(latency: float, concurrency: int, per_slot: int) -> float:
    """Requests/s of the HTTP agent alone (``OpenAIChatAgent.act`` from ``concurrency`` threads, no env):
    what the client side can keep in flight, for comparison with the whole runner."""
    from concurrent.futures import ThreadPoolExecutor

    from vtb_agents.openai_chat import OpenAIChatAgent

    observation = {"messages": [{"role": "user", "content": "[t0] What is the total?"}], "images": [], "tools": []}
    n = max(8, concurrency * per_slot)
    with ChatServer(lambda request: {"content": "The total is 9."}, latency_s=latency) as server:
        agent = OpenAIChatAgent("m", server.base_url)
        start = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(lambda _: agent.act(observation), range(n)))
        elapsed = time.perf_counter() - start
        agent.close()
    return n / elapsed


def old_within_policy(url: str, policy: ImagePolicy) -> tuple[str, tuple[int, int]]:
    """The code path before this change (agents/messages.py at main): decode every image to measure it."""
    try:
        data = base64.b64decode(url.split(",", 1)[1])
        image = Image.open(io.BytesIO(data))
        image.load()
    except (binascii.Error, ValueError, OSError) as exc:
        raise ValueError(exc) from exc
    too_big = (policy.max_side and max(image.size) > policy.max_side) or (
        policy.max_bytes and len(data) > policy.max_bytes
    )
    return image_data_url(image, policy) if too_big else (url, image.size)


def old_messages(observation: dict, policy: ImagePolicy) -> list:
    messages = []
    for message in observation["messages"]:
        parts = []
        for part in message["content"]:
            if part.get("type") == "image_url":
                url, _ = old_within_policy(part["image_url"]["url"], policy)
                part = {**part, "image_url": {"url": url}}
            parts.append(part)
        messages.append({**message, "content": parts})
    return messages


def photo_url(seed: int) -> str:
    image = Image.effect_noise((4000, 3000), 20 + seed).convert("RGB")  # 12 megapixels, ~6 MB as JPEG
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()


def cpu_per_request(observation: dict, policy: ImagePolicy, requests: int) -> tuple[float, float]:
    """(before, after) client CPU seconds per request over ``requests`` requests of one episode."""
    start = time.process_time()
    for _ in range(requests):
        old_messages(observation, policy)
    before = (time.process_time() - start) / requests
    cache = EncodedImages()
    start = time.process_time()
    for _ in range(requests):
        to_chat_messages(observation, policy, cache)
    after = (time.process_time() - start) / requests
    return before, after


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.25, help="server latency per request (s)")
    parser.add_argument("--requests-per-slot", type=int, default=2, help="episodes per concurrency slot")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 64, 128])
    parser.add_argument("--cpu-requests", type=int, default=5, help="requests per episode in the CPU measurement")
    args = parser.parse_args()

    print(f"1. requests/s against a server with {args.latency:.2f} s latency (ideal = concurrency / latency)")
    print(
        f"{'concurrency':>11} {'requests':>9} {'ideal':>8} {'vtb eval req/s':>15} {'ratio':>6} "
        f"{'agent only req/s':>17} {'ratio':>6}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for concurrency in args.concurrency:
            rate, n = requests_per_second(args.latency, concurrency, args.requests_per_slot, Path(tmp))
            alone = agent_requests_per_second(args.latency, concurrency, args.requests_per_slot)
            ideal = concurrency / args.latency
            print(
                f"{concurrency:>11} {n:>9} {ideal:>8.1f} {rate:>15.1f} {rate / ideal:>6.2f} "
                f"{alone:>17.1f} {alone / ideal:>6.2f}",
                flush=True,
            )

    urls = [photo_url(i) for i in range(4)]
    observation = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Which photo shows the receipt?"},
                    *({"type": "image_url", "image_url": {"url": u}} for u in urls),
                ],
            }
        ]
    }
    print(
        f"\n2. client CPU per request, 4 photos of 12 megapixels "
        f"({sum(len(u) for u in urls) / 4 / 1e6:.1f} MB data URLs each), {args.cpu_requests} requests of one episode"
    )
    print(f"{'image policy':<28} {'before (ms)':>12} {'after (ms)':>11} {'speed-up':>9}")
    for label, policy in (
        ("default (sent as they are)", ImagePolicy()),
        ("max_side=2048 (resized)", ImagePolicy(max_side=2048)),
    ):
        before, after = cpu_per_request(observation, policy, args.cpu_requests)
        print(
            f"{label:<28} {1000 * before:>12.1f} {1000 * after:>11.1f} {before / max(after, 1e-9):>8.0f}x", flush=True
        )


if __name__ == "__main__":
    main()
