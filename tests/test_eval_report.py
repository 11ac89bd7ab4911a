"""Evaluation reports you can publish, through the `vtb` CLI against real HTTP servers on 127.0.0.1 (issue 13):
denominators, report labelling and domains, default concurrency, process metrics and error types."""

from __future__ import annotations

import json

from tests.support.chat_server import ChatServer
from tests.support.cli import eval_args
from tests.support.eval_tasks import summary_of, task_of, verdict, vtb, write_tasks
from vtb_app.evaluation.records import latest_records

# -- 1, 10, 11: denominators, report labelling and domains, default concurrency -----------------------


def test_apr_counts_every_task_and_the_report_says_how(tmp_path, capsys):
    domains = ("medicine", "sport", "chemistry", "finance", "generalist", "astrology")
    data = write_tasks(tmp_path / "data", 8, domains=domains)

    def respond(request):
        if task_of(request) in ("t5", "t6", "t7"):  # fails for good: a non-transient error
            return {"status": 400, "body": {"error": {"message": "bad request"}}}
        return {"content": "The total is 9."}

    with ChatServer(respond, latency_s=0.3) as agent:
        code = vtb(*eval_args(data, f"openai:m@{agent.base_url}", tmp_path / "run"))
    assert code == 1  # some episodes failed
    assert agent.peak_in_flight >= 4  # the default keeps many requests in flight (8 tasks, no --concurrency)
    out = capsys.readouterr().out
    assert "| run " in out and "| 62.50 [" in out  # APR over all 8 tasks (the 5 completed: `vtb report`)

    vtb("report", tmp_path / "run", "--out", tmp_path / "report")
    s = summary_of(tmp_path / "report")
    assert (s["n"], s["n_completed"], s["n_errors"], s["n_missing"]) == (8, 5, 3, 0)
    assert s["apr"] == 5 / 8 and s["apr_completed"] == 1.0 and s["ars"] == 5 / 8

    # A task that never produced a record (a line lost) counts as not passed too, and is counted.
    path = tmp_path / "run" / "records.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    kept = [line for line in lines if '"task_id": "t0"' not in line]
    path.write_text("".join(kept))
    vtb("report", tmp_path / "run", "--out", tmp_path / "report2", "--all-tables")
    s = summary_of(tmp_path / "report2")
    assert (s["n"], s["n_completed"], s["n_missing"], s["apr"]) == (8, 4, 1, 4 / 8)

    tables = (tmp_path / "report2" / "tables.md").read_text().split("\n\n")
    assert all("[critical rule weight>=4, multi-turn pooled]" in table.splitlines()[0] for table in tables)
    table3 = next(t for t in tables if "(table 3)" in t).splitlines()
    header = [cell.strip() for cell in table3[1].strip("|").split("|")]
    assert header[:2] == ["run", "Overall"]
    assert header[2:9] == ["ST STEM", "ST Med", "ST Fin", "ST Sprt", "ST Gen", "ST Other", "MT STEM"]
    groups = s["by_turncase_domain"]["single-turn"]
    # medicine -> Medical, sport -> Sports, chemistry -> STEM, astrology -> Other: none dropped.
    assert {d: groups[d]["n"] for d in ("Medical", "Sports", "STEM", "Finance", "Generalist", "Other")} == {
        "Medical": 2,
        "Sports": 2,
        "STEM": 1,
        "Finance": 1,
        "Generalist": 1,
        "Other": 1,
    }


def test_default_concurrency_is_bounded_for_in_process_agents():
    from vtb_app.evaluation.commands import HTTP_AGENT_CONCURRENCY, default_concurrency

    assert default_concurrency("openai:m@http://127.0.0.1:1/v1") == HTTP_AGENT_CONCURRENCY >= 32
    assert default_concurrency("hf:/models/tiny") == 1
    assert 1 <= default_concurrency("ocr-baseline") <= 1024


# -- 6, 7: process metrics and error types ---------------------------------------------------------------


def test_process_metrics_and_error_types_reach_the_report(tmp_path, capsys):
    data = write_tasks(tmp_path / "data", 2, checks=False, key_steps=("Read the two prices", "Add the prices"))

    def agent_reply(request):
        if task_of(request) == "t0" and not any(m["role"] == "tool" for m in request["messages"]):
            call = {
                "id": "c1",
                "type": "function",
                "function": {"name": "calculator", "arguments": json.dumps({"expression": "4+5"})},
            }
            return {"content": "I add the prices 4 and 5.", "tool_calls": [call]}
        return {"content": "The total is 9." if task_of(request) == "t0" else "The total is 7."}

    def judge_reply(request):
        prompt = request["messages"][0]["content"]
        if "**Key Step:**" in prompt:  # the first key step is never in the reasoning, the second always
            return verdict("Add the prices" in prompt)
        if "**Tool Call:**" in prompt:
            return verdict(True)
        if "**Rubrics Not Met:**" in prompt:
            return {"content": json.dumps({"explanation": "wrong sum", "error_type": "calculation"})}
        return verdict("9" in prompt.split("**Model Answer:**")[-1])

    with ChatServer(agent_reply) as agent, ChatServer(judge_reply) as judge:
        judge_spec = f"openai:j@{judge.base_url}"
        assert (
            vtb(
                *eval_args(
                    data,
                    "openai-text:m@" + agent.base_url,
                    tmp_path / "x",
                    "--judge",
                    judge_spec,
                    "--process-metrics",
                    "--judge-structured",
                    "off",
                )
            )
            == 0
        )
        capsys.readouterr()
        assert (
            vtb(
                "eval",
                "--data",
                data,
                "--agent",
                f"openai:m@{agent.base_url}",
                "--judge",
                "exact",
                "--process-metrics",
                "--out",
                tmp_path / "bad",
            )
            == 2
        )  # the passes need an LLM judge
        assert (
            vtb(
                *eval_args(
                    data,
                    f"openai:m@{agent.base_url}",
                    tmp_path / "run",
                    "--judge",
                    judge_spec,
                    "--process-metrics",
                    "--error-types",
                )
            )
            == 0
        )
        records = {r["task_id"]: r for r in latest_records(tmp_path / "run" / "records.jsonl").values()}
        assert records["t0"]["process"]["kcoverage"] == 0.0  # the formula: no covered prefix
        assert records["t0"]["process"]["kcoverage_furthest"] == 1.0  # the text: the last key step is reached
        assert records["t0"]["process"]["tool_effectiveness"] == 1.0
        assert records["t1"]["process"]["tool_effectiveness"] is None  # no tool calls
        assert records["t1"]["error_type"] == "calculation" and records["t0"]["error_type"] is None
        # vtb judge computes them on request too.
        assert (
            vtb("judge", tmp_path / "run", "--judge", judge_spec, "--process-metrics", "--out", tmp_path / "rejudged")
            == 0
        )
        rejudged = {r["task_id"]: r for r in latest_records(tmp_path / "rejudged" / "records.jsonl").values()}
        assert rejudged["t0"]["process"]["kcoverage_furthest"] == 1.0
    vtb("report", tmp_path / "run", "--out", tmp_path / "report", "--all-tables")
    tables = (tmp_path / "report" / "tables.md").read_text()
    process = next(t for t in tables.split("\n\n") if t.startswith("Process metrics")).splitlines()
    assert (
        "KCoverage (longest covered prefix: the formula)" in process[1]
        and "KCoverage (furthest key step reached: the text)" in process[1]
    )
    assert [c.strip() for c in process[3].strip("|").split("|")] == ["run", "2", "0", "0.0000", "1.0000", "1.0000"]
    errors = next(t for t in tables.split("\n\n") if t.startswith("Error types")).splitlines()
    assert "calculation" in errors[1] and "1 (100.00%)" in errors[3]
