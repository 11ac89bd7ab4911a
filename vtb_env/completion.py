"""A model's completion read into an ``EpisodeRecord``, with the parsers the env uses.

For rewards that score text the env never stepped (TRL's reward functions, verl's
``compute_score``): a list of chat messages (TRL's conversational format, or a multi-step
rollout) gives one step per assistant message, with its tool calls and the ``tool`` messages
that answered them. A string is one assistant action, unless it holds tool calls followed by
more text: then it is a whole multi-turn response as verl decodes it (calls, tool results,
answer), read as one step per assistant part, the tool results between them answering their
calls in order, and a final step whose answer is the text after the last call or tool result.

Only executed calls are paid: a call whose result is not in the conversation (no ``tool`` message
with its id, or, in a string, no result block after it) is kept in the record with
``error_kind=NO_RESULT`` and counts as no call (``ToolCallRecord.answered``): it earns no mode and no
tool-success credit. ``results_in_text=False`` says a string holds the policy's text alone (TRL's
plain completions): a result written there is the policy's own, so no call of it is answered. A
vision call's ``image_work`` is read from its result (the JSON the vision tool returns, before any note lines
the env adds).
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence

from vtb_env.parsers import parse_action
from vtb_env.toolsets import VISION_TOOL
from vtb_env.trajectory import NO_RESULT, EpisodeRecord, StepRecord, ToolCallRecord, TurnRecord

NOT_EXECUTED = "not executed: the conversation holds no result for this call"


def record_from_completion(
    task_id: str, completion: str | Sequence[Mapping[str, Any]], *, results_in_text: bool = True
) -> EpisodeRecord:
    """One turn's record from a completion (text, or chat messages); see the module doc."""
    if isinstance(completion, str):
        messages = _response_messages(completion) if results_in_text else _policy_messages(completion)
    else:
        messages = list(completion)
    steps: list[StepRecord] = []
    calls_by_id: dict[str, ToolCallRecord] = {}
    waiting: list[ToolCallRecord] = []  # the last assistant message's calls without a result yet, in order
    answered: set[int] = set()
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            parsed = parse_action(message if message.get("tool_calls") else str(message.get("content") or ""))
            calls = [
                ToolCallRecord.from_call(c, c.call_id or f"call_{len(steps)}_{i}") for i, c in enumerate(parsed.calls)
            ]
            calls_by_id.update((c.call_id, c) for c in calls)
            waiting = list(calls)
            steps.append(
                StepRecord(
                    action_text=parsed.content,
                    reasoning=parsed.reasoning,
                    tool_calls=calls,
                    parse_errors=[c.error for c in parsed.calls if c.error],
                    parser=parsed.parser,
                )
            )
        elif role == "tool":
            call_id = message.get("tool_call_id")
            call = calls_by_id.get(call_id) if call_id else next(iter(waiting), None)  # no id: answers in order
            if call is not None and id(call) not in answered:
                answered.add(id(call))
                waiting = [c for c in waiting if c is not call]
                _answer(call, message)
    for call in (call for step in steps for call in step.tool_calls if id(call) not in answered):
        call.error, call.error_kind = call.error or NOT_EXECUTED, NO_RESULT
    final = steps[-1].action_text if steps and not steps[-1].tool_calls else None
    if steps:
        steps[-1].final_answer = final
    return EpisodeRecord(task_id=task_id, turns=[TurnRecord(index=0, steps=steps, final_answer=final)])


def _answer(call: ToolCallRecord, message: Mapping[str, Any]) -> None:
    """``call`` answered by the tool ``message``: its output, error and (vision tool) sandbox record."""
    call.output = str(message.get("content") or "")
    if message.get("error"):
        call.error, call.error_kind = str(message["error"]), "tool_error"
    if call.name != VISION_TOOL:
        return
    try:  # the tool's JSON body; the env ends it with note lines ("[transformed_image_1.png: ...]")
        body, _ = json.JSONDecoder().raw_decode(call.output.lstrip())
    except ValueError:
        return
    if isinstance(body, dict):
        call.image_work = body.get("image_work") if isinstance(body.get("image_work"), dict) else None
        if body.get("error") and call.error is None:
            call.error, call.error_kind = str(body["error"]), "tool_error"


# Where a call or a tool result ends, and the chat-template markup around the text that follows.
_CALL_OR_RESULT_END = re.compile(r"</tool_call>|</function>|</tool_response>|<\|eom_id\|>")
_CALL_END = re.compile(r"</tool_call>|</function>|<\|eom_id\|>")
_SPECIAL_TOKEN = re.compile(r"<\|[a-z_]+\|>|</s>")
_ROLE_HEADER = re.compile(r"^\s*(?:assistant|user|tool|ipython)\s*\n")
# A tool result right after a call (or an earlier result), as chat templates write it, special tokens kept or
# skipped: a <tool_response> block (hermes, Qwen; the template may open a user or tool turn first), or a
# message under a tool role header (Llama's ipython) that runs to the next header, end-of-turn token or the end.
_FILLER = r"(?:\s|<\|[a-z_]+\|>)*"
_TAGGED_RESULT = re.compile(_FILLER + r"(?:(?:user|tool)\s*\n)?\s*<tool_response>(.*?)</tool_response>", re.S)
_HEADED_RESULT = re.compile(
    _FILLER
    + r"(?:ipython|tool)(?:<\|end_header_id\|>)?[ \t]*\n(.*?)"
    + r"(?=<\|eot_id\|>|<\|start_header_id\|>|(?:assistant|user)(?:<\|end_header_id\|>)?[ \t]*\n|\Z)",
    re.S,
)


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
    return text[: ends[-1].end()], _answer_text(text[ends[-1].end() :])


def _answer_text(rest: str) -> str:
    rest = _ROLE_HEADER.sub("", _SPECIAL_TOKEN.sub("", rest).lstrip("\n"), count=1)
    lines = rest.strip().splitlines()
    while lines and (not lines[0].strip() or _is_json(lines[0].strip())):
        lines.pop(0)
    return "\n".join(lines).strip()


def _policy_messages(text: str) -> list[dict[str, Any]]:
    """A string of the policy's text alone as assistant messages: one action, or (calls, answer)."""
    calls_part, answer = split_response(text)
    if answer is None or not parse_action(calls_part).calls:
        return [{"role": "assistant", "content": text}]
    answer_message = [{"role": "assistant", "content": answer}] if answer else []  # none: cut off after a call
    return [{"role": "assistant", "content": calls_part}, *answer_message]


def _response_messages(text: str) -> list[dict[str, Any]]:
    """A decoded multi-turn response as messages: each assistant part, then the tool results that follow
    its calls (``tool`` messages without ids: they answer the part's calls in order), then the answer."""
    messages: list[dict[str, Any]] = []
    start = cursor = 0
    while match := _CALL_END.search(text, cursor):
        cursor = match.end()
        results = []
        while result := _TAGGED_RESULT.match(text, cursor) or _HEADED_RESULT.match(text, cursor):
            results.append(result.group(1).strip())
            cursor = result.end()
        if results:
            messages.append({"role": "assistant", "content": text[start : match.end()]})
            messages.extend({"role": "tool", "content": result} for result in results)
            start = cursor
    if not messages:
        return _policy_messages(text)
    tail = text[start:]
    if parse_action(tail).calls:
        messages.extend(_policy_messages(tail))
    elif answer := _answer_text(tail):
        messages.append({"role": "assistant", "content": answer})
    return messages
