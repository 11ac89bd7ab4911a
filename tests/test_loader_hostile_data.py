"""Hostile data never crashes a load (issue 11, item 12): hostile rubrics, truncated shards, corrupt data pages,
hostile project lines and toolkit entries that are not rows each become a bad row, on real files."""

from __future__ import annotations

import json

import pytest

from tests.support.official_parquet import make_row, official_rows, png_bytes, write_current, write_toolkit_dir
from vtb_env import DatasetError, LoadReport, load_tasks, save_tasks

IDS = [row["id"] for row in official_rows()]


def _row(task_id: str, rubrics) -> dict:
    return make_row(task_id, [{"prompt": "p", "images": [png_bytes()], "rubrics": rubrics}])


HOSTILE_ROWS = {
    "nested too deeply": _row("deep-rubrics", "[" * 100_000),
    "expected an object, got int": _row("list-rubrics", "[1, 2, 3]"),
    "weight inf is not an integer": _row("huge-weight", '{"r": {"description": "x", "weight": 1e999}}'),
}


def test_hostile_rubrics_are_bad_rows(tmp_path):
    good = official_rows()
    path = write_current(tmp_path / "hostile.parquet", [good[0], *HOSTILE_ROWS.values(), good[1], good[0]])
    report = LoadReport()
    tasks = load_tasks(path, report=report)
    assert [t.id for t in tasks] == IDS[:2]
    reasons = dict(report.skipped)
    for fragment, row in HOSTILE_ROWS.items():
        assert fragment in reasons[row["id"]]
    assert "duplicate id" in reasons[IDS[0]] and report.skipped_kinds == {"invalid row": 3, "duplicate id": 1}
    assert report.summary().endswith("skipped 4 bad rows (3 invalid row, 1 duplicate id)")
    with pytest.raises(DatasetError, match="duplicate id"):
        load_tasks(write_current(tmp_path / "dup.parquet", [good[0], good[0]]), strict=True)


def test_a_truncated_shard_loses_only_its_own_rows(tmp_path):
    shards = tmp_path / "shards"
    shards.mkdir()
    good = official_rows()
    write_current(shards / "train-0.parquet", good[:2])
    broken = write_current(shards / "train-1.parquet", good[2:3])
    write_current(shards / "train-2.parquet", good[3:])
    broken.write_bytes(broken.read_bytes()[: broken.stat().st_size // 2])
    report = LoadReport()
    assert [t.id for t in load_tasks(shards, report=report)] == [IDS[0], IDS[1], IDS[3]]
    assert report.skipped_kinds == {"unreadable file": 1} and report.skipped[0][0] == "train-1.parquet"
    with pytest.raises(DatasetError, match="cannot read parquet file"):
        load_tasks(broken)  # nothing at all can be read: that is an error, not an empty load


def _corrupt_page(path, group: int, column: str) -> None:
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata.row_group(group)
    chunk = next(meta.column(i) for i in range(meta.num_columns) if meta.column(i).path_in_schema.startswith(column))
    data = bytearray(path.read_bytes())
    for i in range(chunk.data_page_offset + 4, chunk.data_page_offset + 40):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(("column", "label"), [("turn_prompts", IDS[1]), ("id", "pages.parquet#1")])
def test_a_corrupt_data_page_is_a_bad_row(tmp_path, column, label):
    path = write_current(tmp_path / "pages.parquet", official_rows(), row_group_size=1)
    _corrupt_page(path, 1, column)
    report = LoadReport()
    assert [t.id for t in load_tasks(path, report=report)] == [IDS[0], *IDS[2:]]
    assert report.skipped[0][0] == label and "row group 1: cannot read the data" in report.skipped[0][1]
    assert report.skipped_kinds == {"unreadable data": 1}


def test_hostile_project_lines_are_bad_rows(tmp_path):
    jsonl = save_tasks(load_tasks(write_current(tmp_path / "g.parquet", official_rows())), tmp_path / "project")
    lines = jsonl.read_bytes().splitlines()
    turns_dict = json.loads(lines[2])
    turns_dict["turns"] = {"0": turns_dict["turns"][0]}
    jsonl.write_bytes(
        b"\n".join(
            [
                lines[0],
                b'{"id": "bad-\xff-bytes", "turns": []}',
                json.dumps(turns_dict).encode(),
                b"[" * 100_000,
                b"[1, 2]",
                lines[1],
                lines[0],
            ]
        )
        + b"\n"
    )
    report = LoadReport()
    assert [t.id for t in load_tasks(jsonl.parent, report=report)] == IDS[:2]
    reasons = dict(report.skipped)
    assert "not valid UTF-8" in reasons["tasks.jsonl:2"] and "'turns' must be a list of objects" in reasons[IDS[2]]
    assert "nested too deeply" in reasons["tasks.jsonl:4"] and "must be a JSON object" in reasons["tasks.jsonl:5"]
    assert report.skipped_kinds == {"invalid UTF-8": 1, "invalid row": 2, "invalid JSON": 1, "duplicate id": 1}
    assert "skipped 5 bad rows" in report.summary()


def test_toolkit_entries_that_are_not_rows_and_escaped_surrogates(tmp_path):
    root = write_toolkit_dir(tmp_path / "VisualToolBench", official_rows())
    dataset = next(root.rglob("dataset.json"))
    entries = json.loads(dataset.read_text(encoding="utf-8"))
    entries[0]["turn_prompts"][0] = "half an emoji \ud83d here"
    entries.append({"id": "no-columns", "question": "q"})
    entries.append({"id": "odd-paths", "turn_prompts": ["p"], "rubrics_by_turn": ["{}"], "images_by_turn_paths": 7})
    dataset.write_text(json.dumps(entries), encoding="utf-8")  # ASCII JSON: the surrogate is a \\ud83d escape
    report = LoadReport()
    tasks = {task.id: task for task in load_tasks(root, report=report)}
    assert tasks[entries[0]["id"]].turns[0].prompt == "half an emoji \ufffd here"
    assert {label for label, _ in report.skipped} >= {"no-columns", "odd-paths"}
    dataset.write_bytes(b"[\xff]")
    with pytest.raises(DatasetError, match="cannot read"):
        load_tasks(root)
