"""The hack zoo: degenerate policies against the real env, beside an honest baseline and an oracle.

    .venv/bin/python scripts/bench_reward_hacking.py --n 12 --seed 7 [--answer-format slot] [--json out.json]

Every policy plays the same ``--n`` synthetic tasks (``synth:N:S``, tool-required twins and their
tool-redundant twins) through ``VisualToolBenchEnv`` with its default reward (exact checks, the
real sandbox, the offline tools). The table gives per policy the mean reward, the mean rubric
score and the pass rate (every critical rubric Met).

The policies (degenerate, blind, reader sprays, hedged golden answers, honest styles and the references) are
described and built in ``scripts/zoo_policies.py``.

``--answer-format slot`` plays the env in slot mode: every golden answer and honest style ends with a complete
``Answer:`` line (the turn's critical values).

``zoo(...)`` is what the test calls; ``main`` prints the table. The calls that earn the mode credit have their
own zoo: ``scripts/bench_mode_credit.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent))  # the sibling scripts (the scripts folder is no package)

from zoo_policies import (  # noqa: E402  (re-exported: the test and scripts/bench_mode_credit.py use them)
    BLIND,
    DEGENERATE,
    HEDGES,
    HONEST_STYLES,
    POLICIES,
    READER_SPRAYS,
    VISION_PROBE,
    EpisodeContext,
    ZooPolicies,
    tool_call,
)

__all__ = [
    "BLIND",
    "DEGENERATE",
    "HEDGES",
    "HONEST_STYLES",
    "POLICIES",
    "READER_SPRAYS",
    "VISION_PROBE",
    "format_table",
    "main",
    "play",
    "tool_call",
    "zoo",
]


def play(env: Any, policies: ZooPolicies, name: str, task: Any, ctx: EpisodeContext, max_steps: int = 12) -> dict:
    """One episode; returns its reward, rubric score and pass flag."""
    observation, _ = env.reset(options={"task_id": task.id})
    turn, step, info = 0, 0, {}
    reward, done = 0.0, False
    for _ in range(max_steps * len(task.turns)):
        action = policies.act(name, observation, ctx, turn, step)
        observation, reward, terminated, truncated, info = env.step(action)
        done = terminated or truncated
        if done:
            break
        if info["turn"] != turn:
            turn, step = info["turn"], 0
        else:
            step += 1
    if not done:
        _, reward, _, _, info = env.truncate("hack zoo: step limit")
    components = info.get("reward_components") or {}
    return {
        "reward": float(reward),
        "rubric_score": float(components.get("rubric_score", 0.0)),
        "passed": float(components.get("passed", 0.0)),
        "mode": components.get("mode"),
        "used_tools": float(components.get("used_tools", 0.0)),
    }


def zoo(
    n: int = 12, seed: int = 7, policies: tuple[str, ...] = POLICIES, tasks: Any = None, answer_format: str = "free"
) -> dict[str, dict]:
    """Play every policy on the same tasks: ``{policy: {"reward", "rubric_score", "pass_rate", "episodes"}}``. In
    ``answer_format="slot"`` the golden answers (and their styles) end with a complete ``Answer:`` line."""
    from vtb_env.config import EnvConfig
    from vtb_env.env import VisualToolBenchEnv
    from vtb_env.loaders import load_tasks

    for name in [k for k in os.environ if k.startswith("VTB_JUDGE_")]:
        os.environ.pop(name)  # exact checks only: the figures must not depend on a judge endpoint
    tasks = list(tasks if tasks is not None else load_tasks(f"synth:{n}:{seed}"))
    env = VisualToolBenchEnv(tasks=tasks, config=EnvConfig(answer_format=answer_format))
    zoo_policies = ZooPolicies(slot=answer_format == "slot")
    table: dict[str, dict] = {}
    try:
        for name in policies:
            start = time.perf_counter()
            episodes = [play(env, zoo_policies, name, task, EpisodeContext(task, seed, n)) for task in tasks]
            table[name] = {
                "reward": sum(e["reward"] for e in episodes) / len(episodes),
                "rubric_score": sum(e["rubric_score"] for e in episodes) / len(episodes),
                "pass_rate": sum(e["passed"] for e in episodes) / len(episodes),
                "seconds": time.perf_counter() - start,
                "episodes": episodes,
            }
    finally:
        env.close()
    return table


def format_table(table: dict[str, dict]) -> str:
    lines = ["| policy | reward | rubric score | pass rate |", "|---|---:|---:|---:|"]
    for name, row in table.items():
        lines.append(f"| {name} | {row['reward']:.3f} | {row['rubric_score']:.3f} | {row['pass_rate']:.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=12, help="synthetic tasks (twin pairs: n/2 of each label)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--answer-format", choices=("free", "slot"), default="free")
    parser.add_argument("--json", help="write the table (with every episode) here")
    args = parser.parse_args()
    table = zoo(args.n, args.seed, tuple(args.policies.split(",")), answer_format=args.answer_format)
    print(format_table(table))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(table, handle, indent=1)


if __name__ == "__main__":
    main()
