"""Dataset images resolve only inside the dataset's own folder (issue 22, item 6): an absolute
path, a ``..`` part or a symlink leading out is a reported bad row, in the project format,
official parquet and a toolkit directory. Before, all three loaded a host file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.official_parquet import make_row, png_bytes, rubric, write_current, write_toolkit_dir
from vtb_env.loaders import DatasetError, LoadReport, load_tasks
from vtb_env.loaders.common import OUTSIDE

HOSTILE = ("absolute", "dotdot", "symlink")


@pytest.fixture
def host_image(tmp_path) -> Path:
    """A real image outside every dataset folder: what a crafted row tries to show the policy."""
    path = tmp_path / "host_secret.png"
    path.write_bytes(png_bytes(color=(1, 2, 3)))
    return path


def check_report(tasks, report: LoadReport, kept: list[str]) -> None:
    assert sorted(task.id for task in tasks) == sorted(kept)
    assert [label for label, _ in report.skipped] == list(HOSTILE) and report.skipped_kinds == {OUTSIDE: 3}
    reasons = [reason for _, reason in report.skipped]
    assert "is absolute" in reasons[0] and "climbs out with '..'" in reasons[1] and "through a symlink" in reasons[2]


def project_row(task_id: str, image: str) -> dict:
    rubrics = [{"id": "r", "description": "d", "weight": 5}]
    return {"id": task_id, "turns": [{"prompt": "q", "images": [image], "golden_answer": "a", "rubrics": rubrics}]}


def test_project_format(tmp_path, host_image):
    folder = tmp_path / "project" / "images" / "t"
    folder.mkdir(parents=True)
    (folder / "ok.png").write_bytes(png_bytes())
    os.symlink(host_image, folder / "out.png")
    os.symlink(folder / "ok.png", folder / "in.png")  # a link that stays inside is fine
    rows = [
        project_row("ok", "t/ok.png"),
        project_row("absolute", str(host_image)),
        project_row("dotdot", "../../host_secret.png"),
        project_row("symlink", "t/out.png"),
        project_row("inside-link", "t/in.png"),
    ]
    (tmp_path / "project" / "tasks.jsonl").write_text("\n".join(map(json.dumps, rows)))
    report = LoadReport()
    tasks = load_tasks(tmp_path / "project", report=report)
    check_report(tasks, report, ["ok", "inside-link"])
    with pytest.raises(DatasetError, match="bad row absolute: image path .* is absolute"):
        load_tasks(tmp_path / "project", strict=True)


def parquet_row(task_id: str, path: str) -> dict:
    row = make_row(task_id, [{"prompt": "q", "images": [b""], "rubrics": {"r1": rubric("d", 5)}}])
    row["images_by_turn"] = [[{"bytes": None, "path": path}]]  # an HF Image struct that names a file
    row["images"] = row["images_by_turn"][0]
    return row


def test_official_parquet(tmp_path, host_image):
    folder = tmp_path / "parquet"
    folder.mkdir()
    (folder / "ok.png").write_bytes(png_bytes())
    os.symlink(host_image, folder / "out.png")
    rows = [
        parquet_row("ok", "ok.png"),
        parquet_row("absolute", str(host_image)),
        parquet_row("dotdot", "../host_secret.png"),
        parquet_row("symlink", "out.png"),
    ]
    report = LoadReport()
    tasks = load_tasks(write_current(folder / "tasks.parquet", rows), report=report)
    check_report(tasks, report, ["ok"])
    assert tasks[0].images[0].read_bytes() == png_bytes()


def test_toolkit_directory(tmp_path, host_image):
    ok = make_row("ok", [{"prompt": "q", "images": [png_bytes()], "rubrics": {"r1": rubric("d", 5)}}])
    root = write_toolkit_dir(tmp_path / "toolkit", [ok])
    split = root / "data" / "single_turn"
    os.symlink(host_image, split / "images" / "out.png")
    entries = json.loads((split / "dataset.json").read_text())
    for task_id, path in (
        ("absolute", str(host_image)),
        ("dotdot", "data/single_turn/../../../host_secret.png"),
        ("symlink", "data/single_turn/images/out.png"),
    ):
        entries.append({**entries[0], "id": task_id, "image_paths": [path], "images_by_turn_paths": [[path]]})
    (split / "dataset.json").write_text(json.dumps(entries))
    report = LoadReport()
    check_report(load_tasks(root, report=report), report, ["ok"])
