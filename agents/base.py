"""The agent protocol: a policy that turns an environment observation into an action.

An observation is what ``VTBEnv`` returns: ``{"messages": [...OpenAI chat messages...],
"images": [PIL images, in the order the messages refer to them], "tools": [function
schemas]}``. An action is either raw text (the env's parsers find tool calls and the final
answer in it) or an OpenAI assistant message dict (``{"role": "assistant", "content": ...,
"tool_calls": [...]}``).

Every model call an agent makes is logged as a ``CallRecord`` (tokens, latency, retries), so an
evaluation run can report cost and speed per task without knowing how the agent works.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Protocol, Sequence, Union, runtime_checkable

Observation = Mapping[str, Any]
Action = Union[str, dict[str, Any]]


@dataclass
class CallRecord:
    """One model call (or one perception pass for non-LLM agents)."""

    latency_s: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 1  # > 1 when transient errors were retried
    error: str | None = None  # set when the call finally failed
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class Agent(Protocol):
    """What ``vtb eval`` and training loops need from a policy."""

    name: str

    def act(self, observation: Observation) -> Action: ...

    def act_batch(self, observations: Sequence[Observation]) -> list[Action]: ...

    def drain_records(self) -> list[CallRecord]: ...


class BaseAgent:
    """Shared plumbing: a thread-safe call log and a sequential ``act_batch``.

    Subclasses implement ``act``; models that batch natively override ``act_batch`` too.
    """

    name: str = "agent"

    def __init__(self) -> None:
        # Per thread: the evaluator runs one episode per worker thread and drains after it.
        self._local = threading.local()

    @property
    def _records(self) -> list[CallRecord]:
        if not hasattr(self._local, "records"):
            self._local.records = []
        return self._local.records

    def act(self, observation: Observation) -> Action:
        raise NotImplementedError

    def act_batch(self, observations: Sequence[Observation]) -> list[Action]:
        return [self.act(observation) for observation in observations]

    def record(self, call: CallRecord) -> None:
        self._records.append(call)

    def drain_records(self) -> list[CallRecord]:
        """Return and forget the calls this thread logged since its last drain (one episode's calls)."""
        records = list(self._records)
        self._records.clear()
        return records

    def describe(self) -> dict[str, Any]:
        """The agent's identity and settings, stored with every evaluation record."""
        return {"name": self.name, "class": type(self).__name__}

    def close(self) -> None:
        """Release clients, models or processes."""


def summarize_calls(records: Sequence[CallRecord]) -> dict[str, Any]:
    """Totals over call records: count, tokens, latency, retries, failures."""
    return {
        "calls": len(records),
        "prompt_tokens": sum(r.prompt_tokens for r in records),
        "completion_tokens": sum(r.completion_tokens for r in records),
        "latency_s": round(sum(r.latency_s for r in records), 4),
        "retries": sum(max(r.attempts - 1, 0) for r in records),
        "failed_calls": sum(1 for r in records if r.error),
    }
