"""A task row is valid or reported (issue 41, item 3): one schema for every loader, on real files.

Issue 41 found three malformed rows that loaded in silence: ``"prompt": 5``, a 20,000,000-character prompt,
and a rubric whose ``check`` is a 900-deep object without ``type`` (an episode then scored it, reward 0.426,
no ``reward_error``). Now each is a bad row with its id and reason, in every source (project JSONL, official
parquet, the toolkit's ``dataset.json``), ``strict=True`` and ``vtb info --strict`` stop on it, and a check
that cannot be evaluated during an episode is the episode's ``reward_error``.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from dataclasses import replace

import pytest

from tests.support.env_tools import exact_reward, make_task
from tests.support.official_parquet import make_row, png_bytes, write_current, write_toolkit_dir
from vtb_env import DatasetError, LoadReport, load_tasks, save_tasks
from vtb_env.env import VisualToolBenchEnv
from vtb_env.loaders.schema import MAX_CHECK_DEPTH, MAX_TEXT_CHARS, SCHEMA, check_spec

GOOD_CHECK = {"type": "number", "value": 13, "abs_tol": 0.01}


def _deep(levels: int) -> dict:
    value: dict = {"value": 1}
    for _ in range(levels):
        value = {"inner": value}
    return value


def _given_chain(levels: int) -> dict:
    check = dict(GOOD_CHECK)
    for _ in range(levels - 1):
        check = {**GOOD_CHECK, "given": [check]}
    return check


# (id, what to change in a good project line, a fragment of the reason)
BAD_LINES = [
    ("int-prompt", lambda row: row["turns"][0].update(prompt=5), "turn 1 prompt: a string, not int 5"),
    ("huge-prompt", lambda row: row["turns"][0].update(prompt="x" * 20_000_000), "20,000,000 characters"),
    ("deep-check", lambda row: _rubric(row).update(check=_deep(900)), "check: nested more than"),
    ("no-type", lambda row: _rubric(row).update(check={"value": 3}), "check: type is missing, not one of"),
    ("odd-type", lambda row: _rubric(row).update(check={"type": "regex", "value": 3}), "type is 'regex', not one"),
    ("no-value", lambda row: _rubric(row).update(check={"type": "number"}), "a number check needs 'value'"),
    ("nan-value", lambda row: _rubric(row).update(check={"type": "number", "value": "13"}), "a finite number"),
    ("any-of-str", lambda row: _rubric(row).update(check={"type": "text", "any_of": "Lisbon"}), "list of at most"),
    ("odd-field", lambda row: _rubric(row).update(check={**GOOD_CHECK, "extra": {"a": 1}}), "a scalar or a flat"),
    ("long-given", lambda row: _rubric(row).update(check=_given_chain(MAX_CHECK_DEPTH + 1)), "nest at most"),
    ("check-list", lambda row: _rubric(row).update(check=[GOOD_CHECK]), "check: a check is a JSON object, not list"),
    ("deep-world", lambda row: row["turns"][0].update(world=_deep(40)), "turn 1 world: nested more than 8"),
    ("int-answer", lambda row: row["turns"][0].update(golden_answer=13), "golden_answer: a string, not int"),
    ("odd-label", lambda row: row.update(mode_label="maybe"), "mode_label 'maybe' is none of"),
]


def _rubric(row: dict) -> dict:
    return next(iter(row["turns"][0]["rubrics"].values()))


@pytest.fixture(scope="module")
def good_line(tmp_path_factory) -> dict:
    """One well-formed project line (a saved task) whose rubric carries an exact check."""
    task = make_task("good")
    jsonl = save_tasks([task], tmp_path_factory.mktemp("good"))
    return json.loads(jsonl.read_text().splitlines()[0])


def _write_project(tmp_path, good_line: dict) -> None:
    lines = [good_line]
    for task_id, change, _ in BAD_LINES:
        row = copy.deepcopy(good_line)
        row["id"] = task_id
        change(row)
        lines.append(row)
    save_tasks([], tmp_path)  # the images/ folder
    (tmp_path / "images" / "good").mkdir(exist_ok=True)
    image = good_line["turns"][0]["images"][0]
    (tmp_path / "images" / image).write_bytes(png_bytes())
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(row) + "\n" for row in lines))


def test_every_malformed_project_line_is_a_bad_row_with_id_and_reason(tmp_path, good_line):
    _write_project(tmp_path, good_line)
    report = LoadReport()
    assert [task.id for task in load_tasks(tmp_path, report=report)] == ["good"]
    reasons = dict(report.skipped)
    for task_id, _, fragment in BAD_LINES:
        assert fragment in reasons[task_id], (task_id, reasons.get(task_id))
    assert report.skipped_kinds == {SCHEMA: len(BAD_LINES)}
    assert max(len(reason) for reason in reasons.values()) < 300  # a reason is a line, not the value it refuses


def test_strict_stops_on_the_first_bad_row_and_vtb_info_strict_says_which(tmp_path, good_line):
    _write_project(tmp_path, good_line)
    with pytest.raises(DatasetError, match="bad row int-prompt: turn 1 prompt: a string, not int 5") as raised:
        load_tasks(tmp_path, strict=True)
    assert raised.value.task_id == "int-prompt"
    done = subprocess.run(
        [sys.executable, "-m", "vtb_app.cli", "info", str(tmp_path), "--strict"], capture_output=True, text=True
    )
    assert done.returncode == 5 and done.stderr.startswith("error: bad row int-prompt: turn 1 prompt"), done.stderr
    lenient = subprocess.run(
        [sys.executable, "-m", "vtb_app.cli", "info", str(tmp_path)], capture_output=True, text=True
    )
    assert lenient.returncode == 0 and f"skipped {len(BAD_LINES)} bad rows ({len(BAD_LINES)} {SCHEMA})" in (
        lenient.stdout + lenient.stderr
    )


def _official(task_id: str, prompt, check) -> dict:
    rubrics = json.dumps({"r1": {"description": "states 13", "weight": 5, "check": check}})
    return make_row(task_id, [{"prompt": prompt, "images": [png_bytes()], "rubrics": rubrics}])


def test_parquet_and_toolkit_rows_meet_the_same_schema(tmp_path):
    rows = [
        _official("fine", "What is it?", GOOD_CHECK),
        _official("huge", "x" * (MAX_TEXT_CHARS + 1), GOOD_CHECK),
        _official("deep", "What is it?", _deep(900)),
        _official("untyped", "What is it?", {"value": 13}),
    ]
    for source in (write_current(tmp_path / "rows.parquet", rows), write_toolkit_dir(tmp_path / "toolkit", rows)):
        report = LoadReport()
        assert [task.id for task in load_tasks(source, report=report)] == ["fine"], source
        reasons = dict(report.skipped)
        assert f"{MAX_TEXT_CHARS + 1:,} characters, more than" in reasons["huge"]
        assert "check: nested more than" in reasons["deep"] and "type is missing" in reasons["untyped"]


def test_what_loaders_produce_today_meets_the_schema():
    report = LoadReport()
    assert len(load_tasks("synth:40:0", validate_images=False, report=report)) == 40 and not report.skipped
    assert load_tasks("demo", validate_images=False, strict=True)
    for spec in (GOOD_CHECK, _given_chain(MAX_CHECK_DEPTH), {"type": "clarify", "asks_for": ["x"], "echo_of": "y"}):
        check_spec(spec)


def test_a_check_that_cannot_be_evaluated_is_the_episodes_reward_error():
    """A task built by hand (no loader) with a check its rule cannot read: never scored without that check."""
    task = make_task("hand-made")
    turn = task.turns[0]
    broken = replace(turn.rubrics[0], check={"type": "text", "any_of": []})  # a text check needs phrases
    task = replace(task, turns=(replace(turn, rubrics=(broken,)),))
    env = VisualToolBenchEnv(tasks=[task], reward=exact_reward())
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("The answer is 10.")
    assert terminated and reward == 0.0 and "reward_components" not in info
    assert info["reward_error"].startswith("CheckSpecError: task hand-made turn 1 rubric 'hand-made-r0': its check")


def test_the_schema_knows_exactly_the_check_types_the_rewards_evaluate():
    """The core cannot import the rewards layer, so the closed set of check types is written twice: held equal."""
    from vtb_env.loaders.schema import CHECK_TYPES
    from vtb_rewards import checks

    assert set(CHECK_TYPES) == set(checks._CHECKS)
