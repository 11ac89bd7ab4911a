"""Process and tool-use metrics: KCoverage and tool effectiveness (seed 000), proactivity,
success rate and volume (paper appendix B.4), and the optional error-type pass (appendix B.6).

KCoverage. The seed writes ``(1/|K|) max_j prod_{i<=j} 1[k_i in reasoning]``; the product is 1
exactly for the covered prefixes, so the max over j of ``j * prod`` is the length of the longest
covered prefix of the key steps, and KCoverage = that length / |K| (``kcoverage``, reading
"prefix"). The seed's text adds "rather than penalizing skipped or compressed steps", which the
formula does not do; the reading "furthest" follows the text: the position of the furthest key
step present / |K| (``kcoverage_furthest``). Presence is decided by the judge, one call per key step.

Key steps: ``Turn.key_steps`` when the task has them (synthetic tasks); otherwise, for official
tasks, ``derive_key_steps`` turns each call of the human reference tool trajectory into one step
("Use <tool> to <purpose>", or "... with <arguments>" when the call states no purpose).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any, Literal, Sequence

import json_repair

from vtb_env.tasks import Task, Turn
from vtb_env.trajectory import EpisodeRecord
from vtb_rewards.judge.backends import BackendError, JudgeBackend
from vtb_rewards.judge.judge import Judge, JudgeItem
from vtb_rewards.judge.prompt import ERROR_TYPE_TEMPLATE, KEY_STEP_JUDGE_TEMPLATE, TOOL_CALL_JUDGE_TEMPLATE, render
from vtb_rewards.judge.verdict import UnfinishedThinking, Verdict, final_reply

MAX_STEP_CHARS = 400
MAX_JUDGED_TEXT_CHARS = 12_000  # keep judge prompts bounded; reasoning can be very long


def kcoverage(present: Sequence[bool]) -> float:
    """Longest covered prefix of the key steps / |K| (the seed's max over prefix products)."""
    if not present:
        raise ValueError("KCoverage needs at least one key step")
    prefix = 0
    for covered in present:
        if not covered:
            break
        prefix += 1
    return prefix / len(present)


def kcoverage_furthest(present: Sequence[bool]) -> float:
    """Position of the furthest key step present / |K| (skipped earlier steps are not penalised)."""
    if not present:
        raise ValueError("KCoverage needs at least one key step")
    return max((i + 1 for i, covered in enumerate(present) if covered), default=0) / len(present)


KCOVERAGE_READINGS = {"prefix": kcoverage, "furthest": kcoverage_furthest}


_PURPOSE_KEYS = ("step", "description", "purpose", "reasoning", "thought", "rationale", "explanation", "goal")
_TOOL_KEYS = ("tool", "tool_name", "name", "function")
_ARG_KEYS = ("arguments", "args", "input", "parameters", "code", "query", "expression", "url")
_LIST_KEYS = ("steps", "trajectory", "tool_calls", "calls", "actions", "tool_trajectory")


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return " ".join(value.split())
    return " ".join(json.dumps(value, ensure_ascii=False).split())


def _first(fields: dict[str, Any], keys: Sequence[str]) -> Any:
    return next((fields[k] for k in keys if fields.get(k) not in (None, "", [], {})), None)


def _step_text(item: Any) -> str:
    if not isinstance(item, dict):
        return _text(item)
    fields = {str(k).lower(): v for k, v in item.items()}
    tool = _first(fields, _TOOL_KEYS)
    if isinstance(tool, dict):  # OpenAI style {"function": {"name", "arguments"}}
        fields.setdefault("arguments", tool.get("arguments"))
        tool = tool.get("name")
    purpose, args = _first(fields, _PURPOSE_KEYS), _first(fields, _ARG_KEYS)
    if tool and purpose:
        return f"Use {_text(tool)} to {_text(purpose)}"
    if tool:
        return f"Use {_text(tool)} with {_text(args)}" if args is not None else f"Use {_text(tool)}"
    return _text(purpose) if purpose else _text(item)


def derive_key_steps(trajectory: Any) -> tuple[str, ...]:
    """Key steps from a reference tool trajectory (parsed JSON, or raw text); see the module doc."""
    if isinstance(trajectory, str):
        parsed = json_repair.loads(trajectory) if trajectory.strip()[:1] in "[{" else None
        trajectory = parsed if parsed else [line for line in trajectory.splitlines() if line.strip()]
    if isinstance(trajectory, dict):
        fields = {str(k).lower(): v for k, v in trajectory.items()}
        trajectory = next((fields[k] for k in _LIST_KEYS if isinstance(fields.get(k), list)), [trajectory])
    if not isinstance(trajectory, list):
        return ()
    steps = (_step_text(item)[:MAX_STEP_CHARS] for item in trajectory)
    return tuple(step for step in steps if step)


def key_steps_for(turn: "Turn") -> tuple[str, ...]:
    return turn.key_steps or derive_key_steps(turn.tool_trajectory)


@dataclass(frozen=True)
class Measured:
    """A judged metric: ``value`` is None when it does not apply; judge errors count as 0 in it."""

    value: float | None
    n_items: int
    n_judge_errors: int


def _clip(text: str) -> str:
    return text if len(text) <= MAX_JUDGED_TEXT_CHARS else text[:MAX_JUDGED_TEXT_CHARS] + " [...]"


def judge_key_steps(
    judge: Judge, task: "Task", record: "EpisodeRecord", template: str = KEY_STEP_JUDGE_TEMPLATE
) -> list[list[Verdict]]:
    """Per turn that has key steps, the judge's presence verdict for each step, in order."""
    step_judge = replace(judge, template=template, stats=judge.stats)
    presence = []
    for turn, turn_record in zip(task.turns, record.turns, strict=False):
        steps = key_steps_for(turn)
        if steps:
            reasoning = _clip(turn_record.reasoning)
            presence.append(
                step_judge.judge([JudgeItem(turn.prompt, turn.golden_answer, step, reasoning) for step in steps])
            )
    return presence


def kcoverage_of(presence: Sequence[Sequence[Verdict]], reading: str = "prefix") -> Measured:
    """Mean KCoverage over the judged turns under ``reading`` ("prefix" or "furthest")."""
    metric = KCOVERAGE_READINGS[reading]
    values = [metric([v.met for v in verdicts]) for verdicts in presence]
    return Measured(
        sum(values) / len(values) if values else None,
        sum(map(len, presence)),
        sum(v.is_error for vs in presence for v in vs),
    )


def judge_kcoverage(
    judge: Judge,
    task: "Task",
    record: "EpisodeRecord",
    template: str = KEY_STEP_JUDGE_TEMPLATE,
    reading: str = "prefix",
) -> Measured:
    """Mean KCoverage over the turns that have key steps (None if none has)."""
    return kcoverage_of(judge_key_steps(judge, task, record, template), reading)


def judge_tool_effectiveness(
    judge: Judge, task: "Task", record: "EpisodeRecord", template: str = TOOL_CALL_JUDGE_TEMPLATE
) -> Measured:
    """Share of tool calls that ran without error AND that the judge finds appropriate for their step."""
    call_judge = replace(judge, template=template, stats=judge.stats)
    items, ok_flags = [], []
    for turn, turn_record in zip(task.turns, record.turns, strict=False):
        for step in turn_record.steps:
            step_text = _clip("\n".join(part for part in (step.reasoning, step.action_text) if part))
            for call in step.tool_calls:
                ok_flags.append(call.ok)
                if call.ok:
                    criterion = f"{call.name}({_text(call.arguments)[:4000]})"
                    items.append(JudgeItem(turn.prompt, turn.golden_answer, criterion, step_text))
    if not ok_flags:
        return Measured(None, 0, 0)
    verdicts = call_judge.judge(items)
    judged = iter(verdicts)
    valid = [ok and next(judged).met for ok in ok_flags]  # failed calls are invalid without a judge call
    return Measured(sum(valid) / len(valid), len(ok_flags), sum(v.is_error for v in verdicts))


@dataclass(frozen=True)
class ToolUseStats:
    """Appendix B.4 over a set of episodes. ``success_rate`` is None when no tool was called."""

    n_tasks: int
    n_calls: int
    proactivity: float
    success_rate: float | None
    volume: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def tool_use_stats(records: Sequence["EpisodeRecord"]) -> ToolUseStats:
    """Proactivity (eq. 3), success rate (eq. 4: calls whose output is not an error), volume (eq. 5)."""
    n_tasks = len(records)
    calls = [call for record in records for call in record.tool_calls]
    return ToolUseStats(
        n_tasks=n_tasks,
        n_calls=len(calls),
        proactivity=sum(bool(r.tool_calls) for r in records) / n_tasks if n_tasks else 0.0,
        success_rate=sum(c.ok for c in calls) / len(calls) if calls else None,
        volume=len(calls) / n_tasks if n_tasks else 0.0,
    )


ErrorType = Literal["visual_perception", "reasoning", "calculation", "other", "judge_error"]
ERROR_TYPES: tuple[str, ...] = ("visual_perception", "reasoning", "calculation", "other")
_ERROR_TYPE = re.compile(
    r"error_type[\"']?\s*[:=]\s*[\"']?\s*(visual[ _]perception|reasoning|calculation|other)", re.IGNORECASE
)


ERROR_TYPE_SCHEMA = {
    "name": "error_type",
    "schema": {
        "type": "object",
        "properties": {"explanation": {"type": "string"}, "error_type": {"type": "string", "enum": list(ERROR_TYPES)}},
        "required": ["explanation", "error_type"],
        "additionalProperties": False,
    },
}


def parse_error_type(reply: str | BackendError) -> ErrorType:
    if isinstance(reply, BackendError) or not reply:
        return "judge_error"
    try:
        reply = final_reply(reply)  # a reasoning model's thinking never decides
    except UnfinishedThinking:
        return "judge_error"
    found = {m.group(1).lower().replace(" ", "_") for m in _ERROR_TYPE.finditer(reply)}
    return found.pop() if len(found) == 1 else "judge_error"  # type: ignore[return-value]


def classify_errors(
    backend: JudgeBackend, failures: Sequence[tuple[str, str, Sequence[str], str]], template: str = ERROR_TYPE_TEMPLATE
) -> list[ErrorType]:
    """Optional pass: one error type per failed answer, given (question, golden, unmet rubrics, answer)."""
    prompts = [
        render(
            template, question=q, golden_answer=g, criterion="\n".join(f"- {r}" for r in unmet) or "(none)", answer=a
        )
        for q, g, unmet, a in failures
    ]
    return [parse_error_type(reply) for reply in backend.complete_many(prompts, schema=ERROR_TYPE_SCHEMA)]
