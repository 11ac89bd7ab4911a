"""What a loaded task may be: one schema, applied by ``run_pipeline`` to the Task every source builds.

Sources differ in how a row is spelled (parquet layouts, the toolkit's JSON, the project's JSONL, a
``datasets`` row, the generator), not in what a task is; so the schema checks the built ``Task``, once,
for all of them. A row that breaks it is a bad row (kind ``SCHEMA``) with its id and the reason (``strict=True`` stops).

The schema is a closed shape with bounds, not a list of refused inputs:

- every text field is a ``str`` of bounded length (an int prompt, a 20-million-character prompt fail);
- counts are bounded: turns, images per turn, rubrics per turn, key steps;
- free-form mappings (``metadata``, a turn's ``world``) are JSON of bounded depth and size;
- a rubric's ``check`` is a JSON object whose ``type`` is one of ``CHECK_TYPES``, whose required fields
  have their types, whose ``given`` checks nest at most ``MAX_CHECK_DEPTH`` deep, and whose other
  fields are scalars or flat lists (the rule for each type lives in ``vtb_rewards.checks``; the core
  only fixes the shape that rule may be given).
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping, Sequence, get_args

from vtb_env.tasks import ModeLabel, Rubric, Task, Turn

SCHEMA = "outside the schema"  # the load report's kind for such a row
MAX_ID_CHARS = 256
MAX_LABEL_CHARS = 256  # prompt_category, eval_focus, image names, rubric ids
MAX_TEXT_CHARS = 100_000  # a prompt, a golden answer, a rubric's description, a key step
MAX_TRAJECTORY_CHARS = 2_000_000  # a reference tool trajectory (code and outputs)
MAX_TURNS = 32
MAX_IMAGES_PER_TURN = 64
MAX_RUBRICS_PER_TURN = 256
MAX_KEY_STEPS = 256
MAX_JSON_DEPTH = 8  # metadata and world
MAX_JSON_CHARS = 1_000_000
MAX_CHECK_DEPTH = 4  # a check, its ``given`` checks, theirs, ...
MAX_CHECK_CHARS = 20_000
MAX_CHECK_LIST = 256  # phrases or options in one field
# The check types and the fields each needs (and their kinds); ``vtb_rewards.checks`` evaluates them.
CHECK_TYPES: dict[str, dict[str, str]] = {
    "number": {"value": "number"},
    "text": {"any_of": "strings"},
    "choice": {"answer": "string"},
    "clarify": {},
}
# Optional fields with a fixed kind; any other field must be a scalar or a flat list of scalars.
CHECK_FIELDS = {
    "abs_tol": "number",
    "rel_tol": "number",
    "any_of": "strings",
    "none_of": "strings",
    "options": "strings",
    "asks_for": "strings",
    "answer": "string",
    "value": "number",
    "given": "checks",
}
MODE_LABELS = get_args(ModeLabel)


class SchemaError(ValueError):
    """A built task is outside the schema; the message names the field and what it should be."""


def check_task(task: Task) -> None:
    """Raise ``SchemaError`` (the reason names the field) when ``task`` is outside the schema (module doc)."""
    _text(task.id, "id", MAX_ID_CHARS, empty=False)
    _text(task.prompt_category, "prompt_category", MAX_LABEL_CHARS)
    _text(task.eval_focus, "eval_focus", MAX_LABEL_CHARS)
    if task.mode_label is not None and task.mode_label not in MODE_LABELS:
        raise SchemaError(f"mode_label {str(task.mode_label)[:40]!r} is none of {MODE_LABELS}")
    _json_value(task.metadata, "metadata")
    if not isinstance(task.turns, tuple) or not 1 <= len(task.turns) <= MAX_TURNS:
        raise SchemaError(f"a task has 1 to {MAX_TURNS} turns, this one {len(task.turns)}")
    for number, turn in enumerate(task.turns, start=1):
        _check_turn(turn, f"turn {number}")


def _check_turn(turn: Turn, where: str) -> None:
    _text(turn.prompt, f"{where} prompt", MAX_TEXT_CHARS)
    _text(turn.golden_answer, f"{where} golden_answer", MAX_TEXT_CHARS)
    _text(turn.tool_trajectory_raw, f"{where} tool_trajectory", MAX_TRAJECTORY_CHARS)
    _count(turn.images, f"{where} images", MAX_IMAGES_PER_TURN)
    for image in turn.images:
        _text(image.name, f"{where} image name", MAX_LABEL_CHARS, empty=False)
    _count(turn.key_steps, f"{where} key_steps", MAX_KEY_STEPS)
    for step in turn.key_steps:
        _text(step, f"{where} key step", MAX_TEXT_CHARS)
    if turn.world is not None:
        _json_value(turn.world, f"{where} world")
    _count(turn.rubrics, f"{where} rubrics", MAX_RUBRICS_PER_TURN)
    for rubric in turn.rubrics:
        _check_rubric(rubric, f"{where} rubric {str(rubric.id)[:40]!r}")


def _check_rubric(rubric: Rubric, where: str) -> None:
    _text(rubric.id, f"{where} id", MAX_LABEL_CHARS, empty=False)
    _text(rubric.description, f"{where} description", MAX_TEXT_CHARS)
    for category in rubric.categories:
        _text(category, f"{where} category", MAX_LABEL_CHARS)
    if rubric.check is not None:
        check_spec(rubric.check, f"{where} check")


def check_spec(spec: Any, where: str = "check") -> None:
    """Raise ``SchemaError`` unless ``spec`` has the shape of a rubric check (module doc): depth and size first,
    without recursion, so a 900-deep object is a reason, never a ``RecursionError``."""
    depth = _depth(spec, MAX_JSON_DEPTH * MAX_CHECK_DEPTH)
    if depth > MAX_JSON_DEPTH * MAX_CHECK_DEPTH:
        raise SchemaError(f"{where}: nested more than {MAX_JSON_DEPTH * MAX_CHECK_DEPTH} levels deep")
    size = _json_size(spec, where)
    if size > MAX_CHECK_CHARS:
        raise SchemaError(f"{where}: {size:,} characters of JSON, more than {MAX_CHECK_CHARS:,}")
    _check_one(spec, where, 1)


def _check_one(spec: Any, where: str, level: int) -> None:
    if not isinstance(spec, Mapping):
        raise SchemaError(f"{where}: a check is a JSON object, not {type(spec).__name__}")
    kind = spec.get("type")
    if kind not in CHECK_TYPES:
        shown = "missing" if "type" not in spec else f"{str(kind)[:40]!r}"
        raise SchemaError(f"{where}: type is {shown}, not one of {sorted(CHECK_TYPES)}")
    for field in CHECK_TYPES[kind]:
        if field not in spec:
            raise SchemaError(f"{where}: a {kind} check needs {field!r}")
    for field, value in spec.items():
        if not isinstance(field, str):
            raise SchemaError(f"{where}: field names are strings")
        if field == "type":
            continue
        field_kind = CHECK_FIELDS.get(field, "flat")
        if field_kind == "checks":
            _given(value, f"{where} given", level)
        else:
            _field(value, field_kind, f"{where} {field[:40]!r}")


def _given(value: Any, where: str, level: int) -> None:
    if not isinstance(value, (list, tuple)):
        raise SchemaError(f"{where}: a list of checks, not {type(value).__name__}")
    if value and level >= MAX_CHECK_DEPTH:
        raise SchemaError(f"{where}: checks nest at most {MAX_CHECK_DEPTH} deep")
    for index, inner in enumerate(value):
        _check_one(inner, f"{where}[{index}]", level + 1)


def _field(value: Any, kind: str, where: str) -> None:
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise SchemaError(f"{where}: a finite number, not {_shown(value)}")
    elif kind == "string":
        _text(value, where, MAX_TEXT_CHARS)
    elif kind == "strings":
        if not isinstance(value, (list, tuple)) or len(value) > MAX_CHECK_LIST:
            raise SchemaError(f"{where}: a list of at most {MAX_CHECK_LIST} strings, not {_shown(value)}")
        for item in value:
            _text(item, where, MAX_TEXT_CHARS)
    else:  # a field the core does not know: a scalar or a flat list of scalars, nothing deeper
        items = value if isinstance(value, (list, tuple)) else [value]
        if len(items) > MAX_CHECK_LIST or not all(_scalar(item) for item in items):
            raise SchemaError(f"{where}: a scalar or a flat list of scalars, not {_shown(value)}")


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, bool, int)) or (isinstance(value, float) and math.isfinite(value))


def _text(value: Any, where: str, limit: int, *, empty: bool = True) -> None:
    if not isinstance(value, str):
        raise SchemaError(f"{where}: a string, not {_shown(value)}")
    if len(value) > limit:
        raise SchemaError(f"{where}: {len(value):,} characters, more than {limit:,}")
    if not empty and not value:
        raise SchemaError(f"{where}: empty")


def _count(items: Sequence[Any], where: str, limit: int) -> None:
    if len(items) > limit:
        raise SchemaError(f"{where}: {len(items):,} of them, more than {limit:,}")


def _json_value(value: Any, where: str) -> None:
    """``value`` is JSON of bounded depth and size (checked in that order: the depth walk never recurses)."""
    if _depth(value, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise SchemaError(f"{where}: nested more than {MAX_JSON_DEPTH} levels deep")
    size = _json_size(value, where)
    if size > MAX_JSON_CHARS:
        raise SchemaError(f"{where}: {size:,} characters of JSON, more than {MAX_JSON_CHARS:,}")


def _json_size(value: Any, where: str) -> int:
    try:  # only after the depth bound: json.dumps recurses
        return len(json.dumps(value, ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"{where}: not JSON ({exc})") from None


def _depth(value: Any, limit: int) -> int:
    """How deep ``value`` nests (a scalar is 0), walked with a stack; stops counting past ``limit``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, Mapping) else item if isinstance(item, (list, tuple)) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:40]}{'...' if len(text) > 40 else ''}"
