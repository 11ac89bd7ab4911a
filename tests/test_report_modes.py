"""Mode labels and the MCC in published numbers (issue 26), through the `vtb` CLI: the MCC of degenerate matrices
as sklearn defines it, mode labels from multi-sample text-only runs by the stated rule, and the MCC reading any
tool or the vision tool."""

from __future__ import annotations

import json

import pytest

from tests.support.chat_server import ChatServer
from tests.support.cli import eval_args
from tests.support.eval_tasks import task_of, vtb, write_tasks
from tests.support.sample_runs import MIXED, by_sample, rows_of, table
from vtb_app.evaluation.records import latest_records


@pytest.mark.filterwarnings("ignore:A single label was found")
def test_mcc_is_defined_for_degenerate_matrices_as_sklearn():
    from sklearn.metrics import matthews_corrcoef

    from vtb_rewards.mode import ConfusionMatrix

    for tp, fn, tn, fp in [(3, 0, 0, 0), (0, 0, 2, 0), (0, 2, 0, 0), (2, 0, 0, 1), (0, 0, 0, 0), (3, 1, 2, 2)]:
        matrix = ConfusionMatrix(tp=tp, fn=fn, tn=tn, fp=fp)
        truth = [1] * (tp + fn) + [0] * (tn + fp)
        predicted = [1] * tp + [0] * fn + [0] * tn + [1] * fp
        expected = matthews_corrcoef(truth, predicted) if truth else 0.0
        assert matrix.mcc(epsilon=0.0) == pytest.approx(expected), (tp, fn, tn, fp)
        assert matrix.mcc() == pytest.approx(expected, abs=1e-9)


# -- mode labels from several samples, and the MCC reading --------------------------------------------------


def test_label_modes_with_samples_follows_the_stated_rule(tmp_path, capsys):
    data = write_tasks(tmp_path / "data", 3)
    passes = {"t0": (1, 0, 0), "t1": (1, 1, 0), "t2": (0, 0, 0)}
    labels = {}
    for rule in ("any", "majority"):
        with ChatServer(by_sample({**MIXED, **passes})) as agent:
            args = ["label-modes", "--data", data, "--agent", f"openai:m@{agent.base_url}", "--no-progress"]
            vtb(*args, "--samples", 3, "--label-rule", rule, "--out", tmp_path / rule, "--labels", tmp_path / "l.json")
        assert f"(rule over 3 samples: {rule})" in capsys.readouterr().out
        labels[rule] = json.loads((tmp_path / "l.json").read_text())["openai:m"]
    assert labels["any"] == {"t0": "tool_redundant", "t1": "tool_redundant", "t2": "tool_required"}
    assert labels["majority"] == {"t0": "tool_required", "t1": "tool_redundant", "t2": "tool_required"}

    # The report draws the same labels from the text-only run itself, by the rule it states.
    for rule in ("any", "majority"):
        vtb("report", tmp_path / rule, "--out", tmp_path / f"report-{rule}", "--label-rule", rule, "--all-tables")
        summary = json.loads((tmp_path / f"report-{rule}" / "summary.json").read_text())
        assert summary["label_rule"] == rule and summary["runs"][0]["mode_selection"]["label_rule"] == rule
        tables = (tmp_path / f"report-{rule}" / "tables.md").read_text()
        assert ("any sample passes" if rule == "any" else "most samples pass") in table(tables, "Mode selection")


def test_mcc_reading_any_tool_or_the_vision_tool(tmp_path):
    data = write_tasks(tmp_path / "data", 3)
    path = data / "tasks.jsonl"
    tasks = [json.loads(line) for line in path.read_text().splitlines()]
    tasks[2]["turns"][0]["tool_trajectory"] = '[{"tool": "historical_weather", "purpose": "the weather that day"}]'
    path.write_text("".join(json.dumps({**t, "mode_label": "tool_required"}) + "\n" for t in tasks))
    calls = {
        "t0": ("calculator", {"expression": "4+5"}),  # not the vision tool, on an image task
        # visual work the sandbox sees: it reads the image and prints what it found
        "t1": ("python_image_processing", {"code": "from PIL import Image\nprint(Image.open('image_1.png').size)"}),
        "t2": ("historical_weather", {"location": "Paris", "date": "2024-05-01"}),  # the lookup its reference uses
    }

    def respond(request):
        if any(m["role"] == "tool" for m in request["messages"]):
            return {"content": "The total is 9."}
        name, arguments = calls[task_of(request)]
        call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        return {"tool_calls": [call]}

    with ChatServer(respond) as agent:
        assert vtb(*eval_args(data, f"openai:m@{agent.base_url}", tmp_path / "run")) == 0
    matrices = {}
    for reading in ("any", "vision"):
        assert vtb("report", tmp_path / "run", "--out", tmp_path / reading, "--mcc-tools", reading) == 0
        s = json.loads((tmp_path / reading / "summary.json").read_text())["runs"][0]
        matrices[reading] = (s["mode_selection"]["TP"], s["mode_selection"]["FN"], s["mode_selection"]["reading"])
        assert s["tool_use"]["overall"]["proactivity"] == 1.0  # table 7 counts every tool either way
        header, _ = rows_of(table((tmp_path / reading / "tables.md").read_text(), "Overall"))
        assert f"MCC ({'any tool' if reading == 'any' else 'vision tool'})" in header
    assert matrices == {"any": (3, 0, "any"), "vision": (2, 1, "vision")}  # t0's calculator call is not tool use

    # One rule: the reward's reading of the same episodes (EpisodeRecord and Task) agrees with the report's.
    from vtb_app.evaluation.modes import used_tools as report_used_tools
    from vtb_env.loaders import load_tasks
    from vtb_env.trajectory import EpisodeRecord
    from vtb_rewards.mode import used_tools as reward_used_tools

    tasks = {task.id: task for task in load_tasks(data)}
    records = {r["task_id"]: r for r in latest_records(tmp_path / "run" / "records.jsonl").values()}
    readings = {
        (record["task_id"], reading): (
            report_used_tools(record, reading),
            reward_used_tools(EpisodeRecord.from_dict(record["episode"]), reading, tasks[record["task_id"]]),
        )
        for record in records.values()
        for reading in ("any", "vision")
    }
    assert all(report == reward for report, reward in readings.values()), readings
    assert readings[("t0", "vision")] == (False, False) and readings[("t2", "vision")] == (True, True)
    stripped = {**records["t2"], "task": {k: v for k, v in records["t2"]["task"].items() if k != "needs_lookup"}}
    assert report_used_tools(stripped, "vision")  # a record written before needs_lookup: its reference_tools
