"""The record of an episode: what the policy did, turn by turn. Rewards and reports read this.

The environment fills it while stepping; ``to_dict`` gives the JSON form stored by ``vtb eval``
(images as names and sha256 hashes, never pixels). Every record of an accepted action
serialises (``to_dict``, JSON, pickle, Ray): tool arguments nested deeper than
``MAX_ARGUMENT_DEPTH`` are kept as the text the policy wrote, and the call is invalid.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from vtb_env.parsers.base import ParsedCall

# No tool schema nests this deep; JSON encoders, deepcopy and pickle give up between 500 and 1,000 levels.
MAX_ARGUMENT_DEPTH = 64
NO_RESULT = "no_result"  # error_kind of a call written in a completion whose conversation has no result for it


def image_work_done(work: Mapping[str, Any] | None) -> bool:
    """A vision call's sandbox record says it did visual work: it read an input image and returned an image
    that is not a pixel copy of an input, or printed something."""
    if not isinstance(work, Mapping):
        return False
    new_images = work.get("new_images")
    return bool(work.get("read")) and ((isinstance(new_images, int) and new_images > 0) or work.get("printed") is True)


@dataclass
class ToolCallRecord:
    """One tool call as parsed from the policy's action, and what came back."""

    call_id: str
    name: str
    arguments: Any  # the parsed arguments (whatever the policy sent, even if invalid)
    output: str = ""  # the tool message text
    error: str | None = None  # None when the call succeeded
    error_kind: str | None = None  # "parse_error" | "invalid_call" | "tool_error" | "timeout" | ...
    latency_s: float = field(default=0.0, compare=False)  # timings are not part of what happened
    images: list[dict[str, str]] = field(default_factory=list)  # [{"name", "sha256"}]
    round_index: int = 0  # calls sent in one action share a round
    repaired: bool = False  # the call's JSON was near-miss and had to be repaired
    # the vision tool's sandbox record: {"read": [input images read], "new_images": n, "printed": bool}
    # (``vtb_env.tools.python_tools``); None for other tools, and where no sandbox ran the call
    image_work: dict[str, Any] | None = None
    # what the call showed of what the task hides, judged by the env where the images are (``vtb_env.reveal``):
    # the key facts' values a vision call's images show, or the answer's values a lookup returned; None: not
    # judged (a task without key facts, another tool, no reader installed)
    revealed: list[str] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def did_image_work(self) -> bool:
        """Did the sandbox see this call read an input image and return something of its own (``image_work_done``)?"""
        return image_work_done(self.image_work)

    @property
    def answered(self) -> bool:
        """Did a result come back for the call? False only for a call read from a completion whose
        conversation holds no result for it (``vtb_env.completion``): a call block that never ran."""
        return self.error_kind != NO_RESULT

    @classmethod
    def from_call(cls, call: ParsedCall, call_id: str, **fields: Any) -> "ToolCallRecord":
        """The record of a parsed call: a parse error is the call's error; arguments nested deeper than
        MAX_ARGUMENT_DEPTH are kept as the policy's text and make the call invalid (no tool runs)."""
        record = cls(call_id=call_id, name=call.name, arguments=call.arguments, repaired=call.repaired, **fields)
        if call.error is not None:
            record.error, record.error_kind = call.error, "parse_error"
        if nesting_depth(call.arguments, MAX_ARGUMENT_DEPTH) > MAX_ARGUMENT_DEPTH:
            record.arguments = call.raw
            if record.error is None:
                record.error = f"arguments of {call.name} are nested deeper than {MAX_ARGUMENT_DEPTH} levels"
                record.error_kind = "invalid_call"
        return record


def nesting_depth(value: Any, limit: int) -> int:
    """Levels of nested objects and arrays in ``value``, counted without recursion up to ``limit + 1``
    (each distinct object visited once per level, so shared references and cycles cost nothing extra)."""
    depth, level = 0, [value]
    while depth <= limit:
        containers = {id(item): item for item in level if isinstance(item, (Mapping, list, tuple))}
        if not containers:
            return depth
        depth += 1
        level = [
            child for item in containers.values() for child in (item.values() if isinstance(item, Mapping) else item)
        ]
    return depth


@dataclass
class StepRecord:
    """One ``step()``: the raw action and how it was read."""

    action_text: str
    reasoning: str = ""  # <think> blocks, kept for process metrics
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    final_answer: str | None = None  # set when this step closed the turn
    parse_errors: list[str] = field(default_factory=list)
    parser: str | None = None  # which tool-call format was detected
    env_overhead_s: float = field(default=0.0, compare=False)


@dataclass
class TurnRecord:
    """One turn of an episode: its steps, the final answer (None: never given), and how it ended."""

    index: int
    steps: list[StepRecord] = field(default_factory=list)
    final_answer: str | None = None
    hit_tool_cap: bool = False
    truncated: bool = False

    @property
    def tool_calls(self) -> list[ToolCallRecord]:
        return [call for step in self.steps for call in step.tool_calls]

    @property
    def reasoning(self) -> str:
        """Everything the policy wrote in this turn (thoughts and text), in order: input for KCoverage."""
        return "\n".join(part for step in self.steps for part in (step.reasoning, step.action_text) if part)


@dataclass
class EpisodeRecord:
    """Everything that happened in one episode, turn by turn (what rewards and evaluation records read);
    ``metadata`` holds the task labels, the config, the tools offered and the images shown."""

    task_id: str
    turns: list[TurnRecord] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def tool_calls(self) -> list[ToolCallRecord]:
        return [call for turn in self.turns for call in turn.tool_calls]

    @property
    def used_tools(self) -> bool:
        """Did the policy invoke any tool (the mode-selection signal)? Malformed attempts count as invocations."""
        return bool(self.tool_calls)

    @property
    def final_answers(self) -> list[str | None]:
        return [turn.final_answer for turn in self.turns]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EpisodeRecord":
        turns = []
        for turn in data.get("turns", []):
            steps = [
                StepRecord(**{**step, "tool_calls": [ToolCallRecord(**call) for call in step.get("tool_calls", [])]})
                for step in turn.get("steps", [])
            ]
            turns.append(TurnRecord(**{**turn, "steps": steps}))
        return cls(task_id=data["task_id"], turns=turns, metadata=dict(data.get("metadata", {})))
