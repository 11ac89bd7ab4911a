"""VisualToolBench as a verifiers 0.4 (``verifiers.v1``) taskset and env: ``vf-eval vtb-gym``.

    vf-eval vtb-gym -m MODEL --client.base-url http://127.0.0.1:8000/v1 --client.api-key-var OPENAI_API_KEY \
        --env.taskset.tasks synth:64:0 -n 64 -r 4

verifiers finds the taskset by its id: ``vtb-gym`` imports the top-level module ``vtb_gym``,
whose ``__all__`` exports ``VTBTaskset`` and ``VTBEnv`` (defined here).

Each episode is one ``VisualToolBenchEnv`` episode played host-side by ``VTBEnv.run``, the
pattern of verifiers' own TextArena and OpenEnv tasksets: the env plays the user of the
player's interaction. The first user turn carries the task's images (data-URL image parts);
each model reply goes to ``env.step`` as raw text (the env parses the tool calls in any
format it knows, runs them sandboxed and applies the cap); the env's answer (tool results,
the tool images, the task's next turn and its images) comes back as the next user turn. The
tools are described in the system prompt (``<tool_call>`` JSON blocks), since the policy's
harness runs no tools of its own (``null``: a plain chat loop). The env's composed reward is
the trace's ``vtb_reward``; its components are metrics.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Iterator

import verifiers.v1 as vf

from vtb_app.integrations.shared import shared_tasks, shared_tools
from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv

COMPONENTS = ("rubric_score", "passed", "mode", "format", "tool_success")  # recorded as trace metrics

TOOL_PROTOCOL = """

# Tools
You may call these functions (JSON schemas):
{schemas}

To call one, reply with a block per call:
<tool_call>{{"name": "<function name>", "arguments": {{...}}}}</tool_call>
The results come back in the next message. Reply without a tool call to give your final answer."""


class VTBTasksetConfig(vf.TasksetConfig):
    tasks: str = "demo"
    """Task source: demo, synth:N:SEED, a parquet file or a project-format directory."""
    tools: str | None = None
    """Comma-separated tool names to offer (None: the six defaults)."""
    max_tool_calls: int = 5
    """The env's tool-call cap per task."""
    system_prompt_name: str = "strong"
    """strong, weak, none, or the text itself."""


class VTBTaskData(vf.TaskData):
    task_id: str
    """The VisualToolBench task this episode plays."""


class VTBTask(vf.Task[VTBTaskData]):
    @property
    def key(self) -> str:
        return self.data.task_id


class VTBTaskset(vf.Taskset[VTBTask, VTBTasksetConfig]):
    """One verifiers task per VisualToolBench task (``VTBEnv`` builds its dialogue)."""

    def load(self) -> Iterator[VTBTask]:
        for task in shared_tasks(self.config.tasks):
            yield VTBTask(VTBTaskData(id=task.id, name=task.id, task_id=task.id, prompt=None), self.config.task)


class VTBEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"}, runtime={"type": "subprocess"})
    """The policy's seat: verifiers' plain chat loop (the env runs the tools), on the host."""


class VTBEnv(vf.Env[VTBEnvConfig]):
    """Plays each task as one ``VisualToolBenchEnv`` episode; the env is the player's user."""

    async def run(self, task: VTBTask, agents: Any) -> None:
        config: VTBTasksetConfig = self.taskset.config
        env = VisualToolBenchEnv(
            tasks=shared_tasks(config.tasks),
            tools=shared_tools(config.tools),
            config=_env_config(config),
        )
        try:
            await self._play(env, task, agents)
        finally:
            env.close()

    async def _play(self, env: VisualToolBenchEnv, task: VTBTask, agents: Any) -> None:
        observation, _ = await asyncio.to_thread(env.reset, options={"task_id": task.data.task_id})
        seen = len(observation["messages"])
        reward, info = 0.0, {}
        async with agents.player.interaction(task) as interaction:
            segment = await interaction.turn(_opening(observation))
            while True:
                if segment.terminated:  # verifiers ended the run (a turn or token limit): score it as it stands
                    _, reward, _, _, info = await asyncio.to_thread(env.truncate, "stopped by verifiers")
                    break
                observation, reward, terminated, truncated, info = await asyncio.to_thread(env.step, segment.last_reply)
                if terminated or truncated:
                    break
                reply, new = observation["messages"][seen], observation["messages"][seen + 1 :]
                seen = len(observation["messages"])
                segment = await interaction.turn(_as_user_turn(reply, new))
            trace = interaction.trace
            trace.record_reward("vtb_reward", float(reward))
            components = info.get("reward_components") or {}
            for name in COMPONENTS:
                trace.record_metric(f"vtb_{name}", float(components.get(name, 0.0)))
            if info.get("reward_error"):
                trace.info["vtb_reward_error"] = info["reward_error"]


def _opening(observation: dict[str, Any]) -> list[dict[str, Any]]:
    """The env's first messages, the tools described in the system message (the harness offers none)."""
    messages = list(observation["messages"])
    system = messages.pop(0)["content"] if messages and messages[0]["role"] == "system" else ""
    if observation["tools"]:
        system += TOOL_PROTOCOL.format(schemas=json.dumps([s["function"] for s in observation["tools"]], indent=1))
    return ([{"role": "system", "content": system}] if system else []) + messages


def _as_user_turn(reply: dict[str, Any], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The env's answer to ``reply`` as user messages: the player's harness ran no tool, so its transcript has no
    call ids for tool messages; each result is named after the call the env parsed from the reply."""
    names = {call["id"]: call["function"]["name"] for call in reply.get("tool_calls") or []}
    return [
        m
        if m["role"] != "tool"
        else {"role": "user", "content": f"[tool result {names.get(m.get('tool_call_id'), '')}]\n{m['content']}"}
        for m in new
    ]


def _env_config(config: VTBTasksetConfig) -> EnvConfig:
    prompt = None if config.system_prompt_name == "none" else config.system_prompt_name
    return EnvConfig.preset(
        "default", max_tool_calls=config.max_tool_calls, image_parts="data_url", system_prompt=prompt
    )


__all__ = ["COMPONENTS", "VTBEnv", "VTBEnvConfig", "VTBTask", "VTBTaskData", "VTBTaskset", "VTBTasksetConfig"]
