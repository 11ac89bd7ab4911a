"""`vtb eval` end to end: real subprocesses, a real chat server, kill mid-run, resume, re-judge, report."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import threading

import pytest

from tests.support.chat_server import ChatServer
from tests.support.cli import eval_args, wait_for_records
from tests.support.menu_tasks import ROOT, write_menu_tasks
from vtb_app.evaluation.records import RunLog, done_keys, iter_records, latest_records


def vtb(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "vtb_app.cli", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def test_run_log_repairs_a_torn_line_and_the_last_ok_record_wins(tmp_path):
    path = tmp_path / "records.jsonl"
    with RunLog(path) as log:
        log.append({"key": "a#0", "status": "error", "error": "boom"})
        log.append({"key": "b#0", "status": "ok"})
    with open(path, "a") as handle:
        handle.write('{"key": "a#0", "status": "ok", "trunc')  # a crash mid-write
    with RunLog(path) as log:
        log.append({"key": "a#0", "status": "ok"})
        log.append({"key": "b#0", "status": "error", "error": "later failure"})
    assert len(list(iter_records(path))) == 4 and path.read_text().count("\n") == 4
    assert done_keys(path) == {"a#0", "b#0"}
    assert latest_records(path)["b#0"]["status"] == "ok"


@pytest.mark.slow
def test_eval_survives_a_kill_resumes_without_loss_or_duplicates_and_retries_errors(tmp_path):
    data = write_menu_tasks(tmp_path / "data", n=6)
    out = tmp_path / "run"
    fail_first = {"on": True}

    def respond(request):
        prompt = json.dumps(request["messages"])
        if "Lemon Soda" in prompt and fail_first["on"]:
            return {"status": 400, "body": {"error": {"message": "content policy"}}}  # permanent: an error record
        return {"content": "The answer is 13."}

    with ChatServer(respond, latency_s=0.4) as server:
        # one episode at a time (the openai: default is 64 in flight): the kill lands between records
        args = eval_args(data, f"openai:m@{server.base_url}", out, "--concurrency", "1")
        process = vtb(*args)
        wait_for_records(out / "records.jsonl", 2, timeout_s=60)
        process.send_signal(signal.SIGKILL)
        process.wait()
        before = list(iter_records(out / "records.jsonl"))
        assert 2 <= len(before) < 6, "the kill should land mid-run"

        fail_first["on"] = False
        again = vtb(*args)  # without --resume an existing run is refused
        refusal = again.stderr.read()
        assert again.wait() == 2 and "--resume" in refusal and "Traceback" not in refusal

        resumed = vtb(*args, "--resume")
        stdout, stderr = resumed.communicate(timeout=120)
        assert resumed.returncode == 0, stderr

    records = list(iter_records(out / "records.jsonl"))
    ok_keys = [r["key"] for r in records if r["status"] == "ok"]
    assert sorted(ok_keys) == [f"menu-{i}#0" for i in range(6)]  # each task done exactly once
    errors = [r for r in records if r["status"] == "error"]
    assert all("content policy" in r["error"] for r in errors)
    assert len(records) == len(ok_keys) + len(errors)
    by_key = latest_records(out / "records.jsonl")
    assert [by_key[f"menu-{i}#0"]["score"]["passed"] for i in range(6)] == [False, True, False, False, True, False]
    assert "Overall" in stdout and "33.33" in stdout  # 2 of 6 tasks ask for 13
    assert summary_width(stdout) <= 100  # the console summary; the rest in `vtb report`

    report = vtb("report", str(out), "--out", str(tmp_path / "report"))
    stdout, stderr = report.communicate(timeout=120)
    assert report.returncode == 0, stderr
    (summary,) = json.loads((tmp_path / "report" / "summary.json").read_text())["runs"]
    assert (summary["n"], summary["n_errors"], summary["apr"]) == (6, 0, pytest.approx(2 / 6))
    header, row = [
        [cell.strip() for cell in line.strip("|").split("|")] for line in stdout.splitlines() if line.startswith("| ")
    ][:2]
    assert row[header.index("APR (%) [95% CI]")].split(" [")[0] == "33.33" and "over all 6 tasks" in stdout
    assert summary_width(stdout) <= 100 and "report.html" in stdout
    written = {path.name for path in (tmp_path / "report").iterdir()}
    assert {
        "tables.md",
        "summary.json",
        "report.html",
        "apr_by_category.png",
        "apr_vs_tool_use.png",
        "image_operations.png",
    } <= written


@pytest.mark.slow
def test_ctrl_c_mid_run_then_resume_loses_and_duplicates_nothing(tmp_path):
    # 10 tasks, 2 in flight; every request after the first two waits until the interrupt is sent, so it
    # lands mid-run however late a loaded machine notices the records (timing alone failed twice under load)
    tasks = 10
    data = write_menu_tasks(tmp_path / "data", n=tasks)
    out = tmp_path / "run"
    interrupted, served = threading.Event(), itertools.count(1)

    def answer(request):
        if next(served) > 2:
            interrupted.wait(timeout=60)
        return {"content": "The answer is 13."}

    with ChatServer(answer, latency_s=0.2) as server:
        args = eval_args(data, f"openai:m@{server.base_url}", out, "--concurrency", "2")
        # A shell's background job inherits SIGINT ignored (`cmd &`), and Python keeps it so: give the
        # child Ctrl-C's default meaning, as a terminal's foreground job has it
        process = vtb(*args, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        wait_for_records(out / "records.jsonl", 2, timeout_s=60)
        process.send_signal(signal.SIGINT)
        interrupted.set()  # the episodes in flight finish and are kept
        stdout, stderr = process.communicate(timeout=60)
        assert process.returncode == 130, stderr
        before = [r["key"] for r in iter_records(out / "records.jsonl")]
        assert 2 <= len(before) < tasks and len(set(before)) == len(before), "the interrupt should land mid-run"
        assert "Traceback" not in stderr and f"interrupted: {len(before)} items done" in stderr and "--resume" in stderr
        # one request per episode: the episodes in flight finished and were kept
        assert len(server.requests) == len(before)

        resumed = vtb(*args, "--resume")
        stdout, stderr = resumed.communicate(timeout=120)
        assert resumed.returncode == 0, stderr
        assert f"{tasks - len(before)} done, 0 errors, {len(before)} already done" in stdout

    records = list(iter_records(out / "records.jsonl"))
    assert sorted(r["key"] for r in records) == [f"menu-{i}#0" for i in range(tasks)]  # each exactly once, none lost
    assert all(r["status"] == "ok" for r in records)


@pytest.mark.slow
def test_judge_rescores_saved_answers_with_another_rule(tmp_path):
    data = write_menu_tasks(tmp_path / "data", n=2)
    with ChatServer(lambda request: {"content": "13"}) as server:
        run = vtb(*eval_args(data, f"openai:m@{server.base_url}", tmp_path / "run"))
        assert run.wait(timeout=60) == 0, run.stderr.read()
    # "13" fails the weight-1 "answer" text check but passes the critical one; with critical = flag
    # (r2 is not flagged) the pass does not change, but scores are recomputed from fresh verdicts.
    rejudge = vtb(
        "judge",
        str(tmp_path / "run"),
        "--judge",
        "exact",
        "--critical-rule",
        "either",
        "--out",
        str(tmp_path / "rejudged"),
    )
    stdout, stderr = rejudge.communicate(timeout=60)
    assert rejudge.returncode == 0, stderr
    assert "re-judged 2 records" in stdout and "4 exact checks" in stdout
    records = latest_records(tmp_path / "rejudged" / "records.jsonl")
    assert {r["key"]: r["score"]["passed"] for r in records.values()} == {"menu-0#0": False, "menu-1#0": True}
    assert all(r["episode"] and r["answers"] == ["13"] for r in records.values())
    again = vtb(
        "judge",
        str(tmp_path / "run"),
        "--judge",
        "exact",
        "--out",
        str(tmp_path / "rejudged"),
        "--critical-rule",
        "either",
    )
    assert "re-judged 0 records (2 already done)" in again.communicate(timeout=60)[0]


def summary_width(stdout: str) -> int:
    """The widest line of the printed summary (its title, table and notes; not the lines naming paths)."""
    return max(len(line) for line in stdout.splitlines() if line.startswith(("Overall", "|", ">")))


def test_progress_writes_plain_lines_about_every_tenth_when_not_a_terminal():
    import io

    from vtb_app.evaluation.progress import Progress

    stream = io.StringIO()
    progress = Progress(25, stream=stream)
    for i in range(25):
        progress.update({"status": "ok", "score": {"passed": i < 5}})
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert 10 <= len(lines) <= 13
    assert lines[-1].startswith("100%|") and " 25/25 " in lines[-1] and "pass 20.0% errors 0" in lines[-1]
