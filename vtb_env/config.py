"""Environment configuration and its two named presets.

``EnvConfig.preset("default")`` is the corrected protocol; ``EnvConfig.preset("official")``
reproduces the public toolkit's deliberate rules. Every field on which they differ:

| field | default | official |
|---|---|---|
| ``cap_unit`` | ``"calls"`` | ``"rounds"`` |
| ``cap_scope`` | ``"task"`` | ``"turn"`` |
| ``at_cap`` | ``"ask_final"`` | ``"placeholder"`` |
| ``history`` | ``"model"`` | ``"golden"`` |
| ``image_encoding`` | ``"original"`` | ``"jpeg"`` |

Why:

- ``cap_unit``: the paper caps tool *calls*; the toolkit counts rounds of parallel calls.
- ``cap_scope``: the paper: "20 per task"; the toolkit gives each turn a fresh budget of 20 rounds.
- ``at_cap``: default: tools withdrawn, the model asked once for its answer; official: ``CAP_PLACEHOLDER_ANSWER``.
- ``history``: later turns see the model's own earlier dialogue vs. the golden answers (toolkit flag
  ``--use_GT_answer``).
- ``image_encoding``: default sends the image bytes as they are (PNG/JPEG/WebP/GIF, others PNG); the toolkit: JPEG
  quality 85.

Both presets bound a step's tool work (the toolkit does not): at most ``max_calls_per_round``
calls of one action run, and once ``round_time_budget_s`` of tool time has passed in a round the
remaining calls are not started; each cut-off call gets an error tool message.

The toolkit's defects (one image per turn, earlier turns' images dropped, the image message
placed between the tool messages of a round, a malformed call aborting the task) are not
reproduced by either preset: see docs/environment.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, Mapping

from vtb_env.parsers import FORMATS, PARSERS
from vtb_env.toolsets import TOOL_SETS

CAP_PLACEHOLDER_ANSWER = "Model hit the maximum number of tool calls"


@dataclass(frozen=True)
class EnvConfig:
    """How episodes run. Build one with ``EnvConfig.preset(name, **overrides)`` or directly."""

    preset_name: str = "default"
    system_prompt: str | None = "strong"  # "strong" | "weak" | any text | None (no system message)
    tool_set: Literal["all", "no_vision", "none"] = "all"  # the paper's ablations
    max_tool_calls: int = 20  # per task (cap_scope="task", the paper) or per turn ("turn", the toolkit)
    cap_unit: Literal["calls", "rounds"] = "calls"
    cap_scope: Literal["task", "turn"] = "task"
    at_cap: Literal["ask_final", "placeholder"] = "ask_final"
    history: Literal["model", "golden"] = "model"
    tool_format: str = "auto"  # a name in vtb_env.parsers.FORMATS, or a format added with register_parser
    image_parts: Literal["data_url", "name"] = (
        "data_url"  # "name": parts carry the file name only, no base64 is ever made
    )
    image_encoding: Literal["original", "jpeg"] = "original"
    jpeg_quality: int = 85
    max_calls_per_round: int = 20  # calls run from one action; the rest get an error tool message
    round_time_budget_s: float | None = 120.0  # tool wall-clock of one round (= one step); None: unbounded
    # Keep only the last K images in each observation (older ones become a text note); None: all.
    # Set K to the server's vLLM --limit-mm-per-prompt image limit (or below) for long episodes.
    max_dialogue_images: int | None = None
    # The default reward's LLM judge (``VTB_JUDGE_*``): request options that override the variables, e.g.
    # {"temperature": None, "max_tokens": None} for a reasoning model that refuses both, or
    # {"token_field": "max_completion_tokens"}. Names: vtb_rewards.judge.factory.JudgeRequest. Unused with reward=.
    judge_options: Mapping[str, Any] = field(default_factory=dict)
    # The default reward's configuration: vtb_rewards.compose.RewardConfig fields, e.g. {"process_credit": "always"}
    # (process credit without rubric credit) or {"mode_reading": "any"}. Unused with reward=.
    reward_options: Mapping[str, Any] = field(default_factory=dict)
    # "slot": the system prompt asks for a final "Answer: ..." line and the default reward's exact checks read
    # only that slot (or a \boxed{...}); "free": the whole answer, as the benchmark's judge reads it
    answer_format: Literal["free", "slot"] = "free"

    def __post_init__(self) -> None:
        checks = {
            "tool_set": self.tool_set in TOOL_SETS,
            "cap_unit": self.cap_unit in ("calls", "rounds"),
            "cap_scope": self.cap_scope in ("task", "turn"),
            "max_dialogue_images": self.max_dialogue_images is None
            or (isinstance(self.max_dialogue_images, int) and self.max_dialogue_images >= 1),
            "at_cap": self.at_cap in ("ask_final", "placeholder"),
            "history": self.history in ("model", "golden"),
            "tool_format": self.tool_format in FORMATS or self.tool_format in PARSERS,  # registered formats too
            "image_parts": self.image_parts in ("data_url", "name"),
            "image_encoding": self.image_encoding in ("original", "jpeg"),
            "max_tool_calls": isinstance(self.max_tool_calls, int) and self.max_tool_calls >= 1,
            "jpeg_quality": 1 <= self.jpeg_quality <= 95,
            "max_calls_per_round": isinstance(self.max_calls_per_round, int) and self.max_calls_per_round >= 1,
            "round_time_budget_s": self.round_time_budget_s is None or self.round_time_budget_s > 0,
            "judge_options": isinstance(self.judge_options, Mapping),
            "reward_options": isinstance(self.reward_options, Mapping),
            "answer_format": self.answer_format in ("free", "slot"),
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ValueError("invalid EnvConfig " + ", ".join(f"{name}={getattr(self, name)!r}" for name in bad))

    @classmethod
    def preset(cls, name: str = "default", **overrides: Any) -> "EnvConfig":
        """The named preset with ``overrides`` applied."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
        return replace(PRESETS[name], **overrides)

    def differences(self, other: "EnvConfig") -> dict[str, tuple[Any, Any]]:
        """Fields that differ from ``other``: {name: (self's, other's)}."""
        return {
            f.name: (getattr(self, f.name), getattr(other, f.name))
            for f in fields(self)
            if getattr(self, f.name) != getattr(other, f.name)
        }


PRESETS: dict[str, EnvConfig] = {
    "default": EnvConfig(),
    "official": EnvConfig(
        preset_name="official",
        cap_unit="rounds",
        cap_scope="turn",
        at_cap="placeholder",
        history="golden",
        image_encoding="jpeg",
    ),
}


def resolve_config(config: EnvConfig | str | None) -> EnvConfig:
    """An EnvConfig from a config, a preset name, or None (the default preset)."""
    if config is None:
        return PRESETS["default"]
    if isinstance(config, str):
        return EnvConfig.preset(config)
    if isinstance(config, EnvConfig):
        return config
    raise TypeError(f"config must be an EnvConfig or a preset name, got {type(config).__name__}")
