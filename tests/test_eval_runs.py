"""Evaluation runs, through the `vtb` CLI against real HTTP servers on 127.0.0.1 (issue 13): no episode can abort a
run or its resume, per-sample seeds, the paper defaults (tool caps, no strong prompt without tools)."""

from __future__ import annotations

import pytest

from tests.support.chat_server import ChatServer
from tests.support.cli import eval_args
from tests.support.eval_tasks import answers, task_of, vtb, write_tasks
from vtb_app.evaluation.records import latest_records
from vtb_env.prompts import NO_TOOLS_SYSTEM_PROMPT, STRONG_SYSTEM_PROMPT

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
