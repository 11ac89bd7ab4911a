"""Numbers people can publish (issue 26), each through the `vtb` CLI: spread over samples, bootstrap CI, pass@k /
pass^k, n per cell, paper decimals and best / second-best marks in Markdown, HTML (headless Chromium) and
summary JSON; partial judging made visible; APR over fully judged tasks; per-turn scores that ignore turns
without rubrics (D13)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from tests.support.chat_server import ChatServer
from tests.support.cli import eval_args
from tests.support.eval_tasks import verdict, vtb, write_tasks
from tests.support.sample_runs import MIXED, by_sample, rows_of, table
from tests.test_report import FLAGS
from vtb_app.evaluation.records import latest_records


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory) -> Path:
    """Three `--samples 3` runs of 4 tasks (finance and medicine) and their report with --per-trial."""
    root = tmp_path_factory.mktemp("stats")
    data = write_tasks(root / "data", 4, domains=("finance", "medicine"))
    runs = {"mixed": MIXED, "good": dict.fromkeys(MIXED, (1, 1, 1)), "bad": dict.fromkeys(MIXED, (0, 0, 0))}
    for name, passes in runs.items():
        with ChatServer(by_sample(passes)) as agent:
            assert vtb(*eval_args(data, f"openai:m@{agent.base_url}", root / name, "--samples", 3)) == 0
    args = [f"{name}={root / name}" for name in runs]
    assert vtb("report", *args, "--out", root / "report", "--all-tables", "--per-trial") == 0
    return root / "report"


def test_samples_give_spread_ci_passk_and_n_per_cell_in_json(three_runs):
    summary = json.loads((three_runs / "summary.json").read_text())
    mixed = summary["runs"][0]
    assert (mixed["n"], mixed["samples"], mixed["n_episodes"]) == (4, 3, 12)  # tasks count as tasks
    assert mixed["apr"] == pytest.approx(0.5) and mixed["apr_std"] == pytest.approx(0.25)
    assert mixed["apr_by_sample"] == pytest.approx({"0": 0.75, "1": 0.5, "2": 0.25})
    assert mixed["ars"] == pytest.approx(0.5) and mixed["ars_std"] == pytest.approx(0.25)
    low, high = mixed["apr_ci"]
    assert 0.0 <= low < 0.5 < high <= 1.0
    assert mixed["pass_at_k"] == pytest.approx({"1": 0.5, "2": (1 + 2 / 3 + 0 + 1) / 4, "3": 0.75})
    assert mixed["pass_hat_k"] == pytest.approx({"1": 0.5, "2": (1 + 0 + 0 + 1 / 3) / 4, "3": 0.25})
    finance = mixed["by_turncase_domain"]["single-turn"]["Finance"]  # t0 (3 of 3) and t2 (0 of 3)
    medicine = mixed["by_turncase_domain"]["single-turn"]["Medical"]  # t1 (1 of 3) and t3 (2 of 3)
    assert (finance["n"], finance["apr"], finance["apr_std"]) == (2, 0.5, 0.0)
    assert (medicine["n"], medicine["apr"], medicine["apr_std"]) == (2, 0.5, pytest.approx(0.5))
    assert summary["runs"][1]["apr_std"] == 0.0 and summary["runs"][1]["apr_ci"] == [1.0, 1.0]
    overall = next(marks for title, marks in summary["marks"].items() if title.startswith("Overall"))
    assert overall["APR (%)"] == {"best": ["good"], "second": ["mixed"]}  # the marks the tables show


def test_markdown_shows_spread_decimals_n_trials_and_best_marks(three_runs):
    tables = (three_runs / "tables.md").read_text()
    header, rows = rows_of(table(tables, "Overall"))
    mixed, good, bad = ({h: c for h, c in zip(header, row, strict=True)} for row in rows)
    assert (mixed["tasks"], mixed["samples"]) == ("4", "3")
    assert mixed["APR (%)"] == "_50.00 ± 25.00_" and good["APR (%)"] == "**100.00 ± 0.00**"  # second, best
    assert bad["APR (%)"] == "0.00 ± 0.00" and mixed["ARS"] == "_0.5000 ± 0.2500_"  # ARS: the paper's 4 decimals
    assert (mixed["APR trial 1"], mixed["APR trial 2"], mixed["APR trial 3"]) == ("75.00", "50.00", "25.00")
    assert good["APR 95% CI"] == "[100.00, 100.00]"
    assert "The best run in a column (higher is better): bold in Markdown" in tables
    header, rows = rows_of(table(tables, "APR (%) by turn case and domain (table 3)"))
    cells = dict(zip(header, rows[0], strict=True))
    assert rows[0][0] == "mixed" and rows[1][0] == "mixed · trial 1"  # per-trial rows
    assert cells["ST Fin"] == "_50.00 ± 0.00 (n=2)_" and cells["ST Med"] == "_50.00 ± 50.00 (n=2)_"  # second best
    header, rows = rows_of(table(tables, "Samples: pass@k and pass^k"))
    cells = dict(zip(header, rows[0], strict=True))
    assert (cells["pass@2 (%)"], cells["pass@3 (%)"], cells["pass^3 (%)"]) == ("_66.67_", "_75.00_", "_25.00_")


@pytest.mark.slow
def test_html_shows_the_statistics_in_headless_chromium(three_runs, chromium, tmp_path):
    page = (three_runs / "report.html").resolve().as_uri()
    common = [chromium, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*common, "--dump-dom", page], capture_output=True, text=True, timeout=90).stdout
    assert '<td class="best">100.00 ± 0.00</td>' in dom and '<td class="second">50.00 ± 25.00</td>' in dom
    assert "50.00 ± 50.00 (n=2)" in dom and "pass^3 (%)" in dom and "mixed · trial 3" in dom
    assert "Tasks count as tasks, each the mean of its 3 sample(s)" in dom
    shot = tmp_path / "shot.png"
    subprocess.run([*common, f"--screenshot={shot}", "--window-size=1600,1000", page], capture_output=True, timeout=90)
    with Image.open(shot) as image:
        colors = {color for _, color in image.convert("RGB").getcolors(maxcolors=1 << 22)}
    assert (248, 201, 196) in colors and (201, 220, 248) in colors  # the best (red) and second (blue) cells drew


def test_partial_judging_is_marked_and_process_judge_errors_are_na(tmp_path):
    data = write_tasks(tmp_path / "data", 2, checks=False, key_steps=("Add the prices",))

    def judge(request):
        prompt = request["messages"][0]["content"]
        if "**Key Step:**" in prompt or "[t1]" in prompt:  # the judge fails every key step, and t1's rubric
            return {"status": 400, "body": {"error": {"message": "judge overloaded"}}}
        return verdict(True)

    with ChatServer(lambda request: {"content": "The total is 9."}) as agent, ChatServer(judge) as judge_server:
        vtb(
            *eval_args(
                data, f"openai:m@{agent.base_url}", tmp_path / "run", "--judge", f"openai:j@{judge_server.base_url}"
            ),
            "--process-metrics",
        )
    assert vtb("report", tmp_path / "run", "--out", tmp_path / "report", "--all-tables") == 0
    s = json.loads((tmp_path / "report" / "summary.json").read_text())["runs"][0]
    # t0: rubric Met, key step unjudged; t1: rubric unjudged. Only t1 counts an unjudged rubric; both are redone.
    assert (s["apr"], s["n_incomplete"], s["n_judge_incomplete"]) == (0.5, 1, 2)
    assert (s["kcoverage"], s["process_n"], s["process_judge_errors"]) == (None, 0, 2)
    marks = json.loads((tmp_path / "report" / "summary.json").read_text())["marks"]
    assert next(m for title, m in marks.items() if title.startswith("Overall"))["APR (%)"] == {"partial": ["run"]}
    tables = (tmp_path / "report" / "tables.md").read_text()
    header, rows = rows_of(table(tables, "Overall"))
    row = dict(zip(header, rows[0], strict=True))
    assert row["APR (%)"] == "50.00†" and row["judging incomplete (episodes)"] == "2"
    assert "† counts episodes with unjudged rubrics as not Met" in tables
    header, rows = rows_of(table(tables, "APR (%) by turn case and domain (table 3)"))
    assert dict(zip(header, rows[0], strict=True))["ST Fin"] == "50.00 (n=2)†"
    header, rows = rows_of(table(tables, "Process metrics"))
    row = dict(zip(header, rows[0], strict=True))
    assert row["episodes judged"] == "0" and row["tool effectiveness"] == "n/a (2 judge errors)"
    html = (tmp_path / "report" / "report.html").read_text()
    assert '<td class="partial">50.00†</td>' in html and "n/a (2 judge errors)" in html

    # Once the judge answers the rubrics, the fully judged APR stands beside the lower bound.
    record = latest_records(tmp_path / "run" / "records.jsonl")["t0#0"]
    assert record["score"]["complete"] and record["score"]["passed"]


def test_apr_over_fully_judged_tasks(tmp_path):
    data = write_tasks(tmp_path / "data", 2, checks=False)

    def judge(request):
        if "[t1]" in request["messages"][0]["content"]:
            return {"status": 400, "body": {"error": {"message": "judge overloaded"}}}
        return verdict(True)

    with ChatServer(lambda request: {"content": "The total is 9."}) as agent, ChatServer(judge) as judge_server:
        vtb(
            *eval_args(
                data, f"openai:m@{agent.base_url}", tmp_path / "run", "--judge", f"openai:j@{judge_server.base_url}"
            )
        )
    assert vtb("report", tmp_path / "run", "--out", tmp_path / "report") == 0
    s = json.loads((tmp_path / "report" / "summary.json").read_text())["runs"][0]
    assert (s["apr"], s["apr_fully_judged"], s["n_fully_judged"]) == (0.5, 1.0, 1)
    header, rows = rows_of(table((tmp_path / "report" / "tables.md").read_text(), "Overall"))
    assert dict(zip(header, rows[0], strict=True))["APR (%, fully judged tasks)"] == "100.00"


# -- D13 --------------------------------------------------------------------------------------------------


def test_per_turn_scores_ignore_turns_without_rubrics(tmp_path):
    data = write_tasks(tmp_path / "data", 1, turns=2)
    path = data / "tasks.jsonl"
    task = json.loads(path.read_text())
    task["turns"][1]["rubrics"] = {}  # a follow-up turn without rubrics
    path.write_text(json.dumps(task) + "\n")
    with ChatServer(lambda request: {"content": "The total is 9."}) as agent:
        for mode in ("pooled", "per_turn"):
            vtb(*eval_args(data, f"openai:m@{agent.base_url}", tmp_path / mode, "--multi-turn", mode))
    for mode in ("pooled", "per_turn"):
        score = latest_records(tmp_path / mode / "records.jsonl")["t0#0"]["score"]
        assert (score["score"], score["passed"]) == (1.0, True), mode  # was 0.5 in per_turn
