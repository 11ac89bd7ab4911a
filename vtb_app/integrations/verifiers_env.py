"""VisualToolBench as a verifiers environment (verifiers >= 0.3.0, < 0.4: its legacy multi-turn API).

    from vtb_app.integrations.verifiers_env import load_environment
    env = load_environment(tasks="synth:64:0")                  # any vtb_env.loaders / eval source
    results = env.evaluate_sync(client=AsyncOpenAI(base_url=...), model="...", num_examples=8)

Why the legacy API: verifiers 0.4 keeps only its new ``v1`` stack (tasksets, harnesses, MCP
toolsets, sandboxed programs); the legacy ``MultiTurnEnv`` (``verifiers.legacy`` in 0.3.x) is
the API whose ``env_response`` hook lets the environment own the dialogue, which this benchmark
needs: it adds a task's later user turns with their images, shows the images a tool made, and
applies the tool cap. Each rollout is one ``VisualToolBenchEnv`` episode: the model's OpenAI
tool calls go to ``env.step``; the env's new messages (tool results, the image message, the next
turn) come back in OpenAI format with images as data URLs; the env's composed reward is the
rubric's reward (components as metrics). The six tools are offered as ``tool_defs`` from the
registry's schemas.
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

try:
    import verifiers.legacy as vf
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(f"vtb_app.integrations.verifiers_env needs verifiers>=0.3,<0.4 (its legacy API): {exc}") from exc

from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv
from vtb_env.loaders import load_tasks
from vtb_env.tasks import Task
from vtb_env.tools.base import ToolContext, ToolRegistry

METRICS = ("rubric_score", "passed", "mode", "format", "tool_success")  # reward components logged as verifiers metrics


def _openai(message: Any) -> dict[str, Any]:
    """A verifiers message (pydantic) as the OpenAI dict the env reads."""
    data = message.model_dump(exclude_none=True) if hasattr(message, "model_dump") else dict(message)
    calls = data.pop("tool_calls", None)
    if calls:
        data["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls
        ]
    return data


class VisualToolBenchVFEnv(vf.MultiTurnEnv):
    """A verifiers ``MultiTurnEnv`` whose every rollout is a ``VisualToolBenchEnv`` episode."""

    def __init__(
        self,
        tasks: Sequence[Task],
        tools: ToolRegistry,
        config: EnvConfig | None = None,
        reward: Any = None,
        **kwargs: Any,
    ):
        from datasets import Dataset

        self.vtb_tasks, self.vtb_tools, self.vtb_reward_fn = list(tasks), tools, reward
        self.vtb_config = config or EnvConfig.preset("default")
        if self.vtb_config.image_parts != "data_url":
            raise ValueError("a chat-completions model needs the images inline: EnvConfig(image_parts='data_url')")
        rows = [
            {
                "prompt": [{"role": "user", "content": t.turns[0].prompt}],
                "answer": "",
                "info": {"task_id": t.id, "env_id": "visualtoolbench"},
            }
            for t in self.vtb_tasks
        ]
        schemas = tools.schemas(ToolContext(task_id=""))
        tool_defs = [
            vf.Tool(
                name=s["function"]["name"],
                description=s["function"]["description"],
                parameters=s["function"]["parameters"],
            )
            for s in schemas
        ]
        rubric = vf.Rubric(funcs=[self.vtb_reward])
        for name in METRICS:
            rubric.add_metric(_component_metric(name))
        max_turns = kwargs.pop(
            "max_turns", 4 * self.vtb_config.max_tool_calls * max(len(t.turns) for t in self.vtb_tasks)
        )
        super().__init__(
            dataset=Dataset.from_list(rows),
            eval_dataset=Dataset.from_list(rows),
            rubric=rubric,
            tool_defs=tool_defs,
            max_turns=max_turns,
            **kwargs,
        )

    async def setup_state(self, state: vf.State) -> vf.State:
        task_id = state["info"]["task_id"]
        env = VisualToolBenchEnv(
            tasks=self.vtb_tasks, tools=self.vtb_tools, reward=self.vtb_reward_fn, config=self.vtb_config
        )
        observation, _ = await asyncio.to_thread(env.reset, options={"task_id": task_id})
        state["vtb_env"], state["vtb_seen"] = env, len(observation["messages"])
        state["prompt"] = observation["messages"]  # the env's system prompt, first turn and its images
        return state

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> vf.Messages:
        env: VisualToolBenchEnv = state["vtb_env"]
        observation, reward, terminated, truncated, info = await asyncio.to_thread(env.step, _openai(messages[-1]))
        new = observation["messages"][state["vtb_seen"] + 1 :]  # after the env's copy of the model's message
        state["vtb_seen"] = len(observation["messages"])
        if terminated or truncated:
            state["vtb_reward"], state["vtb_components"] = float(reward), dict(info.get("reward_components") or {})
            state["final_env_response"] = new
        return new

    async def vtb_reward(self, state: vf.State, **kwargs: Any) -> float:
        """The env's reward: from the final step, or from ``close_episode`` for an episode cut short."""
        return state.get("vtb_reward", 0.0)

    @vf.cleanup
    async def close_episode(self, state: vf.State) -> None:
        """Score an episode verifiers cut short (max turns, an error) as it stands, then close its env.

        verifiers runs cleanup at the end of the rollout, before the rubric: the env is gone by then.
        """
        env = state.pop("vtb_env", None)
        if env is None:
            return
        try:
            if "vtb_reward" not in state:
                _, reward, _, _, info = await asyncio.to_thread(
                    env.truncate, "stopped by verifiers (max turns or an error)"
                )
                state["vtb_reward"], state["vtb_components"] = float(reward), dict(info.get("reward_components") or {})
        finally:
            env.close()


def _component_metric(name: str) -> Any:
    async def metric(state: vf.State, **kwargs: Any) -> float:
        return float((state.get("vtb_components") or {}).get(name, 0.0))

    metric.__name__ = name
    return metric


def load_environment(
    tasks: Any = "demo",
    tools: ToolRegistry | str | None = None,
    config: EnvConfig | None = None,
    reward: Any = None,
    **kwargs: Any,
) -> VisualToolBenchVFEnv:
    """verifiers' entry point: ``tasks`` is a task list or a source (``demo``, ``synth:N:SEED``, a path, ...).

    ``tools``: a ToolRegistry, a comma list of tool names, or None for the six defaults.
    """
    from vtb_env.tools import default_tools

    if isinstance(tasks, str):
        tasks = load_tasks(tasks)
    registry = tools if isinstance(tools, ToolRegistry) else default_tools()
    if isinstance(tools, str):
        registry = registry.select(tools)
    return VisualToolBenchVFEnv(list(tasks), registry, config, reward, **kwargs)


__all__ = ["METRICS", "VisualToolBenchVFEnv", "load_environment"]
