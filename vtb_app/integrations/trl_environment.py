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
``train_environment_factory(args)`` runs that loop from the flags ``vtb_app.integrations.trl_args.parse_args``
reads: the real-checkpoint flags apply as on the ``rollout_func`` path, except those only that path has
(``--kv-reuse``, ``--label-probes``), which exit with the reason. A text policy with an observation view
(``--image-view ocr``) is shown each picture's words, in the rows' prompts and in tool results
(``view=``). Re-exported by ``vtb_app.integrations.trl``.
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
from vtb_env.toolsets import ablate

View = Callable[[dict[str, Any]], dict[str, Any]]

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

    def __init__(self, env: VisualToolBenchEnv, show_images: bool, view: View | None = None):
        self.env, self.show_images, self.view = env, show_images, view
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
        if self.view is not None:  # the tool's pictures as the view reads them (text parts a template can mark)
            return [part for m in self.view(observation)["messages"][messages + 1 :] for part in _text_parts(m)]
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
    images as content blocks (VLM policies; TRL refuses images for a text policy); ``view`` (a text policy's
    observation view, e.g. ``vtb_env.ocr_view.OcrView``) is applied to the rows' prompts and to tool results,
    which then come as text parts (an OCR page keeps its ``ocr`` name for the chat template). The tools offered
    are those ``config.tool_set`` keeps (``none``: no tool method, TRL generates without its tool loop).
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        tools: ToolRegistry | None = None,
        config: EnvConfig | None = None,
        *,
        show_images: bool = False,
        view: View | None = None,
    ):
        if view is not None and show_images:
            raise ValueError("an observation view is for a text policy; show_images is for a VLM: pick one")
        multi = [t.id for t in tasks if len(t.turns) > 1]
        if multi:
            raise ValueError(
                f"environment_factory handles single-turn tasks only ({len(multi)} multi-turn, e.g. {multi[0]!r}); "
                "use the rollout_func path"
            )
        if tools is None:
            from vtb_env.tools import default_tools

            tools = default_tools()
        self.tasks, self.tools, self.show_images, self.view = list(tasks), tools, show_images, view
        self.config = config or EnvConfig.preset("default", image_parts="name")
        schemas = ablate(tools, self.config.tool_set).schemas(ToolContext(task_id=""))
        self.environment_class = type(
            "VisualToolBenchTools", (VTBEnvironment,), {s["function"]["name"]: _tool_method(s) for s in schemas}
        )

    def __call__(self) -> VTBEnvironment:
        return self.environment_class(
            VisualToolBenchEnv(tasks=self.tasks, tools=self.tools, config=self.config), self.show_images, self.view
        )

    def dataset(self) -> Any:
        """TRL rows: the env's system prompt and first user message (images as content parts when shown),
        ``task_id``."""
        from datasets import Dataset

        if self.view is not None:
            return Dataset.from_list(self._viewed_rows())
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

    def _viewed_rows(self) -> list[dict[str, Any]]:
        """Rows whose prompt is the env's first observation through ``view``, every content as text parts."""
        env = VisualToolBenchEnv(tasks=self.tasks, tools=self.tools, config=self.config)
        try:
            rows = []
            for task in self.tasks:
                observation, _ = env.reset(options={"task_id": task.id})
                messages = self.view(observation)["messages"]
                prompt = [{"role": m["role"], "content": _text_parts(m)} for m in messages]
                rows.append({"prompt": prompt, "task_id": task.id})
            return rows
        finally:
            env.close()


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


def _text_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's content as text parts: an OCR page keeps its ``ocr`` name, an unread image becomes its name."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content, "ocr": None}]
    return [
        {"type": "text", "text": part.get("text", ""), "ocr": part.get("ocr")}
        if part.get("type") == "text"
        else {"type": "text", "text": f"[{part.get('name', 'image')}]", "ocr": None}
        for part in content or []
    ]


def _final_text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    last = next((m for m in reversed(completion) if m.get("role") == "assistant"), {"content": ""})
    return _text(last)


def hermes_response_template(start_anchor: str, end_pattern: str) -> dict[str, Any]:
    """A TRL response template for hermes calls (``<tool_call>{json}</tool_call>``) in an assistant turn that
    opens with ``start_anchor`` and ends with ``end_pattern`` (a regex): what TRL parses the policy's calls with."""
    return {
        "defaults": {"role": "assistant"},
        "start_anchor": start_anchor,
        "fields": {
            "tool_calls": {
                "open": "<tool_call>",
                "close_pattern": r"</tool_call>\s*",
                "repeats": True,
                "content": "json",
                "transform": {"type": "function", "function": "{content}"},
            },
            "content": {"close_pattern": end_pattern, "content": "text"},
        },
    }


# the shipped chatml-text template writes hermes calls in ChatML turns (Qwen3's layout, which TRL knows only by
# Qwen's own template text)
CHATML_TEXT_RESPONSE_TEMPLATE = hermes_response_template("<|im_start|>assistant\n", r"<\|im_end\|>\s*")


def refuse_rollout_only_flags(args: Any) -> None:
    """Exit with the reason on a flag only the ``rollout_func`` path implements."""
    if getattr(args, "kv_reuse", False):
        raise SystemExit(
            "--kv-reuse keeps the KV cache of the project's own generator (rollout_func path); TRL's tool loop "
            "(environment_factory) generates with TRL's: drop --kv-reuse"
        )
    if int(getattr(args, "label_probes", 0) or 0):
        raise SystemExit("--label-probes rescores groups in the rollout_func path; environment_factory has no probes")
    budget = getattr(args, "max_episode_tokens", None)
    if budget is not None and budget != _default_episode_tokens():
        raise SystemExit(
            "--max-episode-tokens bounds the rollout_func path's episodes; TRL's tool loop (environment_factory) caps "
            "the whole completion with --max-new-tokens (max_completion_length): drop --max-episode-tokens"
        )


def _default_episode_tokens() -> int:
    import dataclasses

    from vtb_app.integrations.trl_args import VTBTrainArguments

    return next(f.default for f in dataclasses.fields(VTBTrainArguments) if f.name == "max_episode_tokens")


def set_response_template(processing_class: Any) -> None:
    """Give a tokenizer rendering with the shipped ``chatml-text`` template the response template TRL parses calls
    with (a template set already is kept)."""
    from vtb_agents.chat_render import chat_template_text

    tokenizer = getattr(processing_class, "tokenizer", processing_class)
    if getattr(tokenizer, "response_template", None) is None and tokenizer.chat_template == chat_template_text(
        "chatml-text"
    ):
        tokenizer.response_template = CHATML_TEXT_RESPONSE_TEMPLATE


def train_environment_factory(
    args: Any,
    *,
    tasks: Sequence[Task] | None = None,
    tools: ToolRegistry | None = None,
    callbacks: Sequence[Any] = (),
) -> Any:
    """GRPO through TRL's own tool loop from parsed flags (``trl_args.parse_args``); returns the trainer after
    ``train()``. Tasks, tools and env as ``run_tasks`` / ``run_tools`` / ``run_env_config`` make them, the
    checkpoint as ``trl_model.load_policy`` loads it (template, view, ``--ocr-cache``), ``--lora-rank`` /
    ``--train-layers`` / ``--bf16-autocast`` as on the ``rollout_func`` path; the output is a plain checkpoint.
    ``callbacks``: ``transformers.TrainerCallback`` objects for the trainer."""
    import os

    from trl import GRPOTrainer

    from vtb_agents.chat_render import policy_view
    from vtb_app.integrations.trl_args import run_env_config, run_tasks, run_tools
    from vtb_app.integrations.trl_model import (
        load_run_policy,
        ocr_cache_file,
        prepare_trainable,
        save_trained,
        trainable_parts,
    )

    refuse_rollout_only_flags(args)
    parts = trainable_parts(args)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is marked experimental in TRL
    tasks, tools, config = run_tasks(args, tasks), run_tools(args, tools), run_env_config(args)
    policy = load_run_policy(args)
    set_response_template(policy.processing_class)
    with ocr_cache_file(getattr(args, "ocr_cache", None)):
        try:
            factory = VTBEnvironmentFactory(
                tasks,
                tools,
                config,
                show_images=policy.is_vlm,
                view=None if policy.is_vlm else policy_view(policy.processing_class),
            )
        except ValueError as exc:
            raise SystemExit(f"{exc} (or keep single-turn tasks: --task-filter turns=1)") from None
        trainer = GRPOTrainer(
            model=prepare_trainable(policy.model, parts),
            reward_funcs=[vtb_env_reward],
            args=args.grpo,
            train_dataset=factory.dataset(),
            processing_class=policy.processing_class,
            environment_factory=factory,
            peft_config=parts.peft_config(),
            callbacks=list(callbacks) or None,
        )
        trainer.train()
    save_trained(trainer, policy.processing_class, parts, args.output_dir)
    return trainer


__all__ = [
    "CHATML_TEXT_RESPONSE_TEMPLATE",
    "hermes_response_template",
    "VTBEnvironment",
    "VTBEnvironmentFactory",
    "refuse_rollout_only_flags",
    "set_response_template",
    "train_environment_factory",
    "vtb_env_reward",
]
