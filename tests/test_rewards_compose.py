"""The composed episode reward and the GRPO adapters (TRL reward function, verl compute_score)."""

import json

import pytest

from tests.support.chat_server import ChatServer
from vtb_env.completion import record_from_completion
from vtb_env.tasks import Rubric, Task, Turn
from vtb_env.trajectory import EpisodeRecord, StepRecord, ToolCallRecord, TurnRecord
from vtb_rewards.compose import EpisodeReward, RewardConfig, default_reward, format_validity
from vtb_rewards.grpo import compute_score, group_advantages, make_trl_reward_func

RUBRICS = (
    Rubric(id="price", description="reports $16", weight=5, check={"type": "number", "value": 16}),
    Rubric(id="crust", description="adds $3", weight=3, check={"type": "text", "any_of": ["gluten-free"]}),
    Rubric(id="style", description="is concise", weight=2),  # no check: needs an LLM judge
)
TASK = Task(
    id="pizza",
    turns=(Turn(prompt="How much?", golden_answer="$16", rubrics=RUBRICS, key_steps=("crop the menu", "add 3")),),
    mode_label="tool_required",
)


def record(answer, calls=(), parse_errors=()):
    step = StepRecord(
        action_text=answer or "", tool_calls=list(calls), parse_errors=list(parse_errors), final_answer=answer
    )
    return EpisodeRecord(task_id="pizza", turns=[TurnRecord(index=0, steps=[step], final_answer=answer)])


def calc(ok=True):
    return ToolCallRecord(call_id="c", name="calculator", arguments={"expression": "13+3"}, error=None if ok else "bad")


def test_exact_checks_only_reward_and_components():
    reward, info = EpisodeReward()(TASK, record("The gluten-free pizza is $16.", [calc(), calc(ok=False)]))
    # "style" has no check and no judge backend: a judge error, counted as not Met, reported.
    assert info["rubric_score"] == pytest.approx(8 / 10) and info["passed"] == 1.0
    assert info["judge_errors"] == 1.0 and info["judge_incomplete"] == 1.0
    assert info["mode"] == 1.0 and info["used_tools"] == 1.0 and info["n_tool_calls"] == 2.0
    assert info["tool_success"] == 0.5 and info["format"] == 1.0
    # process credit is earned: mode, format and tool_success count in proportion to the rubric score
    expected = (1.0 * 0.8 + 1.0 * 1.0 + 0.8 * (0.25 * 1.0 + 0.1 * 1.0 + 0.1 * 0.5)) / (1 + 1 + 0.25 + 0.1 + 0.1)
    assert reward == pytest.approx(expected) and info["reward"] == reward
    always = EpisodeReward(RewardConfig(process_credit="always"))(
        TASK, record("The gluten-free pizza is $16.", [calc(), calc(ok=False)])
    )[0]
    assert always == pytest.approx((0.8 + 1.0 + 0.25 + 0.1 + 0.05) / 2.45)


def test_components_that_do_not_apply_are_left_out():
    task = Task(id="pizza", turns=TASK.turns)  # no mode label
    reward, info = EpisodeReward(RewardConfig(format=0.0))(task, record("$17"))
    assert "mode" not in info and "tool_success" not in info
    assert info["passed"] == 0.0 and info["rubric_score"] == 0.0
    assert reward == 0.0
    labelled = EpisodeReward(mode_labels={"pizza": "tool_redundant"})
    assert labelled(task, record("$17"))[1]["mode"] == 1.0  # TN
    assert labelled(task, record("$17", [calc()]))[1]["mode"] == 0.0  # FP


def test_no_answer_and_format_validity():
    _, info = EpisodeReward()(TASK, record(None, [calc()]))
    assert info["rubric_score"] == 0.0 and info["format"] == 0.0 and info["judge_errors"] == 0.0
    assert format_validity(TASK, record("$16", parse_errors=["bad json"])) == 0.0
    two_steps = record("$16")
    two_steps.turns[0].steps.insert(0, StepRecord(action_text="<tool_call>{", parse_errors=["bad json"]))
    assert format_validity(TASK, two_steps) == 0.5


def judge_server(request):
    prompt = request["messages"][0]["content"]
    if "**Key Step:**" in prompt:  # KCoverage: is the key step's text in the reasoning?
        step = prompt.split("**Key Step:**")[1].split("\n")[0].strip()
        met = step in prompt.split("**Model Reasoning:**")[1]
    else:
        met = "**Rubric Criterion:** is concise" in prompt
    status = "Met" if met else "Not Met"
    return {"content": json.dumps({"explanation": "", "judge_result": status})}


def test_default_reward_uses_the_judge_from_the_environment(monkeypatch, tmp_path):
    with ChatServer(judge_server) as server:
        monkeypatch.setenv("VTB_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("VTB_JUDGE_MODEL", "judge")
        monkeypatch.setenv("VTB_JUDGE_CACHE", str(tmp_path / "v.sqlite"))
        reward_fn = default_reward(RewardConfig(kcoverage=0.5))
        _, info = reward_fn(TASK, record("I crop the menu: the gluten-free pizza is $16."))
        assert info["rubric_score"] == 1.0 and info["judge_errors"] == 0.0
        assert info["kcoverage"] == 0.5  # "crop the menu" covered, "add 3" not
        n = len(server.requests)
        default_reward(RewardConfig(kcoverage=0.5))(TASK, record("I crop the menu: the gluten-free pizza is $16."))
        assert len(server.requests) == n  # all verdicts cached on disk


def test_group_advantages():
    adv = group_advantages([1.0, 0.0, 1.0, 0.0, 0.5, 0.5], group_size=2)
    assert adv[:2] == pytest.approx([1.0, -1.0], abs=1e-5) and adv[4:] == [0.0, 0.0]
    by_id = group_advantages([3.0, 1.0, 2.0], group_ids=["a", "b", "a"], scale=False)
    assert by_id == pytest.approx([0.5, 0.0, -0.5])
    with pytest.raises(ValueError):
        group_advantages([1.0, 2.0, 3.0], group_size=2)


def test_trl_reward_function_scores_text_and_conversational_completions():
    reward_func = make_trl_reward_func({"pizza": TASK}, EpisodeReward(RewardConfig(format=0.0)))
    conversation = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "calculator", "arguments": '{"expression": "13+3"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "16"},
        {"role": "assistant", "content": "<think>13+3</think>The gluten-free pizza costs $16."},
    ]
    scores = reward_func(
        prompts=["p"] * 3, completions=["$17", "The gluten-free one is $16.", conversation], task_id=["pizza"] * 3
    )
    assert len(scores) == 3 and scores[0] < scores[1] < scores[2]
    assert reward_func.last_components[2]["used_tools"] == 1.0 and reward_func.last_components[2]["mode"] == 1.0
    assert reward_func.last_components[1]["mode"] == 0.0  # tool-required task answered without tools
    with pytest.raises(ValueError):
        reward_func(prompts=["p"], completions=["x"])
    assert record_from_completion("pizza", conversation).turns[0].steps[1].reasoning == "13+3"


def test_verl_compute_score_takes_the_task_as_ground_truth(monkeypatch):
    monkeypatch.delenv("VTB_JUDGE_BASE_URL", raising=False)
    result = compute_score("vtb", "The gluten-free pizza is $16.", json.dumps(TASK.to_dict()), {"turn_index": 0})
    assert result["passed"] == 1.0 and result["rubric_score"] == pytest.approx(0.8)
    assert result["score"] == result["reward"]
    with pytest.raises(ValueError):
        compute_score("vtb", "x", TASK.to_dict(), {"turn_index": 3})
