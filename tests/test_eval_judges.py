"""Judging in published evaluations, through the `vtb` CLI against real HTTP servers on 127.0.0.1 (issue 13): judge
outages retried by resume and `vtb judge`, reasoning-model judges, one rule for qualified verdicts."""

from __future__ import annotations

import json
import threading

import pytest

from tests.support.chat_server import ChatServer
from tests.support.cli import eval_args
from tests.support.eval_tasks import answers, summary_of, verdict, vtb, write_tasks
from vtb_app.evaluation.records import latest_records

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
