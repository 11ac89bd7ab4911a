"""A model's completion read into an ``EpisodeRecord``, with the parsers the env uses.

For rewards that score text the env never stepped (TRL's reward functions, verl's
``compute_score``): a list of chat messages (TRL's conversational format, or a multi-step
rollout) gives one step per assistant message, with its tool calls and the ``tool`` messages
that answered them. A string is one assistant action, unless it holds tool calls followed by
more text: then it is a whole multi-turn response as verl decodes it (calls, tool results,
answer), read as a step with the calls and a final step whose answer is the text after the last
call or tool result (see ``split_response``).
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence

from vtb_env.parsers import parse_action
from vtb_env.trajectory import EpisodeRecord, StepRecord, ToolCallRecord, TurnRecord


def record_from_completion(task_id: str, completion: str | Sequence[Mapping[str, Any]]) -> EpisodeRecord:
    """One turn's record from a completion (text, or chat messages); see the module doc."""
    messages = _response_messages(completion) if isinstance(completion, str) else list(completion)
    steps: list[StepRecord] = []
    calls_by_id: dict[str, ToolCallRecord] = {}
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            parsed = parse_action(message if message.get("tool_calls") else str(message.get("content") or ""))
            calls = [
                ToolCallRecord.from_call(c, c.call_id or f"call_{len(steps)}_{i}") for i, c in enumerate(parsed.calls)
            ]
            calls_by_id.update((c.call_id, c) for c in calls)
            steps.append(
                StepRecord(
                    action_text=parsed.content,
                    reasoning=parsed.reasoning,
                    tool_calls=calls,
                    parse_errors=[c.error for c in parsed.calls if c.error],
                    parser=parsed.parser,
                )
            )
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
    return line[:1] in '{["'


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
    calls_part, answer = split_response(text)
    if answer is None or not parse_action(calls_part).calls:
        return [{"role": "assistant", "content": text}]
    answer_message = [{"role": "assistant", "content": answer}] if answer else []  # none: cut off after a call
    return [{"role": "assistant", "content": calls_part}, *answer_message]
