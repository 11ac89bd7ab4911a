"""Numbers people can publish (issue 26), each through the `vtb` CLI: spread over samples,
bootstrap CI, pass@k / pass^k, n per cell, paper decimals and best / second-best marks in Markdown,
HTML (headless Chromium) and summary JSON; partial judging made visible; reasoning-model judges;
D13; mode labels from multi-sample text-only runs; the MCC reading; image operations from the AST."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from tests.support.chat_server import ChatServer
from tests.support.cli import eval_args
from tests.support.eval_tasks import task_of, verdict, vtb, write_tasks
from tests.test_report import FLAGS
from vtb_app.evaluation.records import episode_calls, latest_records
from vtb_app.evaluation.runner import sample_seed

# Which (task, sample) passes in the "mixed" run: per-sample APR 3/4, 2/4, 1/4 (mean 0.5, std 0.25).
MIXED = {"t0": (1, 1, 1), "t1": (1, 0, 0), "t2": (0, 0, 0), "t3": (1, 1, 0)}
SEEDS = {sample_seed(0, task, s): (task, s) for task in MIXED for s in range(3)}


def by_sample(passes: dict[str, tuple[int, ...]]):
    """An agent answering 9 (right) or 7 (wrong) per (task, sample), told apart by the request seed."""

    def respond(request):
        task, sample = SEEDS[request["seed"]]
        return {"content": "The total is 9." if passes[task][sample] else "The total is 7."}

    return respond


def rows_of(table: str) -> tuple[list[str], list[list[str]]]:
    lines = [line for line in table.splitlines() if line.startswith("|")]
    split = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    return split[0], split[2:]


def table(tables: str, start: str) -> str:
    return next(t for t in tables.split("\n\n") if t.startswith(start))


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


# -- reasoning-model judges -----------------------------------------------------------------------------

FINAL_MET = json.dumps({"explanation": "states 9", "judge_result": "Met"})
REASONING_REPLIES = [
    # a think block quoting the template, then the final JSON
    {"content": f'<think>The template says to answer "Met" or "Not Met".</think>{FINAL_MET}'},
    # a draft verdict inside the think block, a different final one
    {"content": '<think>Draft: {"judge_result": "Not Met"}. No: the answer says 9.</think>\n' + FINAL_MET},
    # the opening tag added by the chat template: only the closing one is in the reply
    {"content": 'The answer says 9, so "Met" or "Not Met"? Met.</think>' + FINAL_MET},
    # an OpenAI-style reasoning field beside the content
    {"content": FINAL_MET, "reasoning_content": 'judge_result: "Not Met" or "Met"?'},
]


@pytest.mark.parametrize("reply", REASONING_REPLIES)
def test_reasoning_model_judge_replies_are_read_by_their_final_json(reply, tmp_path):
    data = write_tasks(tmp_path / "data", 1, checks=False)
    with ChatServer(lambda request: {"content": "The total is 9."}) as agent, ChatServer(lambda r: reply) as judge:
        code = vtb(
            *eval_args(data, f"openai:m@{agent.base_url}", tmp_path / "run", "--judge", f"openai:j@{judge.base_url}")
        )
    record = latest_records(tmp_path / "run" / "records.jsonl")["t0#0"]
    assert code == 0 and record["verdicts"][0][0]["status"] == "Met" and record["score"]["complete"]


def test_unfinished_thinking_and_reasoning_without_content_are_judge_errors():
    from vtb_rewards.judge.verdict import parse_verdict
    from vtb_rewards.process import parse_error_type

    assert parse_verdict('<think>{"judge_result": "Met"} so far').is_error  # cut off while thinking
    assert parse_verdict('<think>"Met" or "Not Met"</think>{"judge_result": "Not Met"}').status == "Not Met"
    assert parse_error_type('<think>maybe "error_type": "reasoning"</think>{"error_type": "calculation"}') == (
        "calculation"
    )


def test_a_judge_reply_with_only_reasoning_is_a_judge_error(tmp_path):
    data = write_tasks(tmp_path / "data", 1, checks=False)
    reply = {"content": None, "reasoning_content": '{"judge_result": "Met"}'}
    with ChatServer(lambda request: {"content": "The total is 9."}) as agent, ChatServer(lambda r: reply) as judge:
        vtb(*eval_args(data, f"openai:m@{agent.base_url}", tmp_path / "run", "--judge", f"openai:j@{judge.base_url}"))
    verdict_ = latest_records(tmp_path / "run" / "records.jsonl")["t0#0"]["verdicts"][0][0]
    assert verdict_["status"] == "judge_error" and "reasoning but no content" in verdict_["error"]


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


# -- image operations ---------------------------------------------------------------------------------------


def test_image_operations_count_what_the_code_does_not_names_in_it():
    from vtb_app.evaluation.image_ops import operations_in_code

    code = """
import numpy as np
from PIL import Image, ImageDraw, ImageEnhance, ImageOps
img = Image.open("img0.png")  # TODO: crop, resize, rotate, flip, brighten and raise the contrast
note = "rotate and flip if needed"
def unused_helper(image):
    return ImageOps.mirror(image.rotate(90))
if False:
    img = img.transpose(Image.FLIP_LEFT_RIGHT)
rotation_angle, flip = 0, False
arr = np.asarray(img)[10:50, 20:80]
red = arr[:, :, 0]
mirrored = arr[:, ::-1]
ImageDraw.Draw(img).rectangle((1, 2, 3, 4))
img = ImageEnhance.Contrast(img).enhance(2).resize((64, 64))
"""
    assert operations_in_code(code) == {"crop": 1, "flipping": 1, "editing": 1, "contrast": 1, "resize": 1}
    assert operations_in_code("x = 1  # crop resize rotate flip brightness contrast") == {}
    assert operations_in_code("def broken(:\n    img.crop()") == {}
    assert operations_in_code("[" * 5000 + "]" * 5000) == {}


def test_image_operations_in_the_report_from_real_vision_calls(tmp_path):
    data = write_tasks(tmp_path / "data", 1)
    code = (
        "from PIL import Image\n# crop resize rotate flip brightness contrast\nimg = Image.open('img0.png')\n"
        "if False:\n    img = img.rotate(90)\nimg.crop((0, 0, 9, 9)).save('transformed_image_1.png')\n"
    )

    def respond(request):
        if any(m["role"] == "tool" for m in request["messages"]):
            return {"content": "The total is 9."}
        arguments = json.dumps({"code": code})
        call = {"id": "c1", "type": "function", "function": {"name": "python_image_processing", "arguments": arguments}}
        return {"tool_calls": [call]}

    with ChatServer(respond) as agent:
        assert vtb(*eval_args(data, f"openai:m@{agent.base_url}", tmp_path / "run")) == 0
    assert vtb("report", tmp_path / "run", "--out", tmp_path / "report") == 0
    s = json.loads((tmp_path / "report" / "summary.json").read_text())["runs"][0]
    assert s["image_operations"] == {"crop": 1}


@pytest.mark.slow
@pytest.mark.usefixtures("tesseract")
def test_ocr_baseline_samples_and_its_image_operations_through_the_cli(tmp_path):
    """The OCR baseline on the menu tasks with 2 samples: tasks count as tasks, and figure 6 counts
    the operations its vision code performs (per call, each call site once: one crop, one resize, two
    rotations (the deskew and the quarter turns), a median filter, a closing, a dilation, two Gaussian
    blurs (the paper under a shadow band, the paper elsewhere), a perspective warp (a sheet flattened from
    its corners) and a quiet margin), not every operation name in it: the code names no flip and so counts
    none."""
    from tests.support.menu_tasks import write_menu_tasks
    from vtb_env.toolsets import VISION_TOOL

    data = write_menu_tasks(tmp_path / "data", n=2)  # menu-1 is tiny print: read after the vision tool
    assert vtb("eval", "--data", data, "--out", tmp_path / "run", "--samples", 2, "--no-progress") == 0
    assert vtb("report", tmp_path / "run", "--out", tmp_path / "report", "--all-tables") == 0
    s = json.loads((tmp_path / "report" / "summary.json").read_text())["runs"][0]
    assert (s["n"], s["samples"], s["n_episodes"], s["apr"]) == (2, 2, 4, 1.0)
    assert s["apr_std"] == 0.0 and s["pass_at_k"] == s["pass_hat_k"] == {"1": 1.0, "2": 1.0}  # deterministic
    calls = sum(
        1
        for r in latest_records(tmp_path / "run" / "records.jsonl").values()
        for c in episode_calls(r)
        if c["name"] == VISION_TOOL
    )
    assert calls >= 2
    per_call = {"rotation": 2, "others": 7, "crop": 1, "resize": 1}
    assert s["image_operations"] == {name: n * calls for name, n in per_call.items()}
