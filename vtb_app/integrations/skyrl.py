"""VisualToolBench as a SkyRL environment (skyrl-gym 0.4): ``skyrl_gym.make("vtb_gym", ...)``.

Importing this module registers the id ``vtb_gym`` and its alias ``vtb-gym`` (SkyRL has no plugin
discovery: import it in the training entry point, before the generator calls ``skyrl_gym.make``).
SkyRL's generators build one env per trajectory with
``skyrl_gym.make(env_class, env_config=getattr(cfg.environment.skyrl_gym, env_class, {}), extras=row)``:

- ``env_config``: a ``VTBGymEnvConfig`` (what SkyRL's typed config holds under
  ``environment.skyrl_gym.vtb_gym`` with ``vtb_app.integrations.skyrl_train``) or a mapping with its
  fields: ``tasks`` (required: any ``vtb_env.loaders`` source, ``demo`` for the bundled set; loaded once
  per process), ``tools`` (comma list; default all six, one sandbox pool per process),
  ``max_tool_calls``, ``system_prompt``;
- ``extras`` (the dataset row's extra fields): ``task_id``, and optionally any of the config's
  fields, which override it for that row; SkyRL adds ``max_turns``.

An env without ``tasks`` in either raises ``ValueError`` (no silent fallback to the demo set).
``init(prompt)`` resets the env on the row's task and returns the env's own first messages (the
system prompt, the first turn with its images); ``step(text)`` hands the model's raw text to
``VisualToolBenchEnv.step`` (any tool-call format the env parses) and returns the env's new
messages in OpenAI format: tool results, then a user message with the tool's images as
``image_url`` data-URL parts, or the task's next turn with its images. That is what SkyRL's VLM
generator (``SkyRLVLMGymGenerator``) renders through the inference server's chat endpoint (the
benchmark is visual: its text generator is not the path). The reward is 0 until the episode ends,
then the env's composed reward; its components are ``get_metrics()``. An episode still running
after SkyRL's ``max_turns`` policy steps is truncated and scored as it stands.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import skyrl_gym
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from vtb_app.integrations.shared import shared_tasks, shared_tools
from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv

ENV_ID = "vtb_gym"  # an identifier: SkyRL's typed config holds the env's settings in a field of this name
ENV_ALIASES = ("vtb-gym",)
DEFAULT_MAX_TURNS = 20  # policy steps per episode when SkyRL does not say (it passes generator.max_turns)


@dataclasses.dataclass
class VTBGymEnvConfig:
    """The env's settings: ``environment.skyrl_gym.vtb_gym`` in SkyRL's config (``skyrl_train``)."""

    tasks: str | None = None  # any vtb_env.loaders source; required (``demo``: the bundled demo set)
    tools: str | None = None  # comma list of tool names; None: all six
    max_tool_calls: int = 5
    system_prompt: str = "strong"  # a vtb_env.prompts name, or "none"


SETTINGS = frozenset(field.name for field in dataclasses.fields(VTBGymEnvConfig))


def env_settings(env_config: Any, extras: Mapping[str, Any]) -> VTBGymEnvConfig:
    """The settings for one env: ``env_config`` (a ``VTBGymEnvConfig`` or a mapping), then the row's ``extras``."""
    if dataclasses.is_dataclass(env_config):
        env_config = dataclasses.asdict(env_config)
    merged = {**dict(env_config or {}), **{key: extras[key] for key in SETTINGS & extras.keys()}}
    if unknown := set(merged) - SETTINGS:
        raise ValueError(f"{ENV_ID}: unknown env_config fields {sorted(unknown)} (known: {sorted(SETTINGS)})")
    settings = VTBGymEnvConfig(**merged)
    if not settings.tasks:
        raise ValueError(
            f"{ENV_ID}: no tasks configured: set environment.skyrl_gym.{ENV_ID}.tasks (run SkyRL with "
            "trainer.override_entrypoint=vtb_app.integrations.skyrl_train), put `tasks` in each row's extras, "
            "or pass env_config={'tasks': ...} to skyrl_gym.make ('demo' is the bundled demo set)"
        )
    return settings


class VTBSkyRLEnv(BaseTextEnv):
    """One ``VisualToolBenchEnv`` episode as a SkyRL ``BaseTextEnv``."""

    def __init__(
        self, env_config: VTBGymEnvConfig | Mapping[str, Any] | None = None, extras: Mapping[str, Any] | None = None
    ):
        super().__init__()
        extras = dict(extras or {})
        self.task_id = extras.get("task_id")
        if not isinstance(self.task_id, str) or not self.task_id:
            raise ValueError(f"{ENV_ID}: the dataset row needs a task_id in its extras, got keys {sorted(extras)}")
        self.max_turns = int(extras.get("max_turns") or DEFAULT_MAX_TURNS)
        settings = env_settings(env_config, extras)
        self.env = VisualToolBenchEnv(
            tasks=shared_tasks(settings.tasks),
            tools=shared_tools(settings.tools),
            config=EnvConfig.preset(
                "default",
                max_tool_calls=int(settings.max_tool_calls),
                image_parts="data_url",
                system_prompt=None if settings.system_prompt == "none" else settings.system_prompt,
            ),
        )
        self._seen = 0
        self._metrics: dict[str, float] = {}

    def init(self, prompt: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The env's first messages for the row's task (the row's own prompt is only SkyRL's dataset key)."""
        observation, info = self.env.reset(options={"task_id": self.task_id})
        self._seen = len(observation["messages"])
        return observation["messages"], {"task_id": self.task_id, "num_turns": info["task"]["num_turns"]}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        observation, reward, terminated, truncated, info = self.env.step(action)
        if not (terminated or truncated) and self.turns >= self.max_turns:
            observation, reward, terminated, truncated, info = self.env.truncate(f"SkyRL's max_turns={self.max_turns}")
        done = terminated or truncated
        new = observation["messages"][self._seen + 1 :]  # after the env's copy of the action
        self._seen = len(observation["messages"])
        if done:
            self._metrics = {k: float(v) for k, v in (info.get("reward_components") or {}).items()}
        return BaseTextEnvStepOutput(
            observations=[] if done else new,
            reward=float(reward) if done else 0.0,
            done=done,
            metadata={
                "turn": info["turn"],
                "parse_errors": info["parse_errors"],
                "reward_error": info.get("reward_error"),
            },
        )

    def get_metrics(self) -> dict[str, Any]:
        return dict(self._metrics)

    def close(self) -> None:
        self.env.close()


def register() -> None:
    """Register ``vtb_gym`` and its aliases with skyrl_gym (idempotent; done on import)."""
    for env_id in (ENV_ID, *ENV_ALIASES):
        if env_id not in skyrl_gym.registry:
            skyrl_gym.register(id=env_id, entry_point=f"{__name__}:VTBSkyRLEnv")


register()

__all__ = ["ENV_ALIASES", "ENV_ID", "VTBGymEnvConfig", "VTBSkyRLEnv", "env_settings", "register"]
