"""The tool interface: what the environment calls and what a tool returns.

A tool is a name, an OpenAI function schema (exactly the benchmark's, see ``schemas``), and
``run(arguments, context) -> ToolResult``. ``ToolRegistry.call`` validates the arguments
against the schema first and turns every failure into an error result: a tool never raises
into the environment.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import jsonschema
from PIL import Image

from vtb_env.tasks import decode_image


@dataclass(frozen=True)
class NamedImage:
    """An image with the file name the model uses to refer to it (``image_1.png``, ``transformed_image_2.png``).

    A tool that ran untrusted code returns its images ``checked`` (decoded and made plain inside the
    sandbox call: ``vtb_env.sandbox.normalize``), with the ``notes`` of what that changed, or with the
    ``refusal`` that kept one from being shown; ``vtb_env.tool_images`` checks every other image itself.
    """

    name: str
    data: bytes = field(repr=False)  # encoded (PNG/JPEG) bytes; empty when refused
    checked: bool = False
    notes: tuple[str, ...] = ()
    refusal: str | None = None

    def open(self) -> Image.Image:
        return decode_image(self.data)


@dataclass(frozen=True)
class ToolContext:
    """What a tool may see of the episode: the images visible so far, and nothing secret.

    Never put golden answers, rubrics or keys here: this object reaches the sandbox.
    """

    task_id: str
    images: tuple[
        NamedImage, ...
    ] = ()  # every image visible so far, named image_<k>.png (k from 1 over the task) and transformed_image_<i>.png
    next_image_index: int = 0  # next free index i for transformed_image_<i>.png (the paper counts from 0)
    turn_index: int = 0


@dataclass
class ToolResult:
    """The outcome of one call. ``text`` is what goes back in the tool message (JSON for text tools)."""

    text: str
    images: list[NamedImage] = field(default_factory=list)
    error: str | None = None
    latency_s: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None

    @classmethod
    def failure(cls, message: str, **meta: Any) -> "ToolResult":
        return cls(text=json.dumps({"error": message}), error=message, meta=dict(meta))


class Tool(ABC):
    """Base class: subclasses set ``name`` and ``schema`` and implement ``run``."""

    name: str
    schema: Mapping[str, Any]  # {"type": "function", "function": {"name", "description", "parameters"}}

    @abstractmethod
    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult: ...

    def schema_for(self, context: ToolContext) -> dict[str, Any]:
        """The schema shown to the model this turn (a tool may fill in e.g. the image file list)."""
        return json.loads(json.dumps(self.schema))

    def close(self) -> None:  # noqa: B027 -- a hook with a no-op default: only tools that hold processes override it
        """Release processes or connections; called by the registry's close."""


class ToolRegistry:
    """The tools offered in an episode, by name. Ablations are subsets (``vtb_env.toolsets.ablate``)."""

    def __init__(self, tools: Iterable[Tool]):
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"duplicate tool name {tool.name!r}")
            self._tools[tool.name] = tool

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def schemas(self, context: ToolContext | None = None) -> list[dict[str, Any]]:
        """The function schemas to offer the model (filled in for ``context`` when given)."""
        context = context or ToolContext(task_id="")
        return [tool.schema_for(context) for tool in self._tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __len__(self) -> int:
        return len(self._tools)

    def select(self, names: str | Sequence[str] | None) -> "ToolRegistry":
        """The registry limited to ``names`` (a comma list or a sequence; None: all); unknown names are an error."""
        if names is None:
            return self
        wanted = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        unknown = [n for n in wanted if n not in self._tools]
        if unknown:
            raise ValueError(f"unknown tools {unknown}; the registry has {list(self._tools)}")
        return self.only(*wanted)

    def only(self, *names: str) -> "ToolRegistry":
        return ToolRegistry(self._tools[name] for name in names if name in self._tools)

    def without(self, *names: str) -> "ToolRegistry":
        return ToolRegistry(tool for name, tool in self._tools.items() if name not in names)

    def validate(self, name: str, arguments: Any) -> str | None:
        """The reason a call is invalid, or None. Messages say exactly what was wrong."""
        tool = self._tools.get(name)
        if tool is None:
            return f"unknown tool {name!r}; available tools: {', '.join(self._tools) or 'none'}"
        if not isinstance(arguments, Mapping):
            return f"arguments of {name} must be a JSON object, got {type(arguments).__name__}"
        parameters = tool.schema["function"]["parameters"]
        error = jsonschema.exceptions.best_match(
            jsonschema.Draft202012Validator(parameters).iter_errors(dict(arguments))
        )
        if error is None:
            return None
        where = ".".join(str(p) for p in error.absolute_path) or "arguments"
        if error.validator in ("maxLength", "minLength") and isinstance(error.instance, str):
            # jsonschema quotes the whole value (5,000+ characters of code): say the lengths instead
            bound = "at most" if error.validator == "maxLength" else "at least"
            return (
                f"invalid arguments for {name}: {where}: {len(error.instance)} characters, "
                f"must be {bound} {error.validator_value}"
            )
        return f"invalid arguments for {name}: {where}: {_short(error.message)}"

    def call(self, name: str, arguments: Any, context: ToolContext) -> ToolResult:
        """Validate and run one call; never raises."""
        start = time.perf_counter()
        problem = self.validate(name, arguments)
        if problem is not None:
            result = ToolResult.failure(problem, kind="invalid_call")
        else:
            try:
                result = self._tools[name].run(arguments, context)
            except Exception as exc:  # a tool bug must not crash a rollout
                result = ToolResult.failure(f"{name} failed: {type(exc).__name__}: {exc}", kind="tool_exception")
        result.latency_s = time.perf_counter() - start
        return result

    def close(self) -> None:
        for tool in self._tools.values():
            tool.close()


def _short(message: str, limit: int = 300) -> str:
    return message if len(message) <= limit else message[:limit] + "..."
