"""One round of tool calls: which planned calls may run, running them, and what the round adds to the dialogue.

``VisualToolBenchEnv`` (``vtb_env/env.py``) plans a round in ``begin_step`` (``blocked_reason``: the
tool-call cap and the per-round limit), runs it in ``execute`` (``run_calls``: the round's time budget,
the images each call returns) and applies it in ``end_step`` (``round_messages``; ``cap_message`` once
the cap is reached).
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Sequence

from vtb_env.config import EnvConfig
from vtb_env.episode import EpisodeState, PendingStep
from vtb_env.observation import ImageAsset, reingestion_message
from vtb_env.safe_text import clean_tool_result
from vtb_env.tool_images import ToolImages
from vtb_env.tools.base import ToolContext, ToolRegistry
from vtb_env.trajectory import ToolCallRecord

CAP_PROMPT = (
    "You have reached the limit of {limit} tool {unit} for this {scope}. "
    "Tools are no longer available: reply now with your final answer."
)


def cap_used(episode: EpisodeState, config: EnvConfig) -> int:
    """How much of the tool-call cap is spent: calls or rounds, as ``config.cap_unit`` counts."""
    return episode.calls_in_turn if config.cap_unit == "calls" else episode.rounds_in_turn


def cap_message(config: EnvConfig) -> dict[str, Any]:
    """The user message that withdraws the tools (``at_cap="ask_final"``)."""
    return {
        "role": "user",
        "content": CAP_PROMPT.format(limit=config.max_tool_calls, unit=config.cap_unit, scope=config.cap_scope),
    }


def blocked_reason(episode: EpisodeState, config: EnvConfig, position: int) -> tuple[str, str] | None:
    """Why the call at ``position`` of this round is not run, as (error, kind), or None."""
    if episode.awaiting_final:
        return (
            "tools are no longer available in this turn: the tool-call limit was reached; give your final answer",
            "tools_withdrawn",
        )
    if config.cap_unit == "calls" and episode.calls_in_turn + position >= config.max_tool_calls:
        return (
            f"not executed: the limit of {config.max_tool_calls} tool calls per {config.cap_scope} was reached",
            "over_cap",
        )
    if position >= config.max_calls_per_round:
        return f"not executed: at most {config.max_calls_per_round} tool calls run per round", "over_round_cap"
    return None


def run_calls(
    pending: PendingStep,
    tools: ToolRegistry,
    context: Callable[[Sequence[ImageAsset]], ToolContext],
    tool_images: ToolImages,
    budget_s: float | None,
    judge: Callable[[ToolCallRecord, list[ImageAsset]], list[str] | None] | None = None,
) -> None:
    """Run the round's valid calls in order; each sees the images of the calls before it (``context``).

    Calls not started before ``budget_s`` is spent get an error instead. Each call's images are
    admitted by ``tool_images`` (``vtb_env.tool_images``); its notes end the call's output. ``judge``
    (the call and its kept images -> what it revealed, ``vtb_env.reveal``) fills ``call.revealed``.
    """
    deadline = None if budget_s is None else time.monotonic() + budget_s
    for call in pending.calls:
        if call.error is None and deadline is not None and time.monotonic() >= deadline:
            call.error, call.error_kind = (
                f"not executed: this round's tool time budget of {budget_s:g} s was spent",
                "round_time_budget",
            )
        if call.error is not None:
            call.output = json.dumps({"error": call.error})
            continue
        result = clean_tool_result(tools.call(call.name, call.arguments, context(pending.new_images)))
        call.output, call.latency_s = result.text, result.latency_s
        call.image_work = result.meta.get("image_work")
        if result.error is not None:
            call.error, call.error_kind = result.error, str(result.meta.get("kind", "tool_error"))
        kept, notes = tool_images.admit(result.images)
        pending.new_images.extend(kept)
        call.images.extend({"name": asset.name, "sha256": asset.sha256} for asset in kept)
        for note in notes:
            call.output += f"\n[{note}]"
        if judge is not None:
            call.revealed = judge(call, kept)


def round_messages(pending: PendingStep) -> list[dict[str, Any]]:
    """The assistant message, one tool message per call, then one user message with the new images."""
    messages: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": pending.parsed.content,
            "tool_calls": [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {
                        "name": call.name or "invalid_tool_call",
                        "arguments": _arguments_text(call.arguments),
                    },
                }
                for call in pending.calls
            ],
        }
    ]
    messages.extend(
        {"role": "tool", "tool_call_id": call.call_id, "content": call.output or json.dumps({"error": call.error})}
        for call in pending.calls
    )
    if pending.new_images:
        messages.append(reingestion_message(pending.new_images))
    return messages


def _arguments_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False, default=str)
