"""verl adapter: the benchmark's tools as verl multi-turn tools, and dataset rows for verl.

verl's multi-turn rollout calls, per trajectory and tool, ``create`` -> ``execute`` (per call)
-> ``calc_reward`` -> ``release`` (all async), on tool objects built from a tools YAML::

    tools:
      - class_name: vtb_env.integrations.verl.VTBTool
        config: {type: native, tool: python_image_processing}
        tool_schema: null          # taken from the benchmark's own schema

``VTBTool`` subclasses ``verl.tools.base_tool.BaseTool`` when verl is installed, and is a plain
class with the same methods otherwise (duck-typed, so it is testable without verl). Each
instance holds one trajectory's ``ToolContext``: the task's images named ``image_<k>.png`` and
the images this tool made, ``transformed_image_<i>.png`` -- the env's naming, so the model
sees the same files in verl as in the gymnasium env. The tool runs the real registry tool (the
sandbox for the Python tools). The episode reward is ``rewards.grpo.compute_score`` (verl's
``custom_reward_function``); ``calc_reward`` gives the tool-success share of the trajectory.
"""

from __future__ import annotations

import asyncio
import importlib
import io
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence
from uuid import uuid4

from PIL import Image

from vtb_env.image_names import task_image_name, tool_image_name, turn_image_names
from vtb_env.tasks import Task
from vtb_env.tools.base import NamedImage, ToolContext, ToolRegistry

try:  # verl is optional: without it the adapter is duck-typed against its documented interface
    from verl.tools.base_tool import BaseTool as _Base
    from verl.tools.schemas import OpenAIFunctionToolSchema
except ImportError:  # pragma: no cover - depends on the installation
    _Base, OpenAIFunctionToolSchema = object, None

DATA_SOURCE = "visualtoolbench"
DEFAULT_FACTORY = "vtb_env.tools:default_tools"
_REGISTRIES: dict[str, ToolRegistry] = {}  # one registry (one sandbox) per factory, shared by all tool objects


def _registry(factory: str) -> ToolRegistry:
    if factory not in _REGISTRIES:
        module, _, name = factory.partition(":")
        _REGISTRIES[factory] = getattr(importlib.import_module(module), name)()
    return _REGISTRIES[factory]


def visible_images(task: Task, turn_index: int) -> list[bytes]:
    """The bytes of the images shown up to and including turn ``turn_index`` (``image_1.png``, ...)."""
    return [ref.read_bytes() for turn in task.turns[: turn_index + 1] for ref in turn.images]


@dataclass
class _Trajectory:
    task_id: str
    images: list[NamedImage]
    next_image_index: int = 0
    turn_index: int = 0
    calls: int = 0
    failures: int = 0
    latencies: list[float] = field(default_factory=list)


class VTBTool(_Base):  # type: ignore[misc, valid-type]
    """One benchmark tool (``config["tool"]``) behind verl's ``BaseTool`` interface.

    ``config``: ``tool`` (the tool name), optional ``factory`` (``"module:callable"`` returning a
    ToolRegistry; default ``vtb_env.tools:default_tools``). ``create`` takes ``task_id``,
    ``images`` (the bytes of the images visible so far, in order: ``image_1.png``, ...) and
    ``turn_index`` -- the ``create_kwargs`` that ``verl_row`` writes.
    """

    def __init__(self, config: Mapping[str, Any], tool_schema: Any = None):
        self.registry = _registry(config.get("factory", DEFAULT_FACTORY))
        self.tool_name = config["tool"]
        if self.tool_name not in self.registry.names:
            raise ValueError(f"unknown tool {self.tool_name!r}; the registry has {list(self.registry.names)}")
        self._trajectories: dict[str, _Trajectory] = {}
        if _Base is object:
            self.config, self.tool_schema, self.name = dict(config), tool_schema or self.get_openai_tool_schema(), self.tool_name
        else:  # verl's constructor prints and validates the schema
            super().__init__(dict(config), tool_schema)

    def get_openai_tool_schema(self) -> Any:
        schema = next(s for s in self.registry.schemas(ToolContext(task_id="", images=())) if s["function"]["name"] == self.tool_name)
        return schema if OpenAIFunctionToolSchema is None else OpenAIFunctionToolSchema.model_validate(schema)

    async def create(self, instance_id: str | None = None, task_id: str = "", images: Sequence[bytes] | None = None, turn_index: int = 0, **kwargs: Any) -> str:
        if images is None:
            raise ValueError("create() needs the task's images (create_kwargs: {task_id, images}); see vtb_env.integrations.verl.verl_row")
        instance_id = instance_id or str(uuid4())
        named = [NamedImage(task_image_name(k), bytes(data)) for k, data in enumerate(images, start=1)]
        self._trajectories[instance_id] = _Trajectory(task_id, named, turn_index=int(turn_index))
        return instance_id

    async def execute(self, instance_id: str, parameters: Mapping[str, Any] | str, **kwargs: Any) -> tuple[dict[str, Any], float, dict[str, Any]]:
        """Run the call; returns (``{"text", "image"?}``, step reward 0.0, metrics). Never raises on bad arguments."""
        state = self._trajectories[instance_id]
        context = ToolContext(task_id=state.task_id, images=tuple(state.images), next_image_index=state.next_image_index, turn_index=state.turn_index)
        result = await asyncio.to_thread(self.registry.call, self.tool_name, parameters, context)
        state.calls += 1
        state.failures += result.error is not None
        state.latencies.append(result.latency_s)
        text, images = result.text, []
        for image in result.images:  # rename to the env's convention, in order
            name = tool_image_name(state.next_image_index)
            state.next_image_index += 1
            state.images.append(NamedImage(name, image.data))
            images.append(Image.open(io.BytesIO(image.data)).convert("RGB"))
            if image.name != name:
                text += f"\n[{image.name} is shown as {name}]"
        response: dict[str, Any] = {"text": text}
        if images:
            response["image"] = images
        return response, 0.0, {"latency_s": result.latency_s, "error": result.error is not None}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """Share of this trajectory's calls of this tool that succeeded (0.0 when none)."""
        state = self._trajectories[instance_id]
        return (state.calls - state.failures) / state.calls if state.calls else 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._trajectories.pop(instance_id, None)


def tools_config(tool_names: list[str], factory: str = DEFAULT_FACTORY) -> dict[str, Any]:
    """The verl tools YAML content (as a dict) offering ``tool_names``."""
    return {"tools": [{"class_name": f"{__name__}.VTBTool", "config": {"type": "native", "tool": name, "factory": factory}, "tool_schema": None} for name in tool_names]}


def verl_row(task: Task, tool_names: list[str], *, turn_index: int = 0, system_prompt: str | None = None) -> dict[str, Any]:
    """One verl dataset row for a task turn: prompt, images, reward ground truth and tools kwargs."""
    task_json = json.dumps(task.to_dict())
    create_kwargs = {"task_id": task.id, "images": visible_images(task, turn_index), "turn_index": turn_index}
    turn = task.turns[turn_index]
    names = turn_image_names(task, turn_index)
    content = turn.prompt + "".join(f"\n[{name}]<image>" for name in names)
    prompt = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + [{"role": "user", "content": content}]
    return {
        "data_source": DATA_SOURCE,
        "prompt": prompt,
        "images": [{"bytes": ref.read_bytes()} for ref in turn.images],
        "reward_model": {"style": "rule", "ground_truth": task_json},
        "extra_info": {
            "turn_index": turn_index,
            "need_tools_kwargs": True,
            "tools_kwargs": {name: {"create_kwargs": create_kwargs} for name in tool_names},
        },
    }
