"""The mode-credit zoo: which tool calls earn the mode reward, beside the right mode and either habit.

    .venv/bin/python scripts/bench_mode_credit.py --n 16 --seed 2911 --lookups 2 [--json out.json]

Every policy answers with the golden answers through ``VisualToolBenchEnv`` (exact checks, the real sandbox,
the offline tools) on ``synth:N:SEED`` and on the first ``--lookups`` lookup tasks of that seed's
``hybrid_tool_reasoning`` stream; only its tool calls differ. Each episode is scored twice: as the env judged
its calls (``ToolCallRecord.revealed``, ``vtb_env.reveal``: "after") and with that judgement erased, the
"did visual work" rule ("before"). The table gives the mean mode component and reward per policy.

References: ``reference`` (the task's own reference trajectory: the right mode), ``never_call`` and
``always_call`` (a grey copy of the whole picture before every answer). Pointless calls, made on the
tool-required tasks only (the best case of a policy that knows the label): ``blank_corner`` (a 16x16 crop of
the picture's corner), ``rotate_180`` (the whole picture upside down), ``print_size``
(``print(Image.open(...).size)``), ``late_crop`` (the earlier turns' reference crops, made on the last turn
only), ``irrelevant_search`` (``web_search("hello")``), ``upscale_all`` (the whole picture enlarged 3x: what
the reader decides). No-work calls (issue 31): ``noop_vision`` (``pass``), ``failing_vision`` (raises before
any image); ``unexecuted_call``: a ``<tool_call>`` block that never ran, scored from completion text.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import sys
from itertools import islice
from pathlib import Path
from typing import Any

_SPEC = importlib.util.spec_from_file_location(
    "bench_reward_hacking", Path(__file__).with_name("bench_reward_hacking.py")
)
hacking = sys.modules.get("bench_reward_hacking") or importlib.util.module_from_spec(_SPEC)
if "bench_reward_hacking" not in sys.modules:
    sys.modules["bench_reward_hacking"] = hacking
    _SPEC.loader.exec_module(hacking)

VISION = "python_image_processing"
_OPEN = "from PIL import Image\nimage = Image.open('image_1.png')\n"
POINTLESS = {  # code of the one vision call made before each turn's answer on tool-required tasks
    "blank_corner": _OPEN + "image.crop((0, 0, 16, 16)).save('transformed_image_0.png')\n",
    "rotate_180": _OPEN + "image.rotate(180).save('transformed_image_0.png')\n",
    "print_size": _OPEN + "print(image.size)\n",
    "upscale_all": _OPEN + "image.resize((image.width * 3, image.height * 3)).save('transformed_image_0.png')\n",
}
NO_WORK_VISION = {"noop_vision": "pass", "failing_vision": "raise RuntimeError('gave up before opening any image')"}
POLICIES = (
    "reference",
    "never_call",
    "always_call",
    *POINTLESS,
    "late_crop",
    "irrelevant_search",
    *NO_WORK_VISION,
)


def _reference_calls(task: Any, turn: int) -> list[dict[str, Any]]:
    return [step for step in task.turns[turn].tool_trajectory or [] if "tool" in step]


def calls_of(name: str, task: Any, turn: int) -> list[dict[str, Any]]:
    """The calls policy ``name`` makes before its golden answer on ``turn`` of ``task``."""
    required = task.mode_label == "tool_required"
    last = turn == len(task.turns) - 1
    if name == "reference":
        return _reference_calls(task, turn)
    if name == "always_call":
        return [{"tool": VISION, "arguments": {"code": hacking.VISION_PROBE}}]
    if name in NO_WORK_VISION:
        return [{"tool": VISION, "arguments": {"code": NO_WORK_VISION[name]}}]
    if not required or name == "never_call":
        return []
    if name in POINTLESS:
        return [{"tool": VISION, "arguments": {"code": POINTLESS[name]}}]
    if name == "late_crop":  # the crops that read the earlier turns' facts, made after those turns were answered
        earlier = [c for t in range(turn) for c in _reference_calls(task, t) if c["tool"] == VISION]
        return earlier if last else []
    if name == "irrelevant_search":
        return [{"tool": "web_search", "arguments": {"query": "hello"}}]
    raise ValueError(f"unknown policy {name!r}")


def play(env: Any, name: str, task: Any) -> Any:
    """One episode of ``name`` on ``task``; returns its record."""
    env.reset(options={"task_id": task.id})
    info: dict[str, Any] = {}
    for turn in range(len(task.turns)):
        for call in calls_of(name, task, turn):
            env.step(hacking.tool_call(call["tool"], call["arguments"]))
        *_, info = env.step(task.turns[turn].golden_answer)
    return info["record"]


def unjudged(record: Any) -> Any:
    """The record with the env's judgement erased: what the "did visual work" rule alone pays."""
    before = copy.deepcopy(record)
    for call in before.tool_calls:
        call.revealed = None
    return before


def credit_episodes(tasks: list[Any], policies: tuple[str, ...] = POLICIES) -> dict[str, list[dict[str, float]]]:
    """Every policy on ``tasks``: per episode the mode component and reward after (as judged) and before."""
    from vtb_env.env import VisualToolBenchEnv
    from vtb_rewards.compose import EpisodeReward

    reward, env = EpisodeReward(), VisualToolBenchEnv(tasks=tasks)
    played: dict[str, list[dict[str, float]]] = {}
    try:
        for name in policies:
            played[name] = []
            for task in tasks:
                record = play(env, name, task)
                after, before = reward(task, record), reward(task, unjudged(record))
                played[name].append(
                    {
                        "task": task.id,
                        "label": task.mode_label,
                        "mode": after[1]["mode"],
                        "reward": after[0],
                        "mode_before": before[1]["mode"],
                        "reward_before": before[0],
                        "used_tools": after[1]["used_tools"],
                    }
                )
    finally:
        env.close()
    return played


def credit_tasks(n: int, seed: int, lookups: int) -> list[Any]:
    """``synth:N:SEED`` and the first ``lookups`` lookup tasks of the seed's hybrid stream."""
    from vtb_env.loaders import load_tasks
    from vtb_env.synth import stream

    # from index 100,000 on: a task id names its seed and index, and the first N indices are synth:N:SEED's
    hybrid = stream(seed, {"hybrid_tool_reasoning": 1.0}, start=100_000)
    hybrid = (task for task in hybrid if task.metadata.get("needs_lookup"))
    return [*load_tasks(f"synth:{n}:{seed}"), *islice(hybrid, lookups)]


def credit_table(played: dict[str, list[dict[str, float]]]) -> str:
    """Mean mode component and reward per policy, before and after, as a markdown table."""
    lines = [
        "| policy | mode before | mode after | reward before | reward after |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, episodes in played.items():
        means = [sum(e[key] for e in episodes) / len(episodes) for key in ("mode_before", "mode", "reward_before")]
        reward = sum(e["reward"] for e in episodes) / len(episodes)
        lines.append(f"| {name} | {means[0]:.3f} | {means[1]:.3f} | {means[2]:.3f} | {reward:.3f} |")
    return "\n".join(lines)


def unexecuted_call_scores(tasks: list[Any]) -> dict[str, list[float]]:
    """Each task's first turn scored from completion text: the golden answer alone, and after a vision
    ``<tool_call>`` block that never ran, through the TRL reward function and verl's ``compute_score``."""
    from vtb_rewards.grpo import compute_score, make_trl_reward_func

    trl = make_trl_reward_func({task.id: task for task in tasks})
    call = hacking.tool_call(VISION, {"code": hacking.VISION_PROBE})
    goldens = [task.turns[0].golden_answer for task in tasks]
    ids = [task.id for task in tasks]
    verl = {
        label: [
            compute_score("visualtoolbench", prefix + golden, task.to_dict(), {"turn_index": 0})["score"]
            for task, golden in zip(tasks, goldens, strict=True)
        ]
        for label, prefix in (("golden (verl)", ""), ("unexecuted_call (verl)", call))
    }
    return {
        "golden (TRL)": trl(prompts=goldens, completions=goldens, task_id=ids),
        "unexecuted_call (TRL)": trl(prompts=goldens, completions=[call + g for g in goldens], task_id=ids),
        **verl,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16, help="synthetic tasks (twin pairs: n/2 of each label)")
    parser.add_argument("--seed", type=int, default=2911)
    parser.add_argument("--lookups", type=int, default=2, help="lookup tasks added from the seed's hybrid stream")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--json", help="write every episode here")
    args = parser.parse_args()
    for name in [k for k in os.environ if k.startswith("VTB_JUDGE_")]:
        os.environ.pop(name)  # exact checks only: the figures must not depend on a judge endpoint
    tasks = credit_tasks(args.n, args.seed, args.lookups)
    played = credit_episodes(tasks, tuple(args.policies.split(",")))
    print(credit_table(played))
    for name, scores in unexecuted_call_scores(tasks).items():
        print(f"{name}: {sum(scores) / len(scores):.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(played, indent=1))


if __name__ == "__main__":
    main()
