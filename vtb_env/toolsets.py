"""Tool sets, the vision tool's name and the paper's figure-7 ablations: the one place they are defined.

- ``LOOKUP_TOOLS``: the tools that fetch a fact from outside the images;
- ``TOOL_SETS``: the ``EnvConfig.tool_set`` / ``ToolsConfig.tools`` names and the tools each offers;
- ``ABLATIONS``: the figure-7 settings as ``EnvConfig`` overrides (``strong``, ``weak``,
  ``no_vision``, ``no_tools``); ``vtb_agents.ablations.ablate_agent`` wraps the agent to match;
- ``ablate``: a registry restricted to a tool set (what the env offers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from vtb_env.tools.base import ToolRegistry

VISION_TOOL = "python_image_processing"
ALL_TOOLS: tuple[str, ...] = (
    VISION_TOOL,
    "python_interpreter",
    "web_search",
    "browser_get_page_text",
    "historical_weather",
    "calculator",
)
# The tools that fetch a fact the images do not hold (a task with ``metadata["needs_lookup"]`` needs one).
LOOKUP_TOOLS: tuple[str, ...] = ("web_search", "browser_get_page_text", "historical_weather")
TOOL_SETS: Mapping[str, tuple[str, ...]] = {
    "all": ALL_TOOLS,
    "no_vision": tuple(name for name in ALL_TOOLS if name != VISION_TOOL),
    "none": (),
}

# ``no_tools`` uses the neutral vtb_env.prompts.NO_TOOLS_SYSTEM_PROMPT: the strong prompt tells the
# model to use tools it does not have. `vtb label-modes` (the text-only pass) runs this setting.
ABLATIONS: Mapping[str, Mapping[str, Any]] = {
    "strong": {"system_prompt": "strong", "tool_set": "all"},
    "weak": {"system_prompt": "weak", "tool_set": "all"},
    "no_vision": {"system_prompt": "strong", "tool_set": "no_vision"},
    "no_tools": {"system_prompt": "no_tools", "tool_set": "none"},
}


def ablation_overrides(ablation: str) -> dict[str, Any]:
    """The ``EnvConfig`` overrides of a figure-7 setting: ``EnvConfig.preset(preset, **ablation_overrides(name))``."""
    if ablation not in ABLATIONS:
        raise ValueError(f"unknown ablation {ablation!r}; choose one of {sorted(ABLATIONS)}")
    return dict(ABLATIONS[ablation])


def ablate(registry: "ToolRegistry", tool_set: str) -> "ToolRegistry":
    """``registry`` restricted to ``tool_set``: ``all`` keeps it whole (custom tools included),
    ``no_vision`` drops the vision tool, ``none`` offers nothing."""
    if tool_set == "all":
        return registry
    if tool_set == "no_vision":
        return registry.without(VISION_TOOL)
    return registry.only()
