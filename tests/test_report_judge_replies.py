"""Reasoning-model judges in published numbers (issue 26), through the `vtb` CLI: a judge reply is read by its
final JSON; unfinished thinking and reasoning without content are judge errors."""

from __future__ import annotations

import json

import pytest

from tests.support.chat_server import ChatServer
from tests.support.cli import eval_args
from tests.support.eval_tasks import vtb, write_tasks
from vtb_app.evaluation.records import latest_records

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
