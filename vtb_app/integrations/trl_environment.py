"""TRL's own tool loop (``GRPOTrainer(environment_factory=...)``) on the environment: single-turn tasks.

    factory = VTBEnvironmentFactory(tasks)               # single-turn tasks only; show_images=True for a VLM
    GRPOTrainer(model=..., args=GRPOConfig(...), train_dataset=factory.dataset(),
                reward_funcs=[vtb_env_reward], environment_factory=factory)

Each rollout gets a ``VisualToolBenchEnv`` episode: ``reset(**row)`` starts the row's task, each
benchmark tool is a public method (its schema is the registry's), called by TRL with the
arguments it parsed; the env runs the call (sandboxed, capped, images named
``transformed_image_<i>.png``) and the method returns the tool message (text, plus the images as
content blocks for a VLM). ``vtb_env_reward`` gives each env the final answer (TRL's
``get_reward()`` takes no argument and never sees it) and returns the env's reward.
Re-exported by ``vtb_app.integrations.trl``.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, Callable, Sequence

from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv
from vtb_env.image_names import turn_image_names
from vtb_env.prompts import resolve_system_prompt
from vtb_env.tasks import Task
from vtb_env.tools.base import ToolContext, ToolRegistry

_JSON_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict}


def _tool_method(schema: dict[str, Any]) -> Callable[..., Any]:
    """A method with the tool's name, typed parameters and a Google-style docstring (what TRL reads)."""
    function = schema["function"]
    name, params = function["name"], function.get("parameters", {})
    required = set(params.get("required", ()))
    properties = params.get("properties", {})

    def call(self: "VTBEnvironment", **arguments: Any) -> Any:
        return self._call_tool(name, arguments)

    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {"return": str}
    for key, spec in properties.items():
        kind = _JSON_TYPES.get(spec.get("type"), str)
        annotations[key] = kind if key in required else (kind | None)
        default = inspect.Parameter.empty if key in required else spec.get("default")
        parameters.append(
            inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotations[key])
        )
    args_doc = "".join(
        f"\n    {key}: {' '.join(str(spec.get('description', key)).split())}" for key, spec in properties.items()
    )
    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"{' '.join(function.get('description', name).split())}\n\nArgs:{args_doc}\n"
    call.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    call.__annotations__ = annotations
    return call


class VTBEnvironment:
    """One rollout's environment for TRL's ``environment_factory`` (tool methods are added per registry)."""

    def __init__(self, env: VisualToolBenchEnv, show_images: bool):
        self.env, self.show_images = env, show_images
        self.reward: float | None = None
        self.info: dict[str, Any] = {}
        self._done = False
        self._seen = (0, 0)  # messages and images in the last observation

    def reset(self, task_id: str, **row: Any) -> None:
        """Start the row's task (its prompt and images are in the dataset row, as TRL renders them)."""
        observation, _ = self.env.reset(options={"task_id": task_id})
        self.reward, self.info, self._done = None, {}, False
        self._seen = (len(observation["messages"]), len(observation["images"]))

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        if self._done:
            return "The episode is over: tools are no longer available."
        try:
            encoded: Any = json.dumps(arguments)
        except (ValueError, TypeError, RecursionError):  # nested past what JSON encodes: the env records it as text
            encoded = arguments
        action = {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": name, "arguments": encoded}}],
        }
        observation, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            self._finish(reward, info)
        messages, images = self._seen
        self._seen = (len(observation["messages"]), len(observation["images"]))
        text = "\n".join(_text(m) for m in observation["messages"][messages + 1 :])  # after the env's copy of the call
        images = observation["images"][images:]
        if not self.show_images or not images:
            return text
        return [{"type": "text", "text": text}, *({"type": "image", "image": image.convert("RGB")} for image in images)]

    def _answer(self, text: str) -> float:
        """Give the final answer (the completion's last assistant text) and return the env's reward (private:
        every public method is a tool for TRL)."""
        if not self._done:
            observation, reward, terminated, truncated, info = self.env.step(text)
            if not (terminated or truncated):  # the reply still called a tool, or turns are left
                _, reward, _, _, info = self.env.truncate("the completion ended before the episode")
            self._finish(reward, info)
        return float(self.reward or 0.0)

    def _finish(self, reward: float, info: dict[str, Any]) -> None:
        self.reward, self.info, self._done = float(reward), info, True


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(
        part.get("text", "") if part.get("type") == "text" else f"[{part.get('name', 'image')}]"
        for part in content or []
    )


class VTBEnvironmentFactory:
    """``environment_factory`` for ``GRPOTrainer``: one ``VTBEnvironment`` per call, tools shared (one sandbox).

    ``tasks`` must be single-turn (TRL's loop has one user turn); ``show_images`` returns tool
    images as content blocks (VLM policies; TRL refuses images for a text policy).
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        tools: ToolRegistry | None = None,
        config: EnvConfig | None = None,
        *,
        show_images: bool = False,
    ):
        multi = [t.id for t in tasks if len(t.turns) > 1]
        if multi:
            raise ValueError(
                f"environment_factory handles single-turn tasks only ({len(multi)} multi-turn, e.g. {multi[0]!r}); "
                "use the rollout_func path"
            )
        if tools is None:
            from vtb_env.tools import default_tools

            tools = default_tools()
        self.tasks, self.tools, self.show_images = list(tasks), tools, show_images
        self.config = config or EnvConfig.preset("default", image_parts="name")
        schemas = tools.schemas(ToolContext(task_id=""))
        self.environment_class = type(
            "VisualToolBenchTools", (VTBEnvironment,), {s["function"]["name"]: _tool_method(s) for s in schemas}
        )

    def __call__(self) -> VTBEnvironment:
        return self.environment_class(
            VisualToolBenchEnv(tasks=self.tasks, tools=self.tools, config=self.config), self.show_images
        )

    def dataset(self) -> Any:
        """TRL rows: the env's system prompt and first user message (images as content parts when shown),
        ``task_id``."""
        from datasets import Dataset

        system = resolve_system_prompt(self.config.system_prompt)
        rows = []
        for task in self.tasks:
            turn = task.turns[0]
            names = "".join(f"\n[{name}]" for name in turn_image_names(task, 0))
            if self.show_images:
                content: Any = [
                    *({"type": "image"} for _ in turn.images),
                    {"type": "text", "text": turn.prompt + names},
                ]
            else:
                content = turn.prompt + names
            # with images every content is a list of parts (Arrow cannot mix strings and lists in one column)
            system_content: Any = [{"type": "text", "text": system}] if self.show_images else system
            row = {
                "prompt": ([{"role": "system", "content": system_content}] if system else [])
                + [{"role": "user", "content": content}],
                "task_id": task.id,
            }
            if self.show_images:
                row["images"] = [ref.open().convert("RGB") for ref in turn.images]
            rows.append(row)
        return Dataset.from_list(rows)


def vtb_env_reward(
    completions: list, environments: list[VTBEnvironment], log_metric: Callable | None = None, **_: Any
) -> list[float]:
    """TRL reward function for ``VTBEnvironmentFactory``: each env gets the final answer and returns its reward."""
    rewards = [env._answer(_final_text(completion)) for completion, env in zip(completions, environments, strict=True)]
    if log_metric is not None:
        components: dict[str, list[float]] = {}
        for env in environments:
            for key, value in (env.info.get("reward_components") or {}).items():
                components.setdefault(key, []).append(float(value))
        for key, values in sorted(components.items()):
            log_metric(f"vtb/reward/{key}", sum(values) / len(values))
    return rewards


def _final_text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    last = next((m for m in reversed(completion) if m.get("role") == "assistant"), {"content": ""})
    return _text(last)


__all__ = ["VTBEnvironment", "VTBEnvironmentFactory", "vtb_env_reward"]
