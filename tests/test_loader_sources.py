"""Loading tasks from official parquet (three layouts), toolkit dirs, the project format, ``datasets`` objects and
synth specs; filters, streaming and the bad-row policy, on real files."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys

import pytest
from PIL import Image

import vtb_env.loaders as loaders
from tests.support.official_parquet import (
    broken_rows,
    make_row,
    official_rows,
    rubric,
    write_current,
    write_legacy_1191,
    write_legacy_1204,
    write_toolkit_dir,
)
from vtb_env import DatasetError, LoadReport, iter_tasks, load_tasks, save_tasks
from vtb_env.synth import generate

IDS = [row["id"] for row in official_rows()]


@pytest.fixture(scope="module")
def parquet_path(tmp_path_factory):
    """Good rows with the broken ones interleaved; one row per row group so groups can be skipped."""
    rows = official_rows()
    bad = list(broken_rows().values())
    mixed = [rows[0], bad[0], rows[1], bad[1], bad[2], rows[2], bad[3], rows[3]]
    return write_current(tmp_path_factory.mktemp("hf") / "test-00000-of-00001.parquet", mixed, row_group_size=1)


def by_id(tasks):
    """Tasks keyed by their id."""
    return {task.id: task for task in tasks}


def test_current_schema_maps_every_field(parquet_path):
    report = LoadReport()
    tasks = by_id(load_tasks(parquet_path, report=report))
    assert list(tasks) == IDS
    assert (report.kind, report.schema, report.loaded) == ("parquet", "current", 4)

    single = tasks[IDS[0]]
    assert (single.turncase, single.prompt_category, single.domain, single.eval_focus) == (
        "single-turn",
        "chemistry",
        "STEM",
        "region_switch_qa",
    )
    turn = single.turns[0]
    assert [image.name for image in turn.images] == ["image_1.png", "image_2.png"]  # a multi-image turn
    assert [image.open().size for image in turn.images] == [(32, 24), (40, 30)]
    assert turn.golden_answer == "OPEN"
    assert turn.tool_trajectory_raw == '[{"tool": "python_image_processing", "code": "crop"}]'
    assert turn.tool_trajectory == [{"tool": "python_image_processing", "code": "crop"}]
    minor = next(r for r in turn.rubrics if r.weight == 2)
    assert minor.id == "3f1c9a2e-1111-4c1d-9a55-0a1b2c3d4e5f_2"  # suffixed ids kept verbatim
    assert (minor.critical, minor.is_critical("weight>=4"), minor.is_critical("either")) == (True, False, True)
    assert (minor.objective, minor.explicit, minor.final_answer) == (False, False, False)  # the slash keys
    assert single.metadata["num_images"] == 2

    multi = tasks[IDS[1]]
    assert (multi.turncase, multi.domain, multi.eval_focus) == ("multi-turn", "Medical", "follow_up_test")
    assert [[image.name for image in t.images] for t in multi.turns] == [
        ["image_1.png"],
        [],
        ["image_2.png", "image_3.png"],
    ]
    assert [t.golden_answer for t in multi.turns] == ["12 mg", "36 mg", "higher"]
    assert [r.id for t in multi.turns for r in t.rubrics] == ["a0-final", "b0-final", "c0"]


def test_bad_rows_are_skipped_and_reported(parquet_path, caplog):
    report = LoadReport()
    with caplog.at_level(logging.WARNING, logger="vtb_env.loaders"):
        tasks = load_tasks(parquet_path, report=report)
    assert len(tasks) == 4 and report.loaded == 4
    reasons = dict(report.skipped)
    assert set(reasons) == {"bad-rubric-json", "bad-image", "uneven-turns", "missing-answer"}
    for key, row in broken_rows().items():
        assert key in reasons[row["id"]]
    assert "skipped 4 bad rows" in caplog.text and "bad-image" in caplog.text


@pytest.mark.parametrize("reason", list(broken_rows()))
def test_strict_mode_raises_naming_task_and_reason(tmp_path, reason):
    row = broken_rows()[reason]
    path = write_current(tmp_path / "one.parquet", [official_rows()[0], row])
    with pytest.raises(DatasetError) as info:
        load_tasks(path, strict=True)
    assert info.value.task_id == row["id"] and reason in info.value.reason
    assert row["id"] in str(info.value)


def test_metadata_scan_without_image_validation(parquet_path):
    report = LoadReport()
    tasks = load_tasks(parquet_path, validate_images=False, report=report)
    assert "bad-image" in [t.id for t in tasks] and len(report.skipped) == 3  # only the image check is off


def test_filters_and_limit(parquet_path):
    assert [t.id for t in load_tasks(parquet_path, ids=[IDS[2], "absent"])] == [IDS[2]]
    assert [t.id for t in load_tasks(parquet_path, turncase="multi")] == [IDS[1], IDS[3]]
    assert [t.id for t in load_tasks(parquet_path, domain="stem")] == [IDS[0]]
    assert [t.id for t in load_tasks(parquet_path, domain=["Finance", "sports"])] == [IDS[2], IDS[3]]
    assert [t.id for t in load_tasks(parquet_path, eval_focus="hybrid_tool_reasoning")] == [IDS[2]]
    assert [t.id for t in load_tasks(parquet_path, turncase="single-turn", domain="finance")] == [IDS[2]]
    assert [t.id for t in load_tasks(parquet_path, limit=2)] == IDS[:2]
    with pytest.raises(ValueError, match="turncase"):
        load_tasks(parquet_path, turncase="both")


def test_filtered_out_rows_are_never_decoded(parquet_path):
    report = LoadReport()
    load_tasks(parquet_path, ids=[IDS[3]], report=report)
    assert report.skipped == []  # the broken rows before it were skipped unread, not reported


def test_iter_tasks_streams_lazily(parquet_path):
    report = LoadReport()
    stream = iter_tasks(parquet_path, report=report)
    first = next(stream)
    assert first.id == IDS[0] and report.loaded == 1 and report.skipped == []  # later rows untouched
    stream.close()


def test_directory_and_glob_of_shards(tmp_path):
    rows = official_rows()
    shards = tmp_path / "data"
    shards.mkdir()
    write_current(shards / "test-00000-of-00002.parquet", rows[:2])
    write_current(shards / "test-00001-of-00002.parquet", rows[2:])
    (tmp_path / ".cache").mkdir()
    write_current(
        tmp_path / ".cache" / "stale.parquet", [make_row("stale", [{"prompt": "p", "rubrics": {"r": rubric("x", 5)}}])]
    )
    assert [t.id for t in load_tasks(tmp_path)] == IDS
    assert [t.id for t in load_tasks(str(shards / "test-*.parquet"))] == IDS


@pytest.mark.parametrize(("writer", "schema"), [(write_legacy_1191, "legacy-1191"), (write_legacy_1204, "legacy-1204")])
def test_older_layouts(tmp_path, writer, schema):
    report = LoadReport()
    tasks = by_id(load_tasks(writer(tmp_path / "old.parquet", official_rows()), report=report))
    assert report.schema == schema and list(tasks) == IDS
    current = by_id(load_tasks(write_current(tmp_path / "new.parquet", official_rows())))
    for task_id, task in tasks.items():
        want = current[task_id]
        assert [t.prompt for t in task.turns] == [t.prompt for t in want.turns]
        assert [t.rubrics for t in task.turns] == [t.rubrics for t in want.turns]
        assert [i.read_bytes() for i in task.images] == [i.read_bytes() for i in want.images]
        assert task.domain == want.domain and task.metadata["source_schema"] == schema
    multi = tasks[IDS[1]]
    if schema == "legacy-1191":  # per-turn images survive; answers were not in this layout
        assert [len(t.images) for t in multi.turns] == [1, 0, 2]
    else:  # '[Turn N]' prefixes split per turn; flat images all arrive with turn 1
        assert [t.golden_answer for t in multi.turns] == ["12 mg", "36 mg", "higher"]
        assert [len(t.images) for t in multi.turns] == [3, 0, 0]


def test_unknown_layout_names_its_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"question": ["q"]}), tmp_path / "x.parquet")
    with pytest.raises(DatasetError, match="question"):
        load_tasks(tmp_path / "x.parquet")
    with pytest.raises(DatasetError, match="no such file"):
        load_tasks(tmp_path / "absent")


def test_toolkit_directory(tmp_path):
    root = write_toolkit_dir(tmp_path / "VisualToolBench", official_rows())
    report = LoadReport()
    tasks = load_tasks(root, report=report)
    assert (report.kind, report.schema) == ("toolkit", "current")
    assert [t.id for t in tasks] == [IDS[0], IDS[2], IDS[1], IDS[3]]  # single_turn/ first, then multi_turn/
    current = by_id(load_tasks(write_current(tmp_path / "p.parquet", official_rows())))
    for task in tasks:
        assert all(image.path and image.data is None for image in task.images)  # read from disk on demand
        assert [i.read_bytes() for i in task.images] == [i.read_bytes() for i in current[task.id].images]
        assert [[i.name for i in t.images] for t in task.turns] == [
            [i.name for i in t.images] for t in current[task.id].turns
        ]
    assert [t.id for t in load_tasks(root / "data" / "multi_turn")] == [IDS[1], IDS[3]]
    (root / "data/multi_turn/images/sample_0/turn_2_image_1.png").unlink()
    report = LoadReport()
    assert len(load_tasks(root, report=report)) == 3
    assert report.skipped[0][0] == IDS[1] and "not found" in report.skipped[0][1]


def test_project_format_round_trip(tmp_path, parquet_path):
    original = load_tasks(parquet_path)
    jsonl = save_tasks(iter(original), tmp_path / "project")
    assert jsonl == tmp_path / "project" / "tasks.jsonl"
    for source in (tmp_path / "project", jsonl):
        report = LoadReport()
        again = load_tasks(source, report=report)
        assert report.kind == "project" and report.skipped == []
        assert [t.to_dict() for t in again] == [t.to_dict() for t in original]
        assert [i.read_bytes() for t in again for i in t.images] == [i.read_bytes() for t in original for i in t.images]
    line = json.loads(jsonl.read_text().splitlines()[1])
    assert line["turns"][1]["images"] == [] and line["turns"][2]["images"] == [
        f"{IDS[1]}/image_2.png",
        f"{IDS[1]}/image_3.png",
    ]


def test_project_format_stores_png_and_reports_bad_lines(tmp_path):
    jpeg = io.BytesIO()
    Image.new("RGB", (16, 16), (1, 2, 3)).save(jpeg, format="JPEG")
    row = make_row("jpeg-task", [{"prompt": "p", "images": [jpeg.getvalue()], "rubrics": {"r": rubric("x", 5)}}])
    task = load_tasks(write_current(tmp_path / "j.parquet", [row]))[0]
    jsonl = save_tasks([task], tmp_path / "out")
    stored = (tmp_path / "out" / "images" / "jpeg-task" / "image_1.png").read_bytes()
    assert stored.startswith(b"\x89PNG") and Image.open(io.BytesIO(stored)).size == (16, 16)
    with jsonl.open("a") as handle:
        handle.write("{broken\n")
        handle.write(
            json.dumps({**task.to_dict(image_names=lambda i: "jpeg-task/missing.png"), "id": "lost-image"}) + "\n"
        )
    report = LoadReport()
    assert [t.id for t in load_tasks(jsonl, report=report)] == ["jpeg-task"]
    assert [label for label, _ in report.skipped] == ["tasks.jsonl:2", "lost-image"]
    with pytest.raises(ValueError, match="duplicate"):
        save_tasks([task, task], tmp_path / "dup")


def test_demo_source(tmp_path, monkeypatch, parquet_path):
    monkeypatch.setattr(loaders, "DEMO_DIR", tmp_path / "demo")
    with pytest.raises(DatasetError, match="demo set is missing"):
        load_tasks("demo")
    save_tasks(load_tasks(parquet_path, limit=2), tmp_path / "demo")
    assert [t.id for t in load_tasks("demo")] == IDS[:2]


class RowsOnly:
    """A duck-typed dataset: column names and row iteration, images as PIL objects."""

    def __init__(self, rows):
        self.rows = rows
        self.column_names = list(rows[0])

    def __iter__(self):
        for row in self.rows:
            decoded = {k: v for k, v in row.items()}
            decoded["images_by_turn"] = [
                [Image.open(io.BytesIO(i["bytes"])) for i in turn] for turn in row["images_by_turn"]
            ]
            yield decoded


def test_duck_typed_dataset_object():
    report = LoadReport()
    tasks = load_tasks({"test": RowsOnly(official_rows())}, domain="medical", report=report)
    assert [t.id for t in tasks] == [IDS[1]] and (report.kind, report.schema) == ("datasets", "current")
    assert [i.open().size for i in tasks[0].images] == [(20, 50), (40, 30), (32, 24)]


def test_real_datasets_object(tmp_path, parquet_path):
    datasets = pytest.importorskip("datasets")
    dataset = datasets.Dataset.from_parquet(str(parquet_path), cache_dir=str(tmp_path / "cache"))
    assert type(dataset.features["images"]).__name__ in ("List", "Sequence")  # the HF Image metadata was read
    report = LoadReport()
    tasks = load_tasks(dataset, report=report)
    assert [t.id for t in tasks] == IDS and len(report.skipped) == 4
    assert [i.read_bytes() for t in tasks for i in t.images] == [
        i.read_bytes() for t in load_tasks(parquet_path) for i in t.images
    ]


def test_vtb_info_reads_parquet(parquet_path):
    result = subprocess.run(
        [sys.executable, "-m", "vtb_app.cli", "info", str(parquet_path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "4 tasks" in result.stdout and "multi-turn=2" in result.stdout


def test_synth_spec_loads_the_generated_stream_with_filters_limit_and_report():
    expected = generate(6, seed=3)
    assert [t.to_dict() for t in load_tasks("synth:6:3")] == [t.to_dict() for t in expected]
    report = LoadReport()
    assert [t.id for t in iter_tasks("synth:6:3", limit=2, report=report)] == [t.id for t in expected[:2]]
    assert report.kind == "synth" and report.loaded == 2
    assert [t.id for t in load_tasks("synth:6:3", ids=[expected[4].id])] == [expected[4].id]
    assert load_tasks("synth:0:3") == []


@pytest.mark.parametrize("spec", ["synth:", "synth:4", "synth:x:0", "synth:-1:0", "synth:4:0:1", "synth:4:1.5"])
def test_a_malformed_synth_spec_is_a_clear_dataset_error(spec):
    with pytest.raises(DatasetError, match="expected synth:N:SEED"):
        load_tasks(spec)
