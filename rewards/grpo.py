"""GRPO glue: group-relative advantages, a TRL reward function, a verl ``compute_score`` adapter.

All three score a completion with the same ``EpisodeReward`` the environment uses. A completion
is read into an ``EpisodeRecord``: a list of chat messages (TRL's conversational format, or a
multi-step rollout) gives one step per assistant message, with its tool calls (parsed by
``vtb_env.parsers``) and the ``tool`` messages that answered them. A string is one assistant
action, unless it holds tool calls followed by more text: then it is a whole multi-turn response
as verl decodes it (calls, tool results, answer), read as a step with the calls and a final step
whose answer is the text after the last call or tool result (see ``split_response``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from rewards.compose import EpisodeReward, default_reward

if TYPE_CHECKING:
    from vtb_env.tasks import Task
    from vtb_env.trajectory import EpisodeRecord


def group_advantages(
    rewards: Sequence[float],
    group_size: int | None = None,
    group_ids: Sequence[Any] | None = None,
    *,
    scale: bool = True,
    eps: float = 1e-6,
) -> list[float]:
    """GRPO advantages: ``(r - mean(group)) / (std(group) + eps)`` (``scale=False``: no division).

    Groups are consecutive blocks of ``group_size`` (TRL's layout), or given by ``group_ids``.
    The std is the population std; a group with identical rewards gets zero advantages.
    A NaN reward (a masked episode: ``RewardConfig(judge_incomplete="mask")``) is left out of its
    group's mean and std and gets advantage 0, so it moves no gradient.
    """
    if group_ids is None:
        if not group_size or len(rewards) % group_size:
            raise ValueError(f"{len(rewards)} rewards do not split into groups of {group_size}")
        group_ids = [i // group_size for i in range(len(rewards))]
    if len(group_ids) != len(rewards):
        raise ValueError("one group id per reward")
    members: dict[Any, list[int]] = {}
    for index, gid in enumerate(group_ids):
        members.setdefault(gid, []).append(index)
    advantages = [0.0] * len(rewards)
    for indices in members.values():
        kept = [(i, float(rewards[i])) for i in indices if not math.isnan(float(rewards[i]))]
        if not kept:
            continue
        mean = sum(v for _, v in kept) / len(kept)
        std = math.sqrt(sum((v - mean) ** 2 for _, v in kept) / len(kept))
        for i, v in kept:
            advantages[i] = (v - mean) / (std + eps) if scale else v - mean
    return advantages


def record_from_completion(task_id: str, completion: str | Sequence[Mapping[str, Any]]) -> "EpisodeRecord":
    """One turn's record from a completion (text, or chat messages); see the module doc."""
    from vtb_env.parsers import parse_action
    from vtb_env.trajectory import EpisodeRecord, StepRecord, ToolCallRecord, TurnRecord

    messages = _response_messages(completion) if isinstance(completion, str) else list(completion)
    steps: list[StepRecord] = []
    calls_by_id: dict[str, ToolCallRecord] = {}
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            parsed = parse_action(message if message.get("tool_calls") else str(message.get("content") or ""))
            calls = [
                ToolCallRecord(call_id=c.call_id or f"call_{len(steps)}_{i}", name=c.name, arguments=c.arguments, error=c.error, error_kind="parse_error" if c.error else None)
                for i, c in enumerate(parsed.calls)
            ]
            calls_by_id.update((c.call_id, c) for c in calls)
            steps.append(StepRecord(action_text=parsed.content, reasoning=parsed.reasoning, tool_calls=calls,
                                    parse_errors=[c.error for c in parsed.calls if c.error], parser=parsed.parser))
        elif role == "tool" and message.get("tool_call_id") in calls_by_id:
            call = calls_by_id[message["tool_call_id"]]
            call.output = str(message.get("content") or "")
            if message.get("error"):
                call.error, call.error_kind = str(message["error"]), "tool_error"
    final = steps[-1].action_text if steps and not steps[-1].tool_calls else None
    if steps:
        steps[-1].final_answer = final
    return EpisodeRecord(task_id=task_id, turns=[TurnRecord(index=0, steps=steps, final_answer=final)])


# Where a call or a tool result ends, and the chat-template markup around the text that follows.
_CALL_OR_RESULT_END = re.compile(r"</tool_call>|</function>|</tool_response>|<\|eom_id\|>")
_SPECIAL_TOKEN = re.compile(r"<\|[a-z_]+\|>|</s>")
_ROLE_HEADER = re.compile(r"^\s*(?:assistant|user|tool|ipython)\s*\n")


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return line[:1] in "{[\""


def split_response(text: str) -> tuple[str, str | None]:
    """(the part with the tool calls, the answer after them) of a decoded multi-turn response.

    The answer is the text after the last call or tool result, without chat-template markup
    (special tokens, a role header) and without tool-result lines printed as JSON; ``None``
    when the response holds no call/result markup (it is a single action).
    """
    ends = list(_CALL_OR_RESULT_END.finditer(text))
    if not ends:
        return text, None
    rest = _ROLE_HEADER.sub("", _SPECIAL_TOKEN.sub("", text[ends[-1].end() :]).lstrip("\n"), count=1)
    lines = rest.strip().splitlines()
    while lines and (not lines[0].strip() or _is_json(lines[0].strip())):
        lines.pop(0)
    return text[: ends[-1].end()], "\n".join(lines).strip()


def _response_messages(text: str) -> list[dict[str, Any]]:
    """A string completion as assistant messages: one action, or (calls, answer) for a multi-turn response."""
    from vtb_env.parsers import parse_action

    calls_part, answer = split_response(text)
    if answer is None or not parse_action(calls_part).calls:
        return [{"role": "assistant", "content": text}]
    answer_message = [{"role": "assistant", "content": answer}] if answer else []  # none: cut off after a call
    return [{"role": "assistant", "content": calls_part}, *answer_message]


def _single_turn(task: "Task", turn_index: int | None) -> "Task":
    """The task restricted to one turn (the completion answers that turn only)."""
    index = 0 if turn_index is None else int(turn_index)
    if not 0 <= index < len(task.turns):
        raise ValueError(f"task {task.id} has no turn {index}")
    return replace(task, turns=(task.turns[index],))


def make_trl_reward_func(
    tasks: Mapping[str, "Task"], reward: EpisodeReward | None = None, *, task_id_key: str = "task_id"
) -> Callable[..., list[float]]:
    """A TRL ``reward_funcs`` entry: ``f(prompts, completions, **kwargs) -> list[float]``.

    The dataset needs a ``task_id`` column (TRL passes columns as keyword lists) and may have a
    ``turn_index`` column (default 0). Components of the last call are kept in ``f.last_components``.
    """
    episode_reward = reward or default_reward()

    def vtb_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        task_ids = kwargs.get(task_id_key)
        if task_ids is None:
            raise ValueError(f"the dataset needs a {task_id_key!r} column to find each completion's task")
        turn_indices = kwargs.get("turn_index") or [None] * len(completions)
        scores, components = [], []
        for task_id, completion, turn_index in zip(task_ids, completions, turn_indices):
            task = _single_turn(tasks[task_id], turn_index)
            value, info = episode_reward(task, record_from_completion(task_id, completion))
            scores.append(None if math.isnan(value) else value)  # TRL skips None rewards (a masked episode)
            components.append(info)
        vtb_reward.last_components = components  # type: ignore[attr-defined]
        return scores

    vtb_reward.__name__ = "vtb_reward"
    return vtb_reward


_VERL_REWARD: EpisodeReward | None = None


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None = None, **kwargs: Any
) -> dict[str, float]:
    """verl custom reward: ``ground_truth`` is the task (``Task.to_dict()``, as a dict or JSON string).

    ``extra_info`` may give ``turn_index``; other keywords newer verl versions pass are ignored. Returns ``{"score": reward, **components}``; the judge
    comes from the ``VTB_JUDGE_*`` variables (see ``rewards.judge.factory``).
    """
    from vtb_env.tasks import Task

    global _VERL_REWARD
    if _VERL_REWARD is None:
        _VERL_REWARD = default_reward()
    data = json.loads(ground_truth) if isinstance(ground_truth, (str, bytes)) else ground_truth
    task = _single_turn(Task.from_dict(data), (extra_info or {}).get("turn_index"))
    value, info = _VERL_REWARD(task, record_from_completion(task.id, solution_str))
    return {"score": value, **info}
