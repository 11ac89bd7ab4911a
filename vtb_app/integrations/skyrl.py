"""VisualToolBench as a SkyRL environment (skyrl-gym 0.4): ``skyrl_gym.make("vtb-gym", ...)``.

Importing this module registers the id ``vtb-gym`` (SkyRL has no plugin discovery: import it in
the training entry point, before the generator calls ``skyrl_gym.make``). SkyRL's generators
build one env per trajectory with ``skyrl_gym.make(env_class, env_config=cfg, extras=row)``:

- ``env_config`` (``environment.skyrl_gym.vtb-gym`` in SkyRL's config): ``tasks`` (any
  ``vtb_env.loaders`` source, loaded once per process), ``tools`` (comma list; default all six,
  one sandbox pool per process), ``max_tool_calls``, ``system_prompt``;
- ``extras`` (the dataset row's extra fields): ``task_id``; SkyRL adds ``max_turns``.

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

from typing import Any, Mapping

import skyrl_gym
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from vtb_app.integrations.shared import shared_tasks, shared_tools
from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv

ENV_ID = "vtb-gym"
DEFAULT_MAX_TURNS = 20  # policy steps per episode when SkyRL does not say (it passes generator.max_turns)


class VTBSkyRLEnv(BaseTextEnv):
    """One ``VisualToolBenchEnv`` episode as a SkyRL ``BaseTextEnv``."""

    def __init__(self, env_config: Mapping[str, Any] | None = None, extras: Mapping[str, Any] | None = None):
        super().__init__()
        config, extras = dict(env_config or {}), dict(extras or {})
        self.task_id = extras.get("task_id")
        if not isinstance(self.task_id, str) or not self.task_id:
            raise ValueError(f"{ENV_ID}: the dataset row needs a task_id in its extras, got keys {sorted(extras)}")
        self.max_turns = int(extras.get("max_turns") or DEFAULT_MAX_TURNS)
        prompt = config.get("system_prompt", "strong")
        self.env = VisualToolBenchEnv(
            tasks=shared_tasks(str(config.get("tasks", "demo"))),
            tools=shared_tools(config.get("tools")),
            config=EnvConfig.preset(
                "default",
                max_tool_calls=int(config.get("max_tool_calls", 5)),
                image_parts="data_url",
                system_prompt=None if prompt == "none" else prompt,
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
    """Register ``vtb-gym`` with skyrl_gym (idempotent; done on import)."""
    if ENV_ID not in skyrl_gym.registry:
        skyrl_gym.register(id=ENV_ID, entry_point=f"{__name__}:VTBSkyRLEnv")


register()

__all__ = ["ENV_ID", "VTBSkyRLEnv", "register"]
