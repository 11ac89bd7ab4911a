"""Benchmark the judge and the reward computation.

Judge throughput against the local chat-completions test server with a realistic per-request
latency (default 200 ms): rubrics/s at concurrency 1, 8 and 32 (1 is the baseline measured in
the same run), the cache-hit path, and the reward's own overhead per episode (exact checks and
cached LLM verdicts, no network).

    .venv/bin/python scripts/bench_rewards.py [--latency 0.2] [--episodes 2000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.support (the project itself is installed)

from tests.support.chat_server import ChatServer  # noqa: E402
from vtb_env.tasks import Rubric, Task, Turn  # noqa: E402
from vtb_env.trajectory import EpisodeRecord, StepRecord, ToolCallRecord, TurnRecord  # noqa: E402
from vtb_rewards.compose import EpisodeReward  # noqa: E402
from vtb_rewards.judge import Judge, JudgeItem, OpenAIChatBackend, VerdictCache  # noqa: E402

REPLY = {"content": json.dumps({"explanation": "The answer states the value.", "judge_result": "Met"})}


def items(n: int, tag: str) -> list[JudgeItem]:
    return [
        JudgeItem(f"Question {tag}", "The price is $16.", f"Rubric {tag}-{i}: reports $16", "It costs $16.")
        for i in range(n)
    ]


def throughput(
    server: ChatServer, concurrency: int, n: int, cache: VerdictCache | None = None, tag: str = ""
) -> tuple[float, int, int]:
    """(rubrics/s, requests the server answered, judge errors). Connection errors are retried."""
    backend = OpenAIChatBackend("bench-judge", server.base_url, max_concurrency=concurrency, timeout_s=30, retries=3)
    before = len(server.requests)
    started = time.perf_counter()
    verdicts = Judge(backend, cache=cache).judge(items(n, tag or f"c{concurrency}"))
    elapsed = time.perf_counter() - started
    return n / elapsed, len(server.requests) - before, sum(not v.met for v in verdicts)


def bench_episode() -> tuple[Task, EpisodeRecord]:
    rubrics = tuple(
        Rubric(id=f"r{i}", description=f"reports {i}", weight=1 + i % 5, check={"type": "number", "value": i})
        for i in range(6)
    )
    rubrics += (Rubric(id="style", description="is concise", weight=2),)
    task = Task(
        id="bench", turns=(Turn(prompt="Q", golden_answer="0 1 2 3 4 5", rubrics=rubrics),), mode_label="tool_required"
    )
    calls = [
        ToolCallRecord(call_id=f"c{i}", name="python_image_processing", arguments={"code": "crop"}) for i in range(5)
    ]
    steps = [StepRecord(action_text="crop", reasoning="zoom in", tool_calls=[call]) for call in calls]
    steps.append(StepRecord(action_text="0 1 2 3 4 5", final_answer="0 1 2 3 4 5"))
    return task, EpisodeRecord(task_id="bench", turns=[TurnRecord(index=0, steps=steps, final_answer="0 1 2 3 4 5")])


def reward_overhead_us(reward: EpisodeReward, episodes: int) -> float:
    task, record = bench_episode()
    reward(task, record)  # warm up (and fill the cache)
    started = time.perf_counter()
    for _ in range(episodes):
        reward(task, record)
    return (time.perf_counter() - started) / episodes * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2, help="server latency per request, seconds")
    parser.add_argument("--episodes", type=int, default=2000)
    args = parser.parse_args()

    with ChatServer(lambda request: REPLY, latency_s=args.latency) as server, tempfile.TemporaryDirectory() as tmp:
        print(f"judge throughput, server latency {args.latency * 1000:.0f} ms per request")
        baseline = None
        for concurrency in (1, 8, 32):
            n = 8 if concurrency == 1 else 4 * concurrency
            rate, requests, errors = throughput(server, concurrency, n)
            baseline = baseline or rate
            print(
                f"  concurrency {concurrency:>2}: {rate:7.1f} rubrics/s  "
                f"({n} rubrics, {requests} answered, {errors} judge errors; "
                f"x{rate / baseline:.1f} vs concurrency 1, ideal x{concurrency})"
            )
        cache = VerdictCache(Path(tmp) / "verdicts.sqlite")
        throughput(server, 32, 512, cache, tag="cached")
        rate, requests, _ = throughput(server, 32, 512, cache, tag="cached")
        print(
            f"  cache hits   : {rate:7.0f} rubrics/s  "
            f"({requests} requests for 512 rubrics, x{rate / baseline:.0f} vs concurrency 1)"
        )

        backend = OpenAIChatBackend("bench-judge", server.base_url, max_concurrency=8, retries=0)
        exact = reward_overhead_us(EpisodeReward(judge=Judge(backend=None)), args.episodes)
        cached = reward_overhead_us(EpisodeReward(judge=Judge(backend, cache=cache)), args.episodes)
        print(
            f"reward overhead per episode (7 rubrics, 5 tool calls): exact checks {exact:.0f} us; "
            f"with cached LLM verdicts {cached:.0f} us"
        )


if __name__ == "__main__":
    main()
