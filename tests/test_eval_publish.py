"""Evaluation you can publish (issue 13), each behaviour through the `vtb` CLI against real HTTP
servers on 127.0.0.1: denominators, judge outages, crash-proof records, per-sample seeds, process
metrics and error types, paper defaults, reasoning-model judges, report labelling, concurrency,
images per prompt."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.support.chat_server import ChatServer
from tests.support.cli import eval_args
from vtb_app.cli import main
from vtb_app.evaluation.records import latest_records
from vtb_env.prompts import NO_TOOLS_SYSTEM_PROMPT, STRONG_SYSTEM_PROMPT

TASK_TAG = re.compile(r"\[(t\d+)\]")


def write_tasks(
    root: Path, n: int, *, domains=("finance",), checks: bool = True, key_steps=(), turns: int = 1, images: int = 1
) -> Path:
    """``n`` project-format tasks ``t0..``: "[tI] What is the total?", golden answer 9."""
    (root / "images").mkdir(parents=True, exist_ok=True)
    for k in range(images):
        Image.new("RGB", (64, 48), (40 * k, 90, 160)).save(root / "images" / f"img{k}.png")
    rubric = {
        "description": "states that the total is 9",
        "weight": 5,
        **({"check": {"type": "number", "value": 9}} if checks else {}),
    }
    with open(root / "tasks.jsonl", "w") as handle:
        for i in range(n):
            turn = {
                "prompt": f"[t{i}] What is the total?",
                "images": [f"img{k}.png" for k in range(images)],
                "golden_answer": "9",
                "rubrics": {"r1": rubric},
                "key_steps": list(key_steps),
            }
            handle.write(
                json.dumps(
                    {
                        "id": f"t{i}",
                        "prompt_category": domains[i % len(domains)],
                        "eval_focus": "region_switch_qa",
                        "turns": [turn] + [{**turn, "images": []} for _ in range(turns - 1)],
                    }
                )
                + "\n"
            )
    return root


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content or "")


def task_of(request: dict[str, Any]) -> str:
    return next(m.group(1) for message in request["messages"] if (m := TASK_TAG.search(text_of(message))))


def answers(text: str = "The total is 9."):
    return lambda request: {"content": text}


def verdict(met: bool) -> dict[str, Any]:
    return {"content": json.dumps({"explanation": "checked", "judge_result": "Met" if met else "Not Met"})}


def vtb(*args: Any) -> int:
    return main([str(a) for a in args])


def summary_of(report: Path) -> dict[str, Any]:
    return json.loads((report / "summary.json").read_text())["runs"][0]


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


# -- 2: judge outages -------------------------------------------------------------------------------


def test_judge_outages_are_visible_and_retried_by_resume_and_vtb_judge(tmp_path, capsys):
    data = write_tasks(tmp_path / "data", 3, checks=False)
    outage = {"on": True}

    def judge(request):
        if outage["on"]:
            return {"status": 400, "body": {"error": {"message": "judge overloaded"}}}
        return verdict("9" in request["messages"][0]["content"].split("**Model Answer:**")[-1])

    with ChatServer(answers()) as agent, ChatServer(judge) as judge_server:
        run = eval_args(
            data, f"openai:m@{agent.base_url}", tmp_path / "run", "--judge", f"openai:j@{judge_server.base_url}"
        )
        vtb(*run)
        out, err = capsys.readouterr()
        # openai's message text differs across its majors ("- judge overloaded" / "- {'error': {'message': ...}}")
        assert "judge errors: 3 x BadRequestError, first: BadRequestError: Error code: 400 - " in err
        assert "judge overloaded" in err.split("judge errors:", 1)[1]
        records = latest_records(tmp_path / "run" / "records.jsonl").values()
        assert all(r["status"] == "ok" and not r["score"]["complete"] for r in records)
        assert all(r["reward_components"]["judge_incomplete"] == 1.0 for r in records)  # the env's info says so
        vtb("report", tmp_path / "run", "--out", tmp_path / "r1")
        assert summary_of(tmp_path / "r1")["n_judge_incomplete"] == 3 and "`vtb eval --resume` judges them" in out

        outage["on"] = False
        agent_calls = len(agent.requests)
        vtb(*run, "--resume")
        assert "3 re-judged" in capsys.readouterr().out
        assert len(agent.requests) == agent_calls  # judged again from the saved answers: no episode reran
        records = latest_records(tmp_path / "run" / "records.jsonl").values()
        assert all(r["score"]["complete"] and r["score"]["passed"] for r in records)
        assert all(r["reward_components"]["judge_incomplete"] == 0.0 for r in records)
        vtb("report", tmp_path / "run", "--out", tmp_path / "r2")
        assert summary_of(tmp_path / "r2")["apr"] == 1.0

        # vtb judge into a new directory: an outage leaves records incomplete; rerunning retries exactly those.
        outage["on"] = True
        rejudge = [
            "judge",
            tmp_path / "run",
            "--judge",
            f"openai:j2@{judge_server.base_url}",
            "--out",
            tmp_path / "rejudged",
        ]
        assert vtb(*rejudge) == 1
        assert "3 records incompletely judged" in capsys.readouterr().out
        outage["on"] = False
        assert vtb(*rejudge) == 0
        assert "re-judged 3 records" in capsys.readouterr().out
        assert vtb(*rejudge) == 0
        assert "re-judged 0 records (3 already done)" in capsys.readouterr().out


def test_grpo_can_mask_episodes_whose_judging_failed():
    from vtb_env.tasks import Task
    from vtb_env.trajectory import EpisodeRecord, StepRecord, TurnRecord
    from vtb_rewards.compose import EpisodeReward, RewardConfig
    from vtb_rewards.grpo import group_advantages
    from vtb_rewards.judge.judge import Judge

    task = Task.from_dict(
        {
            "id": "t",
            "turns": [{"prompt": "q", "golden_answer": "9", "rubrics": {"r1": {"description": "says 9", "weight": 5}}}],
        }
    )
    record = EpisodeRecord(
        "t", turns=[TurnRecord(0, steps=[StepRecord(action_text="9", final_answer="9")], final_answer="9")]
    )
    masked, info = EpisodeReward(RewardConfig(judge_incomplete="mask"), Judge(backend=None))(task, record)
    assert masked != masked and info["masked"] == 1.0 and info["judge_incomplete"] == 1.0  # NaN
    counted, info = EpisodeReward(RewardConfig(), Judge(backend=None))(task, record)
    assert counted == counted and "masked" not in info  # default: scored as Not Met, flagged
    assert group_advantages([1.0, masked, 0.0, 1.0], group_size=4, scale=False) == pytest.approx(
        [1 / 3, 0.0, -2 / 3, 1 / 3]
    )


# -- 3: no episode can abort a run ---------------------------------------------------------------------


@pytest.mark.parametrize("depth", [600, 5000])
def test_deeply_nested_tool_arguments_never_abort_a_run_or_its_resume(tmp_path, depth):
    data = write_tasks(tmp_path / "data", 3)
    nested = "[" * depth + "]" * depth

    def respond(request):
        if task_of(request) == "t1" and not any(m["role"] == "tool" for m in request["messages"]):
            arguments = '{"expression": ' + nested + "}"
            return {
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": arguments}}
                ]
            }
        return {"content": "The total is 9."}

    with ChatServer(respond) as agent:
        run = eval_args(data, f"openai:m@{agent.base_url}", tmp_path / "run", "--concurrency", 2)
        vtb(*run)
        records = latest_records(tmp_path / "run" / "records.jsonl")
        assert set(records) == {"t0#0", "t1#0", "t2#0"}  # every task has its record; the others were kept
        assert records["t0#0"]["status"] == records["t2#0"]["status"] == "ok"
        vtb(*run, "--resume")  # the resume does not crash either
        assert set(latest_records(tmp_path / "run" / "records.jsonl")) == {"t0#0", "t1#0", "t2#0"}


# -- 4: independent samples ---------------------------------------------------------------------------


def test_samples_get_their_own_seeds_recorded_per_record(tmp_path):
    data = write_tasks(tmp_path / "data", 2)
    with ChatServer(answers()) as agent:
        vtb(*eval_args(data, f"openai:m@{agent.base_url}", tmp_path / "run", "--samples", 3, "--temperature", 1.0))
        seeds: dict[str, set] = {}
        for request in agent.requests:
            seeds.setdefault(task_of(request), set()).add(request["seed"])
        assert {task: len(s) for task, s in seeds.items()} == {"t0": 3, "t1": 3}  # no two samples share a seed
        records = latest_records(tmp_path / "run" / "records.jsonl").values()
        assert {(r["task_id"], r["seed"]) for r in records} == {(t, s) for t, ss in seeds.items() for s in ss}

        before = len(agent.requests)
        vtb(
            *eval_args(
                data,
                f"openai:m@{agent.base_url}",
                tmp_path / "unseeded",
                "--samples",
                2,
                "--seed",
                "none",
                "--temperature",
                1.0,
            )
        )
        assert all("seed" not in r for r in agent.requests[before:])
        assert all(r["seed"] is None for r in latest_records(tmp_path / "unseeded" / "records.jsonl").values())


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


# -- 8: paper defaults ------------------------------------------------------------------------------------


def tool_caller(request):
    """Calls the calculator whenever tools are offered; answers otherwise."""
    if request.get("tools"):
        call = {
            "id": f"c{len(request['messages'])}",
            "type": "function",
            "function": {"name": "calculator", "arguments": '{"expression": "4+5"}'},
        }
        return {"tool_calls": [call]}
    return {"content": "The total is 9."}


def test_tool_cap_is_per_task_by_default_and_per_turn_in_the_official_preset(tmp_path):
    data = write_tasks(tmp_path / "data", 1, turns=2)
    with ChatServer(tool_caller) as agent:
        for preset in ("default", "official"):
            vtb(*eval_args(data, f"openai:m@{agent.base_url}", tmp_path / preset, "--preset", preset))
        counts = {}
        for preset in ("default", "official"):
            record = latest_records(tmp_path / preset / "records.jsonl")["t0#0"]
            turns = record["episode"]["turns"]
            counts[preset] = [sum(1 for s in t["steps"] for c in s["tool_calls"] if not c["error"]) for t in turns]
        assert counts["default"] == [20, 0]  # 20 per task (the paper): the second turn gets none
        assert counts["official"] == [20, 20]  # the toolkit: 20 rounds per turn


def test_no_tools_runs_do_not_send_the_strong_prompt(tmp_path):
    data = write_tasks(tmp_path / "data", 1)
    with ChatServer(tool_caller) as agent:
        vtb(*eval_args(data, f"openai:m@{agent.base_url}", tmp_path / "nt", "--ablation", "no_tools"))
        vtb(
            "label-modes",
            "--data",
            data,
            "--agent",
            f"openai:m@{agent.base_url}",
            "--out",
            tmp_path / "lm",
            "--no-progress",
        )
        vtb(*eval_args(data, f"openai:m@{agent.base_url}", tmp_path / "strong"))
    systems = [r["messages"][0] for r in agent.requests]
    text_only = [
        m["content"]
        for m, r in zip(systems, agent.requests, strict=False)
        if not r.get("tools") and len(r["messages"]) == 2
    ]
    assert (
        text_only[:2] == [NO_TOOLS_SYSTEM_PROMPT, NO_TOOLS_SYSTEM_PROMPT]
        and "tool" not in NO_TOOLS_SYSTEM_PROMPT.lower()
    )
    assert systems[-1]["content"] == STRONG_SYSTEM_PROMPT  # the tool-use setting keeps the paper's strong prompt


# -- 9: reasoning-model judges and one parsing rule -----------------------------------------------------------


def test_reasoning_model_judges_get_only_what_they_accept(tmp_path, capsys):
    data = write_tasks(tmp_path / "data", 2, checks=False)

    def strict_judge(request):  # as OpenAI's reasoning models answer
        for field in ("temperature", "max_tokens"):
            if field in request:
                return {
                    "status": 400,
                    "body": {
                        "error": {"message": f"Unsupported parameter: '{field}' is not supported with this model."}
                    },
                }
        return verdict(True)

    def no_structured_output(request):
        if "response_format" in request:
            return {
                "status": 400,
                "body": {"error": {"message": "response_format json_schema is not supported by this server"}},
            }
        return verdict(True)

    with ChatServer(answers()) as agent, ChatServer(strict_judge) as strict, ChatServer(no_structured_output) as plain:
        agent_spec = f"openai:m@{agent.base_url}"
        vtb(*eval_args(data, agent_spec, tmp_path / "default", "--judge", f"openai:o4@{strict.base_url}"))
        assert all(not r["score"]["complete"] for r in latest_records(tmp_path / "default" / "records.jsonl").values())
        assert (
            vtb(
                *eval_args(
                    data,
                    agent_spec,
                    tmp_path / "reasoning",
                    "--judge",
                    f"openai:o4@{strict.base_url}",
                    "--judge-temperature",
                    "none",
                    "--judge-token-field",
                    "max_completion_tokens",
                    "--judge-max-tokens",
                    4000,
                )
            )
            == 0
        )
        sent = strict.requests[-1]
        assert sent["max_completion_tokens"] == 4000 and sent["response_format"]["type"] == "json_schema"
        assert sent["response_format"]["json_schema"]["schema"]["properties"]["judge_result"]["enum"] == [
            "Met",
            "Not Met",
        ]
        assert all(r["score"]["passed"] for r in latest_records(tmp_path / "reasoning" / "records.jsonl").values())
        # auto: a server without structured output is asked again in plain text, and from then on.
        assert (
            vtb(
                *eval_args(
                    data, agent_spec, tmp_path / "plain", "--judge", f"openai:j@{plain.base_url}", "--concurrency", 1
                )
            )
            == 0
        )
        assert sum("response_format" in r for r in plain.requests) == 1


@pytest.mark.parametrize("value", ["Met (partially)", "Partially Met", "Met/Not Met", "met, mostly"])
def test_qualified_verdicts_are_judge_errors_by_one_rule(value):
    from vtb_rewards.judge.verdict import parse_verdict

    for reply in (
        json.dumps({"judge_result": value}),
        f"judge_result: {value}",
        f'{{"judge_result": "{value}", "explanation": "x"',
    ):
        assert parse_verdict(reply).is_error, reply
    assert parse_verdict('{"judge_result": "**Not Met**"}').status == "Not Met"
    assert parse_verdict("judge_result: Met.").status == "Met"


def test_qualified_verdicts_through_the_cli_are_incomplete(tmp_path):
    data = write_tasks(tmp_path / "data", 2, checks=False)
    replies = iter(
        [{"content": '{"judge_result": "Met (partially)"}'}, {"content": '{"judge_result": "Partially Met"}'}]
    )
    lock = threading.Lock()

    def judge(request):
        with lock:
            return next(replies)

    with ChatServer(answers()) as agent, ChatServer(judge) as judge_server:
        vtb(
            *eval_args(
                data,
                f"openai:m@{agent.base_url}",
                tmp_path / "run",
                "--judge",
                f"openai:j@{judge_server.base_url}",
                "--concurrency",
                1,
            )
        )
    statuses = [r["verdicts"][0][0]["status"] for r in latest_records(tmp_path / "run" / "records.jsonl").values()]
    assert statuses == ["judge_error", "judge_error"]


# -- 12, 13: images ---------------------------------------------------------------------------------------------


def test_too_many_images_is_told_apart_and_the_env_can_keep_the_last_k(tmp_path):
    data = write_tasks(tmp_path / "data", 1, images=2)

    def vllm(request):
        n = sum(
            1
            for m in request["messages"]
            if isinstance(m.get("content"), list)
            for p in m["content"]
            if p.get("type") == "image_url"
        )
        if n > 1:
            return {
                "status": 400,
                "body": {
                    "error": {"message": "At most 1 image(s) may be provided in one prompt.", "type": "BadRequestError"}
                },
            }
        return {"content": "The total is 9."}

    with ChatServer(vllm) as agent:
        vtb(*eval_args(data, f"openai:m@{agent.base_url}", tmp_path / "all"))
        record = latest_records(tmp_path / "all" / "records.jsonl")["t0#0"]
        assert (
            record["status"] == "error"
            and "TooManyImagesError" in record["error"]
            and "--limit-mm-per-prompt" in record["error"]
        )
        assert len(agent.requests) == 1  # no retries at halved resolution
        vtb(*eval_args(data, f"openai:m@{agent.base_url}", tmp_path / "last", "--max-dialogue-images", 1))
        assert latest_records(tmp_path / "last" / "records.jsonl")["t0#0"]["score"]["passed"]
        texts = " ".join(text_of(m) for m in agent.requests[-1]["messages"])
        assert "[img0.png is no longer shown" in texts or "is no longer shown: only the last 1 images are kept" in texts


def test_images_are_encoded_once_and_never_decoded_to_measure(tmp_path, monkeypatch):
    import base64
    import io

    from PIL import Image as PILImage

    from vtb_agents.images import ImagePolicy
    from vtb_agents.openai_chat import OpenAIChatAgent

    buffer = io.BytesIO()
    Image.effect_noise((4000, 3000), 20).convert("RGB").save(
        buffer, format="JPEG", quality=90
    )  # a 12-megapixel photo, ~6 MB
    url = "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()
    observation = {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "[t0] total?"}, {"type": "image_url", "image_url": {"url": url}}],
            }
        ],
        "images": [],
        "tools": [],
    }
    decodes = []  # every pixel decode PIL starts (one per image actually decoded)
    original = PILImage._getdecoder
    monkeypatch.setattr(
        PILImage, "_getdecoder", lambda mode, name, *args: (decodes.append(name), original(mode, name, *args))[1]
    )
    with ChatServer(answers()) as server:
        agent = OpenAIChatAgent("m", server.base_url)
        for _ in range(3):
            agent.act(observation)
        assert decodes == []  # within the policy: measured from the header, sent as is
        assert server.requests[0]["messages"][0]["content"][1]["image_url"]["url"] is not None
        small = OpenAIChatAgent("m", server.base_url, image_policy=ImagePolicy(max_side=1000))
        for _ in range(3):
            small.act(observation)
        assert decodes == ["jpeg"] and small.images.misses == 1 and small.images.hits == 2  # decoded and encoded once
        sent = server.requests[-1]["messages"][0]["content"][1]["image_url"]["url"]
        assert Image.open(io.BytesIO(base64.b64decode(sent.split(",", 1)[1]))).size == (1000, 750)
