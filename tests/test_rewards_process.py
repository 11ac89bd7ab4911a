"""Process metrics: KCoverage, key-step derivation, tool effectiveness, B.4 tool-use stats, error types."""

import json

import pytest

from tests.support.chat_server import ChatServer
from vtb_env.tasks import Task, Turn
from vtb_env.trajectory import EpisodeRecord, StepRecord, ToolCallRecord, TurnRecord
from vtb_rewards.judge import Judge, OpenAIChatBackend, VerdictCache
from vtb_rewards.process import (
    classify_errors,
    derive_key_steps,
    judge_kcoverage,
    judge_tool_effectiveness,
    kcoverage,
    key_steps_for,
    tool_use_stats,
)


@pytest.mark.parametrize(
    "present, expected",
    [
        ([True, True, True, True], 1.0),
        ([True, True, False, True], 0.5),  # a later covered step does not extend the prefix
        ([False, True, True, True], 0.0),
        ([True], 1.0),
        ([False], 0.0),
        ([True, False, False], 1 / 3),
    ],
)
def test_kcoverage_is_the_longest_covered_prefix(present, expected):
    assert kcoverage(present) == pytest.approx(expected)
    # The seed's formula: (1/|K|) max_j j * prod_{i<=j} 1[k_i]  (max over covered prefixes).
    prefix_products = [j * all(present[:j]) for j in range(1, len(present) + 1)]
    assert kcoverage(present) == pytest.approx(max(prefix_products) / len(present))


def test_kcoverage_needs_key_steps():
    with pytest.raises(ValueError):
        kcoverage([])


def test_key_steps_derived_from_reference_trajectories():
    assert derive_key_steps(
        [
            {"tool": "python_image_processing", "purpose": "crop the menu's price table"},
            {"tool_name": "calculator", "arguments": {"expression": "13+3"}},
        ]
    ) == (
        "Use python_image_processing to crop the menu's price table",
        'Use calculator with {"expression": "13+3"}',
    )
    assert derive_key_steps(
        {"steps": [{"function": {"name": "web_search", "arguments": '{"query": "NSCP table 204-1"}'}}]}
    ) == ('Use web_search with {"query": "NSCP table 204-1"}',)
    assert derive_key_steps('[{"description": "zoom on the hand"}, "count the tiles"') == (
        "zoom on the hand",
        "count the tiles",
    )
    assert derive_key_steps("crop the top left\n\nread the value\n") == ("crop the top left", "read the value")
    assert derive_key_steps(None) == () and derive_key_steps(42) == ()
    turn = Turn(prompt="p", tool_trajectory_raw='[{"tool": "calculator", "reasoning": "add"}]')
    assert key_steps_for(turn) == ("Use calculator to add",)
    assert key_steps_for(Turn(prompt="p", key_steps=("a", "b"), tool_trajectory_raw="[1]")) == ("a", "b")


def call(name, ok=True):
    return ToolCallRecord(call_id=name, name=name, arguments={"code": "x"}, error=None if ok else "Traceback")


def episode(*turns):
    return EpisodeRecord(task_id="t", turns=list(turns))


def test_tool_use_stats_follow_appendix_b4():
    records = [
        episode(TurnRecord(0, [StepRecord("a", tool_calls=[call("calculator"), call("web_search", ok=False)])])),
        episode(
            TurnRecord(0, [StepRecord("b", tool_calls=[call("calculator")])]),
            TurnRecord(1, [StepRecord("c", tool_calls=[call("x")])]),
        ),
        episode(TurnRecord(0, [StepRecord("no tools", final_answer="42")])),
        episode(TurnRecord(0, [StepRecord("no tools", final_answer="42")])),
    ]
    stats = tool_use_stats(records)
    assert stats.proactivity == 0.5
    assert stats.success_rate == pytest.approx(3 / 4)
    assert stats.volume == 1.0 and stats.n_calls == 4
    assert tool_use_stats(records[2:]).success_rate is None


def step_judge(request):
    """Met when the criterion (key step / tool call) text occurs in the judged text."""
    prompt = request["messages"][0]["content"]
    head, judged = (
        prompt.split("**Model Reasoning:**")
        if "**Model Reasoning:**" in prompt
        else prompt.split("**Reasoning Step:**")
    )
    criterion = head.split("**Key Step:**")[-1].split("**Tool Call:**")[-1].strip()
    judged = judged.split("### Output Format")[0]
    name = criterion.split("(")[0]
    status = "Met" if criterion in judged or (name and f"call {name}" in judged) else "Not Met"
    return {"content": json.dumps({"explanation": "", "judge_result": status})}


def test_judged_kcoverage_and_tool_effectiveness_against_a_real_server(tmp_path):
    task = Task(
        id="t",
        turns=(
            Turn(prompt="q1", key_steps=("crop the table", "read 13", "add 3")),
            Turn(prompt="q2", key_steps=("read the axis", "compare")),
        ),
    )
    record = episode(
        TurnRecord(
            0,
            [
                StepRecord(
                    "crop the table",
                    reasoning="I will call python_image_processing",
                    tool_calls=[call("python_image_processing")],
                ),
                StepRecord(
                    "read 13 then add 4",
                    tool_calls=[call("calculator"), call("web_search", ok=False)],
                    final_answer="17",
                ),
            ],
        ),
        TurnRecord(1, [StepRecord("compare only", final_answer="B")]),
    )
    with ChatServer(step_judge) as server:
        judge = Judge(OpenAIChatBackend("j", server.base_url, retries=0), cache=VerdictCache(tmp_path / "c.sqlite"))
        coverage = judge_kcoverage(judge, task, record)
        effect = judge_tool_effectiveness(judge, task, record)
        assert len(server.requests) == 5 + 2  # the failed call is invalid without asking
    assert coverage.value == pytest.approx((2 / 3 + 0.0) / 2) and coverage.n_items == 5 and coverage.n_judge_errors == 0
    # python_image_processing appropriate (its step says so); calculator not; web_search errored.
    assert effect.value == pytest.approx(1 / 3) and effect.n_items == 3
    assert judge_tool_effectiveness(judge, task, episode(TurnRecord(0, []))).value is None
    no_steps = Task(id="n", turns=(Turn(prompt="q"),))
    assert judge_kcoverage(judge, no_steps, episode(TurnRecord(0, []))).value is None


def test_error_type_pass_against_a_real_server():
    replies = iter(
        [
            '{"explanation": "misread", "error_type": "visual_perception"}',
            '```json\n{"error_type": "Calculation"}\n```',
            "no idea",
        ]
    )

    with ChatServer(lambda request: {"content": next(replies)}) as server:
        backend = OpenAIChatBackend("j", server.base_url, max_concurrency=1, retries=0)
        types = classify_errors(backend, [("q", "g", ["r1"], "a")] * 3)
        assert "**Rubrics Not Met:** - r1" in server.requests[0]["messages"][0]["content"]
    assert types == ["visual_perception", "calculation", "judge_error"]
