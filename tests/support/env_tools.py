"""Small real tools and tasks for the environment's tests (no sandbox needed).

Module-level classes so that AsyncVectorEnv can pickle them into worker processes.
"""

from __future__ import annotations

import io
import json
import time
from typing import Any, Mapping

from PIL import Image

from vtb_env.tasks import ImageRef, Rubric, Task, Turn
from vtb_env.tools.base import NamedImage, Tool, ToolContext, ToolRegistry, ToolResult
from vtb_rewards import EpisodeReward, default_reward
from vtb_rewards.judge.judge import Judge


def png(width: int = 64, height: int = 48, color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buffer, format="PNG")
    return buffer.getvalue()


CALCULATOR_SCHEMA = {  # the tool list an agent test offers (no tool runs: the agent only sees it)
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "math",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
    },
}


def _function(name: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"test {name}",
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


class ImageMakerTool(Tool):
    """Stands in for python_image_processing: one image per ``save`` in the code, colours from the
    visible image count; reports what it saw so tests can check the ToolContext, and the ``image_work``
    the real tool's sandbox would record for such a call (it reads the visible images)."""

    name = "python_image_processing"
    schema = _function(name, {"code": {"type": "string", "minLength": 1, "maxLength": 5000}}, ["code"])

    def __init__(self, size: tuple[int, int] = (32, 24)):
        self.size = size

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        count = arguments["code"].count("save")
        names = [f"transformed_image_{context.next_image_index + i}.png" for i in range(count)]
        images = [
            NamedImage(name, png(*self.size, color=(10 * (len(context.images) + i) % 256, 100, 150)))
            for i, name in enumerate(names)
        ]
        visible = [image.name for image in context.images]
        work = {"read": visible, "new_images": count, "printed": False}
        return ToolResult(
            text=json.dumps({"saved": names, "visible": visible}), images=images, meta={"image_work": work}
        )


class EchoCalculator(Tool):
    name = "calculator"
    schema = _function(name, {"expression": {"type": "string"}}, ["expression"])

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        if arguments["expression"] == "fail":
            return ToolResult.failure("cannot evaluate 'fail'", kind="tool_error")
        return ToolResult(text=json.dumps({"result": arguments["expression"]}))


class SleepySearch(Tool):
    """A web_search whose latency is the query's number of seconds (``"sleep 0.5"``)."""

    name = "web_search"
    schema = _function(
        name, {"query": {"type": "string"}, "num_results": {"type": "integer", "minimum": 1, "maximum": 10}}, ["query"]
    )

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        words = arguments["query"].split()
        if len(words) == 2 and words[0] == "sleep":
            time.sleep(float(words[1]))
        return ToolResult(
            text=json.dumps({"results": [{"title": arguments["query"], "url": "http://127.0.0.1/", "snippet": ""}]})
        )


def small_tools() -> ToolRegistry:
    return ToolRegistry([ImageMakerTool(), EchoCalculator(), SleepySearch()])


def make_task(task_id: str = "t1", turns: int = 1, images_per_turn: int = 1) -> Task:
    """A task whose turn t asks for the number 10*(t+1) (a programmatic number check)."""
    built = []
    k = 1
    for t in range(turns):
        refs = []
        for _ in range(images_per_turn):
            refs.append(ImageRef(name=f"src_{k}.jpg", data=png(40 + k, 30, color=(k * 40 % 256, 0, 0))))
            k += 1
        rubric = Rubric(
            id=f"{task_id}-r{t}",
            description=f"says {10 * (t + 1)}",
            weight=5,
            check={"type": "number", "value": 10 * (t + 1)},
        )
        built.append(
            Turn(
                prompt=f"Question {t + 1} of {task_id}?",
                images=tuple(refs),
                golden_answer=f"Golden {10 * (t + 1)}",
                rubrics=(rubric,),
            )
        )
    return Task(id=task_id, turns=tuple(built), prompt_category="maths", eval_focus="region_switch_qa")


def value_task(task_id: str, value: int, turns: int) -> Task:
    """A task whose every turn asks for ``value`` (exact number check, weight 5) and shows one 48x32 image."""
    return Task(
        id=task_id,
        turns=tuple(
            Turn(
                prompt=f"Question {t + 1}: what is the value?",
                images=(ImageRef(name=f"{task_id}_{t}.png", data=png(48, 32, color=(40 * t, 90, 200))),),
                golden_answer=f"It is {value}.",
                rubrics=(
                    Rubric(
                        id=f"{task_id}-{t}",
                        description=f"says {value}",
                        weight=5,
                        check={"type": "number", "value": value},
                    ),
                ),
            )
            for t in range(turns)
        ),
    )


def hermes(name: str, **arguments: Any) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def exact_reward() -> EpisodeReward:
    """The environment's default reward, judged by exact rubric checks only (never a judge server,
    whatever ``VTB_JUDGE_*`` says), so that tests are hermetic."""
    return default_reward(judge=Judge(backend=None))


def unserializable_actions():
    """Dict actions that JSON cannot encode: a tuple key, a 100,000-deep nesting, a reference cycle."""
    deep: dict = {"content": "hi"}
    for _ in range(100_000):
        deep = {"role": "assistant", "content": deep}
    cyclic = {"role": "assistant"}
    cyclic["self"] = cyclic
    return [
        ({(1, 2): "x", "content": "hi"}, "TypeError"),
        (deep, "RecursionError"),
        (cyclic, "ValueError: Circular reference"),
    ]
