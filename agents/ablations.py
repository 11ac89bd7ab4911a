"""The paper's figure-7 ablation settings, as env overrides plus an agent wrapper.

- ``strong``: the main setting (strong system prompt, all tools);
- ``weak``: the weak system prompt (appendix C.2), all tools;
- ``no_vision``: strong prompt, every tool but ``python_image_processing``;
- ``no_tools``: no tools offered at all (the agent is wrapped in TextOnlyAgent) and the neutral
  ``vtb_env.prompts.NO_TOOLS_SYSTEM_PROMPT``, not the strong prompt, which tells the model to use
  tools it does not have. `vtb label-modes` (the text-only pass) runs this setting.

``EnvConfig.preset(preset, **ABLATIONS[name])`` gives the env; ``ablate_agent`` the agent.
"""

from __future__ import annotations

from typing import Any, Mapping

from vtb_agents.base import Agent
from vtb_agents.text_only import TextOnlyAgent

ABLATIONS: Mapping[str, Mapping[str, Any]] = {
    "strong": {"system_prompt": "strong", "tool_set": "all"},
    "weak": {"system_prompt": "weak", "tool_set": "all"},
    "no_vision": {"system_prompt": "strong", "tool_set": "no_vision"},
    "no_tools": {"system_prompt": "no_tools", "tool_set": "none"},
}


def env_overrides(ablation: str) -> dict[str, Any]:
    if ablation not in ABLATIONS:
        raise ValueError(f"unknown ablation {ablation!r}; choose one of {sorted(ABLATIONS)}")
    return dict(ABLATIONS[ablation])


def ablate_agent(agent: Agent, ablation: str) -> Agent:
    env_overrides(ablation)  # validates the name
    return TextOnlyAgent(agent) if ablation == "no_tools" else agent
