"""`vtb import-toolkit`: the official toolkit's output files (the layout its scripts write, see
``vtb_app.evaluation.toolkit``) become a run that `vtb judge` re-scores and `vtb report` compares."""

from __future__ import annotations

import json

from tests.support.menu_tasks import write_menu_tasks
from vtb_app.cli import main
from vtb_app.evaluation.records import latest_records


def verdict(met: bool, fenced: bool = False) -> str:
    reply = json.dumps({"explanation": "checked", "judge_result": "Met" if met else "Not Met"})
    return f"```json\n{reply}\n```" if fenced else reply


def single_turn_row(task_id: str, answer: str, tool_use_list, content_list, num_tool_calls: int) -> dict:
    """A row as run_model_response_single_turn.py writes it."""
    return {
        "id": task_id,
        "task_id": task_id,
        "prompt": "...",
        "image": "data/single_turn/images/sample_0/image_0.png",
        "turncase": "single-turn",
        "eval_focus": "region_switch_qa",
        "prompt_category": "finance",
        "golden_answer": "...",
        "tool_trajectory": "",
        "rubrics": "{}",
        "model_answer": answer,
        "num_tool_calls": num_tool_calls,
        "tool_use_list": tool_use_list,
        "content_list": content_list,
    }


def write_toolkit_output(root):
    crop = {
        "function_name": "python_image_processing",
        "function_args": {"code": "img.crop((0, 0, 10, 10))"},
        "observation": {
            "ok": "true",
            "stdout": "",
            "stderr": "",
            "output_path": "/x/transformed_image_0.png",
            "output_paths": ["/x/transformed_image_0.png"],
        },
    }
    search = {
        "function_name": "google_search",
        "function_args": {"query": "menu prices"},
        "observation": {
            "results": [],
            "query": "menu prices",
            "status": "error",
            "error": "SerpAPI key not configured",
        },
    }
    responses = [
        single_turn_row(
            "menu-0",
            "The Garden Salad is $9. answer",
            [crop, search],
            [
                {"step": 0, "content": "Let me zoom."},
                {"step": 1, "content": "Searching."},
                {"step": 2, "content": "The Garden Salad is $9. answer"},
            ],
            2,
        ),
        single_turn_row("menu-1", "It costs $12.", {}, {}, 0),  # tools off: the toolkit writes {} for both lists
        single_turn_row("menu-2", "API Error: rate limited", {}, {}, 0),  # a harness failure, written as the answer
        {
            "id": "menu-3",
            "task_id": "menu-3",
            "turncase": "multi-turn",
            "eval_focus": "follow_up_test",
            "prompt_category": "finance",
            "total_turns": 1,
            "turns": [
                {
                    "turn_number": 0,
                    "prompt": "...",
                    "image": [],
                    "model_answer": "Model hit the maximum number of tool calls",
                    "golden_answer": "9",
                    "tool_trajectory": "",
                    "rubrics": "{}",
                    "num_tool_calls": 20,
                    "tool_use_list": [crop],
                    "content_list": [{"step": 0, "content": "zooming"}],
                }
            ],
        },
    ]
    judged = [  # as run_judge_single_turn.py / run_judge_multi_turn.py write them (menu-1 lacks r2)
        {
            "task_id": "menu-0",
            "turncase": "single-turn",
            "eval_focus": "region_switch_qa",
            "prompt_category": "finance",
            "judge_result": [
                {"rubric_id": "r1", "judge_result": verdict(True)},
                {"rubric_id": "r2", "judge_result": verdict(False, fenced=True)},
            ],
            "score": 5 / 6,
            "accuracy": 1,
        },
        {
            "task_id": "menu-1",
            "turncase": "single-turn",
            "eval_focus": "region_switch_qa",
            "prompt_category": "finance",
            "judge_result": [{"rubric_id": "r1", "judge_result": verdict(True)}],
            "score": 1.0,
            "accuracy": 1,
        },
        {
            "task_id": "menu-3",
            "turncase": "multi-turn",
            "eval_focus": "follow_up_test",
            "prompt_category": "finance",
            "judge_result": [
                [
                    {"rubric_id": "r1", "judge_result": verdict(False)},
                    {"rubric_id": "r2", "judge_result": verdict(False)},
                ]
            ],
            "score": 0.0,
            "accuracy": 0,
        },
    ]
    (root / "model_response.json").write_text(json.dumps(responses, indent=2))
    (root / "judge_results.json").write_text(json.dumps(judged, indent=2))
    return root / "model_response.json", root / "judge_results.json"


def test_import_rescore_and_report_a_toolkit_run(tmp_path, capsys):
    data = write_menu_tasks(tmp_path / "data", n=4)  # prices 9, 13, 4, 9; r1 critical (weight 5), r2 weight 1
    responses, judged = write_toolkit_output(tmp_path)
    run = tmp_path / "imported"
    args = [
        "import-toolkit",
        str(responses),
        "--judge-results",
        str(judged),
        "--data",
        str(data),
        "--model",
        "gpt-x",
        "--out",
        str(run),
    ]
    assert main(args) == 0
    assert (
        "imported 3 toolkit episodes (1 errors: 1 x toolkit API Error; 0 already imported)" in capsys.readouterr().out
    )

    records = {r["task_id"]: r for r in latest_records(run / "records.jsonl").values()}
    assert records["menu-2"]["status"] == "error" and "rate limited" in records["menu-2"]["error"]
    salad = records["menu-0"]
    calls = [call for step in salad["episode"]["turns"][0]["steps"] for call in step["tool_calls"]]
    assert [(c["name"], c["error"]) for c in calls] == [
        ("python_image_processing", None),
        ("web_search", "SerpAPI key not configured"),
    ]
    assert [s["action_text"] for s in salad["episode"]["turns"][0]["steps"]] == [
        "Let me zoom.",
        "Searching.",
        "The Garden Salad is $9. answer",
    ]
    assert salad["answers"] == ["The Garden Salad is $9. answer"] and salad["judge"] == "toolkit:toolkit"
    assert [v["status"] for v in salad["verdicts"][0]] == ["Met", "Not Met"]  # the fenced reply parsed too
    assert salad["score"] == {"score": 5 / 6, "passed": True, "complete": True, "n_judge_errors": 0}
    # an imported run's vision call has no sandbox record of visual work (ToolCallRecord.image_work), so it counts
    # as no call (docs/rewards.md, vision credit), and the failed web_search is no counted tool (no lookup needed)
    assert salad["toolkit"] == {"score": 5 / 6, "accuracy": 1} and "tool_success" not in salad["reward_components"]
    assert salad["reward_components"]["used_tools"] == 0.0
    # The toolkit dropped r2 of menu-1 from its verdicts: a judge_error here, never a silent "Not Met".
    assert [v["status"] for v in records["menu-1"]["verdicts"][0]] == ["Met", "judge_error"]
    assert records["menu-1"]["score"]["complete"] is False and records["menu-1"]["tool_use"]["used_tools"] is False
    capped = records["menu-3"]["episode"]["turns"][0]
    assert capped["hit_tool_cap"] and capped["final_answer"] == "Model hit the maximum number of tool calls"

    assert main(args) == 0  # re-running adds nothing
    assert (
        "imported 0 toolkit episodes (1 errors: 1 x toolkit API Error; 3 already imported)" in capsys.readouterr().out
    )

    # Re-score with the exact checks (r1: the price; r2: the word "answer"): menu-1 ($12 for a $13 item) now fails.
    assert main(["judge", str(run), "--judge", "exact", "--out", str(tmp_path / "rejudged")]) == 0
    rejudged = {r["task_id"]: r for r in latest_records(tmp_path / "rejudged" / "records.jsonl").values()}
    assert rejudged.pop("menu-2")["status"] == "error"  # the harness failure comes along, still counted
    assert {tid: r["score"]["passed"] for tid, r in rejudged.items()} == {
        "menu-0": True,
        "menu-1": False,
        "menu-3": False,
    }
    assert rejudged["menu-1"]["score"]["complete"] and rejudged["menu-1"]["reward"] < records["menu-1"]["reward"]
    capsys.readouterr()

    assert main(["report", f"toolkit={run}", f"exact={tmp_path / 'rejudged'}", "--out", str(tmp_path / "report")]) == 0
    table = capsys.readouterr().out
    assert "| toolkit" in table and "| exact" in table and "report.html" in table
    summary = {s["name"]: s for s in json.loads((tmp_path / "report" / "summary.json").read_text())["runs"]}
    # APR over ALL tasks: the harness failure (menu-2) counts as not passed, in both runs.
    assert (
        summary["toolkit"]["apr"] == 2 / 4
        and summary["toolkit"]["apr_completed"] == 2 / 3
        and summary["toolkit"]["n_errors"] == 1
    )
    assert summary["exact"]["apr"] == 1 / 4 and summary["exact"]["n_errors"] == 1 and summary["exact"]["n_missing"] == 0


def test_the_toolkits_judge_failure_placeholder_imports_as_judge_error(tmp_path, capsys):
    data = write_menu_tasks(tmp_path / "data", n=4)
    responses, judged = write_toolkit_output(tmp_path)
    rows = json.loads(judged.read_text())
    # what run_judge_*_turn.py writes after its retries
    placeholder = '{"explanation": "Failed to get judge result", "judge_result": "Not Met"}'
    rows[0]["judge_result"][1]["judge_result"] = placeholder
    judged.write_text(json.dumps(rows))
    run = tmp_path / "imported"
    assert (
        main(["import-toolkit", str(responses), "--judge-results", str(judged), "--data", str(data), "--out", str(run)])
        == 0
    )
    salad = latest_records(run / "records.jsonl")["menu-0#0"]
    assert [v["status"] for v in salad["verdicts"][0]] == [
        "Met",
        "judge_error",
    ] and "Failed to get judge result" in salad["verdicts"][0][1]["error"]
    assert salad["score"]["complete"] is False
    capsys.readouterr()
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 0
    assert (
        json.loads((tmp_path / "report" / "summary.json").read_text())["runs"][0]["n_judge_incomplete"] == 2
    )  # menu-0 and menu-1


def test_malformed_rows_and_harness_failures_are_counted_by_kind(tmp_path, capsys):
    """Rows of the wrong shape become error records (the import goes on); the summary counts the errors by kind."""
    data = write_menu_tasks(tmp_path / "data", n=6)
    responses, judged = write_toolkit_output(tmp_path)
    rows = json.loads(responses.read_text())
    rows[1]["tool_use_list"], rows[1]["content_list"] = "not a list", 5  # menu-1
    rows += [
        single_turn_row("menu-4", "Processing Error: image file missing", {}, {}, 0),
        {"id": "menu-5", "task_id": "menu-5", "turncase": "multi-turn", "turns": ["not a turn"]},
    ]
    responses.write_text(json.dumps(rows))
    verdicts = json.loads(judged.read_text())
    verdicts[0]["judge_result"] = {"r1": "Met"}  # not the toolkit's list: menu-0's rubrics stay unjudged
    judged.write_text(json.dumps(verdicts))
    run = tmp_path / "imported"
    args = ["import-toolkit", str(responses), "--judge-results", str(judged), "--data", str(data), "--out", str(run)]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert (
        "imported 2 toolkit episodes (4 errors: 2 x ToolkitRowError, 1 x toolkit API Error, "
        "1 x toolkit Processing Error; 0 already imported)"
    ) in out
    assert "errors: 2 x ToolkitRowError, first: ToolkitRowError: turn 0: tool_use_list is a str, not a list" in err
    assert "errors: 1 x toolkit Processing Error, first: toolkit Processing Error: image file missing" in err
    assert "judge errors: 2 x the toolkit's judge results have no verdict for this rubric" in err
    records = {r["task_id"]: r for r in latest_records(run / "records.jsonl").values()}
    assert {tid: r["status"] for tid, r in records.items()} == {
        "menu-0": "ok",
        "menu-1": "error",
        "menu-2": "error",
        "menu-3": "ok",
        "menu-4": "error",
        "menu-5": "error",
    }
    assert records["menu-5"]["error"] == "ToolkitRowError: turns is a list, not a list of objects"
    assert [v["status"] for v in records["menu-0"]["verdicts"][0]] == ["judge_error", "judge_error"]
