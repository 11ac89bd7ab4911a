"""Cold-start SFT data: each task's reference trajectory played for real in the env, in TRL's conversational format.

For every task, ``reference_conversation`` resets a ``VisualToolBenchEnv`` on it and, turn by
turn, steps the turn's reference tool calls (``Turn.tool_trajectory``: the synthetic generator's
``[{"tool", "arguments", "purpose"}, ...]``), one call per assistant message whose text is the
call's purpose, then the turn's golden answer. The tools run as in any episode (sandboxed code,
the offline corpus and weather archive), so each tool message holds the real stdout and each
image a call saves comes back as ``transformed_image_<i>.png`` in the user message that follows
its tool message; a tool-redundant twin (no reference calls) answers directly.

The row is TRL's conversational format for vision-language SFT: ``messages`` (content parts with
``{"type": "image"}`` placeholders, assistant ``tool_calls`` with ``arguments`` as objects, tool
messages with the tool's ``name``), ``images`` (one per placeholder, in order), ``tools`` (the
offered schemas, JSON text), plus ``task_id``, ``mode_label`` and ``tool_calls``. Given a ``view``
(``vtb_env.ocr_view.OcrView``), the rows are for a text policy: each image part is the text part the
view makes of it (the words read in the image) and there is no ``images`` column.

Calls past the env's cap are left out (an episode under that cap ends there). A trajectory that cannot be
replayed (unknown tool, a call that errors) raises ``ReferenceReplayError``; ``export_sft`` skips that task
and reports it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv
from vtb_env.observation import map_image_parts
from vtb_env.tasks import Task
from vtb_env.tools.base import ToolRegistry

SFT_FILE = "sft.parquet"
View = Callable[[dict[str, Any]], dict[str, Any]]  # an observation as a policy is shown it (vtb_env.ocr_view)


class ReferenceReplayError(ValueError):
    """A task's reference trajectory did not replay cleanly in the env."""


def reference_calls(task: Task, turn_index: int) -> list[dict[str, Any]]:
    """The turn's reference calls as ``{"tool", "arguments", "purpose"}`` dicts (checked)."""
    raw = task.turns[turn_index].tool_trajectory_raw
    calls = task.turns[turn_index].tool_trajectory if raw.strip() else []
    if not isinstance(calls, list) or not all(
        isinstance(c, dict) and isinstance(c.get("tool"), str) and isinstance(c.get("arguments"), dict) for c in calls
    ):
        raise ReferenceReplayError(
            f"task {task.id} turn {turn_index + 1}: the reference trajectory is not a list of "
            '{"tool": name, "arguments": {...}} calls'
        )
    return calls


def _no_reward(task: Task, record: Any) -> tuple[float, dict[str, float]]:
    return 0.0, {}  # the replay is data, not an evaluation: no judge, no reward layer


def reference_conversation(env: VisualToolBenchEnv, task: Task, view: View | None = None) -> dict[str, Any]:
    """Play ``task``'s reference trajectory and golden answers in ``env``; the SFT row (module doc).

    ``env`` must hold the task and show images by name (``EnvConfig(image_parts="name")``). A turn plays its
    reference calls up to the env's cap (``max_tool_calls`` per turn or per task, ``cap_scope``) and leaves the
    rest out: past the cap an episode ends, so the row shows what an episode under that cap can do. ``view``: the
    dialogue as a text policy is shown it (``vtb_env.ocr_view.OcrView``: the images' words as text parts);
    the row then has no images.
    """
    if env.config.image_parts != "name":
        raise ValueError("reference_conversation needs an env with EnvConfig(image_parts='name')")
    observation, _ = env.reset(options={"task_id": task.id})
    tools = observation["tools"]
    n_calls = 0
    for t, turn in enumerate(task.turns):
        for call in reference_calls(task, t)[: _calls_allowed(env.config, n_calls)]:
            if call["tool"] not in env.tools:
                raise ReferenceReplayError(f"task {task.id} turn {t + 1}: tool {call['tool']!r} is not offered")
            n_calls += 1
            action = {
                "role": "assistant",
                "content": str(call.get("purpose") or ""),
                "tool_calls": [
                    {
                        "id": f"call_{n_calls}",
                        "type": "function",
                        "function": {"name": call["tool"], "arguments": json.dumps(call["arguments"])},
                    }
                ],
            }
            observation, _, terminated, truncated, info = env.step(action)
            record = info["record"].turns[-1].steps[-1].tool_calls[-1]
            if record.error is not None or terminated or truncated:
                why = record.error or "the episode ended"
                raise ReferenceReplayError(f"task {task.id} turn {t + 1}: reference call {call['tool']} failed: {why}")
        observation, _, done, truncated, info = env.step(turn.golden_answer)
        if truncated or done != (t == len(task.turns) - 1):
            raise ReferenceReplayError(f"task {task.id} turn {t + 1}: the golden answer did not close the turn")
    images = env.tool_context().images  # the dialogue's images with their bytes, in image-part order
    if [image.name for image in images] != observation["image_names"]:
        raise ReferenceReplayError(f"task {task.id}: the dialogue's images and image parts disagree")
    row = {
        "task_id": task.id,
        "mode_label": task.mode_label or "",
        "tool_calls": n_calls,
        "messages": trl_messages((view(observation) if view is not None else observation)["messages"]),
        "tools": json.dumps(tools, ensure_ascii=False),
    }
    if view is None:
        row["images"] = [{"bytes": image.data, "path": image.name} for image in images]
    return row


def _calls_allowed(config: EnvConfig, calls_so_far: int) -> int:
    """How many of a turn's reference calls the env's cap lets run: a replay teaches what an episode can do."""
    return config.max_tool_calls if config.cap_scope == "turn" else max(0, config.max_tool_calls - calls_so_far)


def trl_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The env's observation messages in TRL's format: content as a list of parts (``{"type": "image"}``
    placeholders), tool-call arguments as objects, each tool message named after its call's tool.

    Every content is a list: TRL 1.16's ``prepare_multimodal_messages`` puts all the images before the
    first user message whose content is a string, so a later text-only user turn would get them all.
    """
    names: dict[str, str] = {}
    converted = []
    for message in map_image_parts(messages, lambda part, index: {"type": "image"}):
        if isinstance(message.get("content"), str):
            message = {
                **message,
                "content": [{"type": "text", "text": message["content"]}] if message["content"] else [],
            }
        if message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                function = call["function"]
                names[call["id"]] = function["name"]
                calls.append({**call, "function": {**function, "arguments": json.loads(function["arguments"])}})
            message = {**message, "tool_calls": calls}
        elif message["role"] == "tool":
            message = {**message, "name": names.get(message.get("tool_call_id", ""), "")}
        converted.append(message)
    return converted


def sft_env_config(**overrides: Any) -> EnvConfig:
    """The default preset showing images by name (what ``reference_conversation`` needs)."""
    return EnvConfig.preset("default", **{"image_parts": "name", **overrides})


def sft_rows(
    tasks: Sequence[Task], tools: ToolRegistry, config: EnvConfig | None = None, view: View | None = None
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """One row per task whose reference replays cleanly, and ``(task_id, why)`` for each skipped task."""
    env = VisualToolBenchEnv(tasks=list(tasks), tools=tools, reward=_no_reward, config=config or sft_env_config())
    rows, skipped = [], []
    for task in tasks:
        try:
            rows.append(reference_conversation(env, task, view))
        except ReferenceReplayError as exc:
            skipped.append((task.id, str(exc)))
    return rows, skipped


def write_sft_parquet(rows: Iterable[dict[str, Any]], path: str | Path) -> Path:
    """Write rows as a Hugging Face dataset parquet (``datasets.load_dataset("parquet", ...)`` gives them back:
    ``images`` as PIL images, ``messages`` as the same dicts). Rows made through a text view have no ``images``."""
    try:
        from datasets import Dataset, Features, Image, Json, List, Value
    except ImportError as exc:
        raise ImportError(
            "writing SFT data needs the `datasets` package with its Json feature (pip install 'vtb-gym[train]')"
        ) from exc
    rows = list(rows)
    columns = {
        "task_id": Value("string"),
        "mode_label": Value("string"),
        "tool_calls": Value("int32"),
        "messages": List(Json()),
        "images": List(Image()),
        "tools": Value("string"),
    }
    if rows and "images" not in rows[0]:
        del columns["images"]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    Dataset.from_list(rows, features=Features(columns)).to_parquet(str(path))
    return path


def export_sft(
    tasks: Sequence[Task],
    out: str | Path,
    tools: ToolRegistry,
    config: EnvConfig | None = None,
    view: View | None = None,
) -> tuple[Path, int, list[tuple[str, str]]]:
    """``out``/sft.parquet from ``sft_rows``; returns the path, the row count and the skipped tasks."""
    rows, skipped = sft_rows(tasks, tools, config, view)
    return write_sft_parquet(rows, Path(out) / SFT_FILE), len(rows), skipped
