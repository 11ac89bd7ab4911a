"""The agent side of the paper's figure-7 ablations (the settings are ``vtb_env.toolsets.ABLATIONS``).

- ``strong``, ``weak``, ``no_vision``: the agent runs as it is;
- ``no_tools``: no tools are offered, so the agent is wrapped in TextOnlyAgent.

``EnvConfig.preset(preset, **ablation_overrides(name))`` gives the env; ``ablate_agent`` the agent.
"""

from __future__ import annotations

from vtb_agents.base import Agent
from vtb_agents.text_only import TextOnlyAgent
from vtb_env.toolsets import ablation_overrides


def ablate_agent(agent: Agent, ablation: str) -> Agent:
    """``agent`` as the ablation ``ablation`` runs it (raises ValueError for an unknown name)."""
    offers_no_tools = ablation_overrides(ablation)["tool_set"] == "none"  # raises for an unknown name
    return TextOnlyAgent(agent) if offers_no_tools else agent
