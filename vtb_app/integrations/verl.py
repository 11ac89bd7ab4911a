"""verl integration (tested with verl 0.9.1): an agent loop around the env, a tool adapter, a tool parser.

* ``VTBAgentLoop`` (``agent_name: vtb_agent``, rows from ``verl_rows.agent_row``): each
  trajectory is one ``VisualToolBenchEnv`` episode. The env parses the policy's calls in any
  format, runs them (sandboxed), shows tool images and the next user turns with their images,
  applies the tool cap, and gives its composed reward, which the loop returns as verl's
  ``reward_score`` (verl turns it into ``rm_scores``; no reward function is needed). Env tokens
  carry ``response_mask = 0``. Register it with ``rollout.agent.agent_loop_config_path`` pointing
  at ``verl_rows.agent_loop_config()`` written as YAML.
* ``VTBTool`` (``agent_name: tool_agent``, rows from ``verl_rows.tool_agent_row``): one benchmark
  tool behind verl's ``BaseTool`` contract for verl's own ``ToolAgentLoop``: ``create`` gets
  ``create_kwargs`` and returns ``(instance_id, ToolResponse)``; ``execute`` returns
  ``(ToolResponse, reward, metrics)``. verl creates and releases a tool object per call, so the
  trajectory's state (its images, the ``transformed_image_<i>`` numbering) is keyed on verl's
  ``agent_data``, shared by all tools of the trajectory.
* ``VTBToolParser`` (``rollout.multi_turn.format: vtb``): the project's parsers (hermes, Llama 3
  JSON, pythonic, ``<function=...>``) as a verl tool parser; registered on import, which verl
  does when it loads ``VTBTool`` from the tools YAML.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Mapping
from uuid import uuid4

try:
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
    from verl.experimental.agent_loop.tool_parser import FunctionCall, ToolParser
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(
        f"vtb_app.integrations.verl needs verl (tested with 0.9.1; see docs/training.md for a CPU-only install): {exc}"
    ) from exc

from vtb_agents.rollout import ChatRenderer, append_env_reply, start_episode
from vtb_app.integrations.verl_rows import (
    AGENT_NAME,
    DEFAULT_FACTORY,
    DEFAULT_REWARD_FACTORY,
    IMAGES_KEY,
    task_from_row,
)
from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv
from vtb_env.image_names import task_image_name
from vtb_env.parsers import parse_action
from vtb_env.tool_images import ToolImages
from vtb_env.tools.base import NamedImage, ToolContext, ToolRegistry

_REGISTRIES: dict[str, ToolRegistry] = {}  # one registry (one sandbox) per factory, shared by every tool and loop
_REWARDS: dict[str, Any] = {}  # one reward (one judge client) per factory


def _load(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _registry(factory: str) -> ToolRegistry:
    if factory not in _REGISTRIES:
        _REGISTRIES[factory] = _load(factory)()
    return _REGISTRIES[factory]


# ---- the agent loop: the env owns the episode ----------------------------------------------


@register(AGENT_NAME)
class VTBAgentLoop(AgentLoopBase):
    """A verl agent loop that plays one ``VisualToolBenchEnv`` episode per trajectory.

    Options (from the agent-loop YAML, ``verl_rows.agent_loop_config``): ``tools_factory``
    (``"module:callable"`` returning the ToolRegistry), ``reward_factory`` (returning the reward;
    default ``vtb_rewards:default_reward``, judge from ``VTB_JUDGE_*``) and ``env`` (``EnvConfig``
    fields, with ``preset``). The trajectory ends when the env ends the episode or the response reaches
    ``rollout.response_length`` (then it is scored as unanswered, ``vtb_length_truncated``).
    """

    def __init__(
        self,
        *args: Any,
        tools_factory: str = DEFAULT_FACTORY,
        reward_factory: str = DEFAULT_REWARD_FACTORY,
        env: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ):
        kwargs.pop("tools", None)  # verl passes its own tools; the env brings the benchmark's
        super().__init__(*args, **kwargs)
        options = dict(env or {})
        self.env_config = EnvConfig.preset(options.pop("preset", "default"), **{"image_parts": "name", **options})
        if self.env_config.history == "golden":
            raise ValueError(
                "history='golden' rewrites the dialogue, so an episode is not one token sequence; use history='model'"
            )
        self.tool_registry = _registry(tools_factory)
        if reward_factory not in _REWARDS:
            _REWARDS[reward_factory] = _load(reward_factory)()
        self.reward_fn = _REWARDS[reward_factory]
        self.renderer = ChatRenderer(
            self.processor if self.processor is not None else self.tokenizer, **self.apply_chat_template_kwargs
        )
        self.response_length = self.rollout_config.response_length

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        task = task_from_row(kwargs.get("extra_info") or {})
        env = VisualToolBenchEnv(tasks=[task], tools=self.tool_registry, reward=self.reward_fn, config=self.env_config)
        try:
            return await self._play(env, task.id, sampling_params)
        finally:
            env.close()

    async def _play(self, env: VisualToolBenchEnv, task_id: str, sampling_params: dict[str, Any]) -> AgentLoopOutput:
        observation, _ = await asyncio.to_thread(env.reset, options={"task_id": task_id})
        episode = start_episode(self.renderer, task_id, observation)
        messages, tools = observation["messages"], observation["tools"]
        request_id, timing = uuid4().hex, {"generate_sequences": 0.0, "tool_calls": 0.0}
        has_logprobs = True  # verl uses rollout log-probs only when the server returned them for every step
        while True:
            start = time.perf_counter()
            output = await self.server_manager.generate(
                request_id=request_id,
                prompt_ids=episode.prompt_ids + episode.completion_ids,
                sampling_params=sampling_params,
                image_data=list(episode.images) if self.renderer.is_vision and episode.images else None,
            )
            timing["generate_sequences"] += time.perf_counter() - start
            has_logprobs = has_logprobs and bool(output.log_probs)
            episode.extend(output.token_ids, output.log_probs or [0.0] * len(output.token_ids))
            episode.policy_steps += 1
            if len(episode.completion_ids) >= self.response_length:
                _, reward, _, _, info = env.truncate("response_length")
                episode.length_truncated = True
                break
            start = time.perf_counter()
            observation, reward, terminated, truncated, info = await asyncio.to_thread(
                env.step, self.renderer.decode(output.token_ids)
            )
            timing["tool_calls"] += time.perf_counter() - start
            if terminated or truncated:
                break
            messages = append_env_reply(self.renderer, episode, messages, tools, observation)
            if len(episode.completion_ids) >= self.response_length:
                _, reward, _, _, info = env.truncate("response_length")
                episode.length_truncated = True
                break
        return self._output(episode, float(reward), info, timing, has_logprobs)

    def _output(
        self, episode: Any, reward: float, info: dict[str, Any], timing: dict[str, float], has_logprobs: bool
    ) -> AgentLoopOutput:
        n = self.response_length
        record = info["record"]
        if len(episode.prompt_ids) > self.rollout_config.prompt_length and self.renderer.is_vision:
            raise ValueError(
                f"the prompt has {len(episode.prompt_ids)} tokens, over rollout.prompt_length: "
                "image tokens cannot be cut; raise it"
            )
        return AgentLoopOutput(
            prompt_ids=self._cap_text_prompt_length(
                episode.prompt_ids
            ),  # verl's own loops left-truncate text prompts too
            response_ids=episode.completion_ids[:n],
            response_mask=episode.env_mask[:n],
            response_logprobs=episode.logprobs[:n] if has_logprobs else None,
            multi_modal_data={"images": episode.images} if self.renderer.is_vision else {},
            reward_score=reward,
            num_turns=2 * episode.policy_steps,
            metrics=timing,
            extra_fields={
                # fixed keys: verl stacks reward_extra_info across the batch by the first row's keys
                "reward_extra_info": {
                    "vtb_reward": reward,
                    "vtb_reward_error": float("reward_error" in info),
                    "vtb_tool_calls": float(len(record.tool_calls)),
                    "vtb_length_truncated": float(episode.length_truncated),
                },
                "vtb_reward_components": dict(info.get("reward_components") or {}),
                "vtb_task_id": episode.task_id,
                "vtb_image_names": list(episode.image_names),
            },
        )


# ---- the tool adapter for verl's own ToolAgentLoop -----------------------------------------


@dataclass
class _Trajectory:
    """One trajectory's tool state, shared by all its tools: the images so far and the next index."""

    task_id: str
    turn_index: int
    images: list[NamedImage]
    tool_images: ToolImages = field(default_factory=ToolImages)  # the next index, the pixel budget
    calls: int = 0
    failures: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


_TRAJECTORIES: "weakref.WeakKeyDictionary[Any, _Trajectory]" = weakref.WeakKeyDictionary()  # keyed on verl's agent_data


def _prompt_images(agent_data: Any) -> list[bytes]:
    """The original bytes of the prompt's images: verl's dataset keeps each image part's ``bytes``."""
    found = []
    for message in getattr(agent_data, "messages", None) or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            found += [
                part["bytes"]
                for part in content
                if isinstance(part, dict) and part.get("type") == "image" and part.get("bytes")
            ]
    return found


class VTBTool(BaseTool):
    """One benchmark tool (``config["tool"]``) behind verl's ``BaseTool`` contract.

    ``config``: ``tool`` (the name), ``factory`` (``"module:callable"`` returning a ToolRegistry;
    default ``vtb_env.tools:default_tools``), ``return_images`` (default True; False for a
    text-only policy: verl refuses tool images without a processor, so images a tool makes are
    named in the text and kept for later calls, not shown). ``create_kwargs``: ``task_id``,
    ``turn_index`` (from ``verl_rows.tool_agent_row``).
    """

    def __init__(self, config: Mapping[str, Any], tool_schema: OpenAIFunctionToolSchema | None = None):
        self.registry = _registry(config.get("factory", DEFAULT_FACTORY))
        self.tool_name = config["tool"]
        if self.tool_name not in self.registry.names:
            raise ValueError(f"unknown tool {self.tool_name!r}; the registry has {list(self.registry.names)}")
        self.return_images = bool(config.get("return_images", True))
        self._created: dict[str, dict[str, Any]] = {}
        super().__init__(dict(config), tool_schema)

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        schema = next(
            s for s in self.registry.schemas(ToolContext(task_id="")) if s["function"]["name"] == self.tool_name
        )
        return OpenAIFunctionToolSchema.model_validate(schema)

    async def create(
        self, instance_id: str | None = None, create_kwargs: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> tuple[str, ToolResponse]:
        instance_id = instance_id or uuid4().hex
        self._created[instance_id] = dict(create_kwargs or {})
        return instance_id, ToolResponse()

    def _trajectory(self, instance_id: str, agent_data: Any) -> _Trajectory:
        key = (
            agent_data if agent_data is not None else self
        )  # without verl's agent_data: one trajectory per tool object
        state = _TRAJECTORIES.get(key)
        if state is None:
            created = self._created.get(instance_id, {})
            images = _prompt_images(agent_data) or list(
                (getattr(agent_data, "tools_kwargs", None) or {}).get(IMAGES_KEY) or []
            )
            named = [NamedImage(task_image_name(k), bytes(data)) for k, data in enumerate(images, start=1)]
            state = _TRAJECTORIES[key] = _Trajectory(
                str(created.get("task_id", "")), int(created.get("turn_index", 0)), named
            )
        return state

    async def execute(
        self, instance_id: str, parameters: Mapping[str, Any] | str, agent_data: Any = None, **kwargs: Any
    ) -> tuple[ToolResponse, float, dict[str, Any]]:
        """Run the call in the trajectory's context. Never raises on bad arguments (the error is the text)."""
        state = self._trajectory(instance_id, agent_data)
        async with state.lock:  # parallel calls of one trajectory number their images in order
            context = ToolContext(
                task_id=state.task_id,
                images=tuple(state.images),
                next_image_index=state.tool_images.next_index,
                turn_index=state.turn_index,
            )
            result = await asyncio.to_thread(self.registry.call, self.tool_name, parameters, context)
            state.calls += 1
            state.failures += result.error is not None
            kept, notes = state.tool_images.admit(result.images)  # checked, named and decoded as the env does
            state.images.extend(asset.named() for asset in kept)
            shown = [asset.pil.convert("RGB") for asset in kept] if self.return_images else []
            text = "".join([result.text, *(f"\n[{note}]" for note in notes), *(f"\n[{a.name}]" for a in kept)])
        response = ToolResponse(text=text, image=shown) if shown else ToolResponse(text=text)
        return response, 0.0, {"latency_s": result.latency_s, "error": result.error is not None}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0  # the episode reward is vtb_rewards.grpo.compute_score

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._created.pop(instance_id, None)


# ---- the project's parsers as a verl tool parser ---------------------------------------------


@ToolParser.register("vtb")
class VTBToolParser(ToolParser):
    """Reads calls in any format the env understands; unreadable calls reach verl with their raw text as arguments."""

    async def extract_tool_calls(
        self, responses_ids: list[int], tools: list[OpenAIFunctionToolSchema] | None = None
    ) -> tuple[str, list[FunctionCall]]:
        text = self.tokenizer.decode(responses_ids, skip_special_tokens=True)
        parsed = parse_action(text)
        calls = [
            FunctionCall(
                name=call.name or "invalid_tool_call",
                arguments=json.dumps(call.arguments) if isinstance(call.arguments, dict) else str(call.arguments),
                tool_call_id=call.call_id,
            )
            for call in parsed.calls
        ]
        return parsed.content, calls
