"""The mode-credit zoo: which tool calls earn the mode reward, beside the right mode and either habit.

    .venv/bin/python scripts/bench_mode_credit.py --n 16 --seed 2911 --lookups 2 [--text] [--json out.json]

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

``--text``: every turn of the same episodes is also scored from completion text, as TRL's reward function (a
conversation: each call, the result the env's tool returned, the golden answer) and verl's ``compute_score`` (the
decoded response, the row's images in ``extra_info``) read it; before = ``RewardConfig(mode_credit="image_work")``
(the rule the text path had), after = the calls judged as the env judges them (``vtb_env.replay``), with the TRL
function's time per completion with and without vision calls to replay: cold (the reader's cache emptied first,
so the task's picture and the outputs are read again) and warm (every image read already: the replay's sandbox
run alone).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import sys
import time
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


def play_all(tasks: list[Any], policies: tuple[str, ...] = POLICIES) -> dict[str, list[Any]]:
    """Every policy's env record on each of ``tasks``, in order."""
    from vtb_env.env import VisualToolBenchEnv
    from vtb_rewards.compose import EpisodeReward

    env = VisualToolBenchEnv(tasks=tasks, reward=EpisodeReward())
    try:
        return {name: [play(env, name, task) for task in tasks] for name in policies}
    finally:
        env.close()


def credit_episodes(tasks: list[Any], policies: tuple[str, ...] = POLICIES) -> dict[str, list[dict[str, float]]]:
    """Every policy on ``tasks``: per episode the mode component and reward after (as judged) and before."""
    return credit_scores(tasks, play_all(tasks, policies))


def credit_scores(tasks: list[Any], records: dict[str, list[Any]]) -> dict[str, list[dict[str, float]]]:
    """The env records of ``play_all`` scored after (as judged) and before (the judgement erased)."""
    from vtb_rewards.compose import EpisodeReward

    reward = EpisodeReward()
    played: dict[str, list[dict[str, float]]] = {}
    for name, played_records in records.items():
        played[name] = []
        for task, record in zip(tasks, played_records, strict=True):
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


# ---- the text path: the same episodes as completions scored by TRL's reward function and verl's compute_score ----


def turn_calls(record: Any, turn: int) -> list[Any]:
    """The calls ``record`` made on ``turn``, in order."""
    return [call for step in record.turns[turn].steps for call in step.tool_calls]


def conversation_of(record: Any, task: Any, turn: int) -> list[dict[str, Any]]:
    """Turn ``turn`` of an env ``record`` as TRL's conversational completion: each call (a ``<tool_call>`` block),
    the result the env's tool returned (a ``tool`` message), then the golden answer."""
    messages: list[dict[str, Any]] = []
    for call in turn_calls(record, turn):
        messages.append({"role": "assistant", "content": hacking.tool_call(call.name, call.arguments)})
        messages.append({"role": "tool", "content": call.output})
    return [*messages, {"role": "assistant", "content": task.turns[turn].golden_answer}]


def response_of(record: Any, task: Any, turn: int) -> str:
    """The same turn as verl decodes a multi-turn response: call blocks, their ``<tool_response>`` blocks, the
    answer."""
    calls = turn_calls(record, turn)
    blocks = [f"{hacking.tool_call(c.name, c.arguments)}<tool_response>{c.output}</tool_response>" for c in calls]
    return "".join(blocks) + task.turns[turn].golden_answer


def row_extra_info(task: Any, turn: int, images: bool = True) -> dict[str, Any]:
    """verl's ``extra_info`` of a ``tool_agent`` row for ``turn``: the turn, and the images up to it as a text-only
    row stores them (``vtb_rewards.grpo.ROW_IMAGES_KEY``), without which a vision call cannot be replayed."""
    from vtb_rewards.grpo import ROW_IMAGES_KEY

    held = [ref.read_bytes() for earlier in task.turns[: turn + 1] for ref in earlier.images] if images else []
    return {"turn_index": turn, "tools_kwargs": {ROW_IMAGES_KEY: held}}


def text_scores(tasks: list[Any], records: dict[str, list[Any]]) -> dict[str, list[dict[str, float]]]:
    """Every (task, turn) of every policy's env records scored from completion text: the TRL reward function's
    mode component before (``mode_credit="image_work"``: the rule the text path had) and after (calls judged
    as the env judges them), verl ``compute_score``'s after, and the TRL function's seconds per completion."""
    from vtb_env.reveal import shared_judge
    from vtb_rewards.compose import EpisodeReward, RewardConfig
    from vtb_rewards.grpo import compute_score, make_trl_reward_func

    by_id = {task.id: task for task in tasks}
    before = make_trl_reward_func(by_id, EpisodeReward(RewardConfig(mode_credit="image_work")))
    after = make_trl_reward_func(by_id, EpisodeReward())
    scored: dict[str, list[dict[str, float]]] = {}
    for name, played_records in records.items():
        scored[name] = []
        for task, record in zip(tasks, played_records, strict=True):
            for turn in range(len(task.turns)):
                completion, columns = (
                    [conversation_of(record, task, turn)],
                    {"task_id": [task.id], "turn_index": [turn]},
                )
                before(prompts=["p"], completions=completion, **columns)
                seconds = []
                for cache in ("cold", "warm"):  # no image read yet, then every image read already
                    if cache == "cold":
                        shared_judge().forget()
                    start = time.perf_counter()
                    after(prompts=["p"], completions=completion, **columns)
                    seconds.append(time.perf_counter() - start)
                verl = compute_score(
                    "visualtoolbench", response_of(record, task, turn), task.to_dict(), row_extra_info(task, turn)
                )
                scored[name].append(
                    {
                        "task": task.id,
                        "turn": turn,
                        "mode_before": before.last_components[0].get("mode", float("nan")),
                        "mode": after.last_components[0].get("mode", float("nan")),
                        "mode_verl": verl.get("mode", float("nan")),
                        "seconds_cold": seconds[0],
                        "seconds_warm": seconds[1],
                        "replayed": any(c.name == VISION and c.did_image_work for c in turn_calls(record, turn)),
                    }
                )
    return scored


def text_table(scored: dict[str, list[dict[str, float]]]) -> str:
    """Mean mode component per policy through the text path, before and after, and the TRL function's time."""
    lines = [
        "| policy | samples | mode before (TRL) | mode after (TRL) | mode after (verl) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, samples in scored.items():
        means = [sum(s[key] for s in samples) / len(samples) for key in ("mode_before", "mode", "mode_verl")]
        lines.append(f"| {name} | {len(samples)} | {means[0]:.3f} | {means[1]:.3f} | {means[2]:.3f} |")
    every = [s for samples in scored.values() for s in samples]
    lines += [
        "",
        "| TRL reward function, per completion | completions | cold mean s | cold max s | warm mean s | warm max s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, group in (
        ("nothing to replay (no vision call that did visual work)", [s for s in every if not s["replayed"]]),
        ("vision calls replayed", [s for s in every if s["replayed"]]),
    ):
        if group:
            cold, warm = ([s[key] for s in group] for key in ("seconds_cold", "seconds_warm"))
            lines.append(
                f"| {label} | {len(group)} | {sum(cold) / len(cold):.3f} | {max(cold):.3f} "
                f"| {sum(warm) / len(warm):.3f} | {max(warm):.3f} |"
            )
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
    parser.add_argument("--text", action="store_true", help="also score every turn from completion text (TRL, verl)")
    parser.add_argument("--json", help="write every episode here")
    args = parser.parse_args()
    for name in [k for k in os.environ if k.startswith("VTB_JUDGE_")]:
        os.environ.pop(name)  # exact checks only: the figures must not depend on a judge endpoint
    tasks = credit_tasks(args.n, args.seed, args.lookups)
    records = play_all(tasks, tuple(args.policies.split(",")))
    played = credit_scores(tasks, records)
    print(credit_table(played))
    text = text_scores(tasks, records) if args.text else {}
    if text:
        print("\nThe text path (TRL's reward function, verl's compute_score), every turn of every task:\n")
        print(text_table(text))
    for name, scores in unexecuted_call_scores(tasks).items():
        print(f"{name}: {sum(scores) / len(scores):.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"env": played, "text": text}, indent=1))


if __name__ == "__main__":
    main()
