"""`vtb label-modes` end to end with the OCR baseline: the text-only pass through the env labels
each task, `vtb eval --mode-labels` and `vtb report --mode-labels` use the labels, and the model's
own text-only label wins over the task's built-in one (seed 000: the built-in label, as synthetic
tasks carry by construction, is only the fallback)."""

from __future__ import annotations

import json

from tests.support.menu_tasks import write_menu_tasks
from vtb_app.cli import main
from vtb_app.evaluation.records import latest_records
from vtb_rewards.mode import ModeLabelStore


def relabel(data, labels: dict[str, str | None]) -> None:
    """Set (or drop, with None) the tasks' own mode labels in the project-format file."""
    path = data / "tasks.jsonl"
    tasks = [json.loads(line) for line in path.read_text().splitlines()]
    for task in tasks:
        task["mode_label"] = labels[task["id"]]
    path.write_text("".join(json.dumps(task) + "\n" for task in tasks))


def test_label_modes_then_eval_and_report_use_the_labels(tmp_path, capsys):
    # menu-0: large print (readable without tools), menu-1: tiny print (needs upscaling), neither
    # labelled; menu-2: large print, but its built-in label says tool_required: the model's own
    # text-only pass (it passes without tools: tool_redundant) overrides it.
    data = write_menu_tasks(tmp_path / "data", n=3)
    relabel(data, {"menu-0": None, "menu-1": None, "menu-2": "tool_required"})
    labels_file = tmp_path / "labels.json"

    assert (
        main(
            [
                "label-modes",
                "--data",
                str(data),
                "--out",
                str(tmp_path / "text_only"),
                "--labels",
                str(labels_file),
                "--no-progress",
            ]
        )
        == 0
    )
    assert "mode labels for ocr-baseline: 1 tool_required, 2 tool_redundant, 0 unlabelled" in capsys.readouterr().out
    stored = ModeLabelStore(labels_file).labels("ocr-baseline")
    assert stored == {"menu-0": "tool_redundant", "menu-1": "tool_required", "menu-2": "tool_redundant"}
    text_only = latest_records(tmp_path / "text_only" / "records.jsonl")
    assert all(not r["episode"]["turns"][0]["steps"][0]["tool_calls"] for r in text_only.values())  # no tools offered

    assert (
        main(
            [
                "eval",
                "--data",
                str(data),
                "--out",
                str(tmp_path / "tools"),
                "--mode-labels",
                str(labels_file),
                "--no-progress",
            ]
        )
        == 0
    )
    records = {r["task_id"]: r for r in latest_records(tmp_path / "tools" / "records.jsonl").values()}
    assert {tid: r["mode_label"] for tid, r in records.items()} == {
        "menu-0": "tool_redundant",
        "menu-1": "tool_required",
        "menu-2": "tool_redundant",
    }
    assert {tid: r["tool_use"]["used_tools"] for tid, r in records.items()} == {
        "menu-0": False,
        "menu-1": True,
        "menu-2": False,
    }
    # The env's mode reward used the same labels: menu-0 TN, menu-1 TP, menu-2 TN (the model's label, not its
    # built-in one).
    assert {tid: r["reward_components"]["mode"] for tid, r in records.items()} == {
        "menu-0": 1.0,
        "menu-1": 1.0,
        "menu-2": 1.0,
    }
    capsys.readouterr()

    assert (
        main(
            [
                "report",
                str(tmp_path / "tools"),
                "--mode-labels",
                str(labels_file),
                "--out",
                str(tmp_path / "report"),
                "--all-tables",
            ]
        )
        == 0
    )
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())["runs"][0]["mode_selection"]
    assert (summary["TP"], summary["FN"], summary["TN"], summary["FP"]) == (1, 0, 2, 0)
    assert abs(summary["mcc"] - 1.0) < 1e-6 and summary["label_sources"] == {"report labels": 3}
    assert "report labels 3" in capsys.readouterr().out

    # Without the model's labels the built-in one is the fallback: menu-2 (tool_required, no tools) is an FN.
    assert main(["report", str(tmp_path / "tools"), "--out", str(tmp_path / "report-own")]) == 0
    own = json.loads((tmp_path / "report-own" / "summary.json").read_text())["runs"][0]["mode_selection"]
    assert own["label_sources"] == {"eval labels": 3}  # the labels the eval run stored still come first

    assert (
        main(
            [
                "eval",
                "--data",
                str(data),
                "--out",
                str(tmp_path / "missing"),
                "--mode-labels",
                str(tmp_path / "nope.json"),
            ]
        )
        == 4  # vtb_app.errors.ExitCode.NOT_FOUND
    )
