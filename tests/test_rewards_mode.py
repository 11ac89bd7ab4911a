"""Adaptive mode selection: outcomes, MCC against sklearn, mode rewards, label storage."""

import numpy as np
import pytest
from sklearn.metrics import matthews_corrcoef

from vtb_rewards.mode import (
    ConfusionMatrix,
    ModeLabelStore,
    ModeRewardConfig,
    group_label,
    group_relative_mode_rewards,
    label_from_text_only,
    mode_outcome,
    mode_reward,
)


def test_outcomes_follow_the_seed_definitions():
    assert mode_outcome("tool_required", True) == "TP"
    assert mode_outcome("tool_required", False) == "FN"
    assert mode_outcome("tool_redundant", False) == "TN"
    assert mode_outcome("tool_redundant", True) == "FP"
    with pytest.raises(ValueError):
        mode_outcome("unknown", True)
    assert label_from_text_only(True) == "tool_redundant"
    assert label_from_text_only(False) == "tool_required"


def to_label_arrays(matrix):
    # Positive class = Tool-Required (y_true) / invoked tools (y_pred).
    y_true = [1] * (matrix.tp + matrix.fn) + [0] * (matrix.tn + matrix.fp)
    y_pred = [1] * matrix.tp + [0] * matrix.fn + [0] * matrix.tn + [1] * matrix.fp
    return y_true, y_pred


def test_mcc_matches_sklearn_on_random_matrices():
    rng = np.random.default_rng(0)
    for _ in range(200):
        tp, fn, tn, fp = (int(x) for x in rng.integers(0, 40, size=4))
        matrix = ConfusionMatrix(tp=tp, fn=fn, tn=tn, fp=fp)
        if matrix.n == 0:
            continue
        assert matrix.mcc() == pytest.approx(matthews_corrcoef(*to_label_arrays(matrix)), abs=1e-9)


@pytest.mark.parametrize(
    "matrix, expected",
    [
        (ConfusionMatrix(tp=5, tn=5), 1.0),
        (ConfusionMatrix(fn=5, fp=5), -1.0),
        (ConfusionMatrix(tp=7), 0.0),  # one class only: empty margins
        (ConfusionMatrix(tn=3, fp=4), 0.0),  # policy never right on required, no required tasks
        (ConfusionMatrix(tp=3, fp=4), 0.0),  # always uses tools
        (ConfusionMatrix(), 0.0),
    ],
)
def test_mcc_degenerate_and_extreme_cases(matrix, expected):
    assert matrix.mcc() == pytest.approx(expected, abs=1e-9)
    if matrix.n:
        assert matrix.mcc() == pytest.approx(matthews_corrcoef(*to_label_arrays(matrix)), abs=1e-9)


def test_mcc_epsilon_is_in_the_denominator():
    matrix = ConfusionMatrix(tp=1, tn=1)
    assert matrix.mcc(epsilon=1.0) == pytest.approx(1 / (1 + 1.0))


def test_confusion_matrix_from_outcomes():
    matrix = ConfusionMatrix.from_outcomes(["TP", "TP", "FN", "TN", "FP", "FP", "FP"])
    assert (matrix.tp, matrix.fn, matrix.tn, matrix.fp) == (2, 1, 1, 3)
    assert matrix.to_dict()["n"] == 7


def test_mode_reward_values_are_configurable():
    config = ModeRewardConfig(tp=1.0, tn=0.5, fp=-0.2, fn=-1.0)
    assert mode_reward("tool_required", True, config) == 1.0
    assert mode_reward("tool_required", False, config) == -1.0
    assert mode_reward("tool_redundant", False, config) == 0.5
    assert mode_reward("tool_redundant", True, config) == -0.2
    assert mode_reward("tool_redundant", True) == 0.0


def test_group_relative_mode_rewards():
    used = [True, False, False, True]
    passed = [True, True, False, False]
    # A no-tool rollout passed: the group says the task is tool-redundant for this policy.
    assert group_label(used, passed) == "tool_redundant"
    assert group_relative_mode_rewards(used, passed) == pytest.approx([-0.5, 0.5, 0.5, -0.5])
    assert group_label(used, [True, False, False, True]) == "tool_required"
    assert group_relative_mode_rewards(used, label="tool_required") == pytest.approx([0.5, -0.5, -0.5, 0.5])
    assert sum(group_relative_mode_rewards([True, True], label="tool_required")) == 0.0
    with pytest.raises(ValueError):
        group_relative_mode_rewards(used)


def test_label_store_persists_per_model(tmp_path):
    path = tmp_path / "labels" / "modes.json"
    store = ModeLabelStore(path)
    assert store.record_text_only("model-a", {"t1": True, "t2": False}) == {
        "t1": "tool_redundant",
        "t2": "tool_required",
    }
    store.record_text_only("model-b", [("t1", False)])
    reopened = ModeLabelStore(path)
    assert reopened.labels("model-a") == {"t1": "tool_redundant", "t2": "tool_required"}
    assert reopened.get("model-b", "t1") == "tool_required"
    assert reopened.get("model-b", "t2") is None
    path.write_text("[1, 2]")
    with pytest.raises(ValueError):
        ModeLabelStore(path)


def _image_task(label="tool_required", needs_lookup=False):
    from dataclasses import replace

    from tests.support.env_tools import make_task

    return replace(make_task("img"), mode_label=label, metadata={"needs_lookup": needs_lookup})


WORK = {"read": ["image_1.png"], "new_images": 1, "printed": False}  # what the sandbox records of a real crop


def _record(answer, *calls):
    """Calls as (name, error) or (name, error, image_work); a vision call without image_work did no visual work."""
    from vtb_env.trajectory import EpisodeRecord, StepRecord, ToolCallRecord, TurnRecord

    tool_calls = [
        ToolCallRecord(call_id=f"c{i}", name=call[0], arguments={}, error=call[1], image_work=(call[2:] or [None])[0])
        for i, call in enumerate(calls)
    ]
    step = StepRecord(action_text=answer, tool_calls=tool_calls, final_answer=answer)
    return EpisodeRecord(task_id="img", turns=[TurnRecord(index=0, steps=[step], final_answer=answer)])


def test_used_tools_readings():
    from vtb_rewards.mode import relevant_calls, used_tools

    task = _image_task()
    calculator = _record("10", ("calculator", None))
    vision = _record("10", ("calculator", None), ("python_image_processing", "boom", WORK))
    assert used_tools(calculator, "any", task) and not used_tools(calculator, "vision", task)
    assert used_tools(vision, "vision", task) and [c.name for c in relevant_calls(vision, "vision", task)] == [
        "python_image_processing"
    ]
    lookup = _record("10", ("web_search", None))
    assert not used_tools(lookup, "vision", task) and used_tools(lookup, "vision", _image_task(needs_lookup=True))
    # without the task, the record's metadata says what the env showed (images, the task's metadata)
    lookup.metadata = {"images": [{"name": "image_1.png"}], "metadata": {"needs_lookup": True}}
    assert used_tools(lookup, "vision")
    with pytest.raises(ValueError, match="reading"):
        used_tools(lookup, "calculator")


def test_a_non_vision_call_earns_no_mode_and_no_tool_success_credit():
    from vtb_rewards.compose import EpisodeReward, RewardConfig

    task = _image_task()
    for credit in ("earned", "always"):
        reward = EpisodeReward(RewardConfig(process_credit=credit))
        for answer in ("It is 10.", "It is 99."):
            plain = reward(task, _record(answer))
            with_calculator = reward(task, _record(answer, ("calculator", None)))
            assert with_calculator[0] == plain[0], (credit, answer)
            assert with_calculator[1]["mode"] == 0.0 and "tool_success" not in with_calculator[1]
        vision = reward(task, _record("It is 10.", ("python_image_processing", None, WORK)))[1]
        assert vision["mode"] == 1.0 and vision["tool_success"] == 1.0
    any_reading = EpisodeReward(RewardConfig(mode_reading="any"))(task, _record("It is 10.", ("calculator", None)))
    assert any_reading[1]["mode"] == 1.0  # the paper's reading, when asked for


@pytest.mark.parametrize(
    "work",
    [
        None,  # no sandbox record (a call that never reached the sandbox)
        {"read": [], "new_images": 0, "printed": False},  # code `pass`, or code that raised before any image
        {"read": [], "new_images": 1, "printed": True},  # an image made from nothing, and a print
        {"read": ["image_1.png"], "new_images": 0, "printed": False},  # read, returned nothing (or only a copy)
        {"read": "image_1.png", "new_images": "1", "printed": "yes"},  # not the sandbox's types
    ],
)
def test_a_vision_call_without_visual_work_earns_exactly_what_no_call_earns(work):
    from vtb_rewards.compose import EpisodeReward

    task = _image_task()
    for error in (None, "ValueError: boom"):
        for answer in ("It is 10.", "It is 99."):
            plain = EpisodeReward()(task, _record(answer))
            with_call = EpisodeReward()(task, _record(answer, ("python_image_processing", error, work)))
            assert with_call[0] == plain[0] and with_call[1]["mode"] == plain[1]["mode"] == 0.0
            assert "tool_success" not in with_call[1] and with_call[1]["used_tools"] == 0.0


def test_a_failed_vision_call_that_did_visual_work_counts_but_earns_no_tool_success():
    from vtb_rewards.compose import EpisodeReward

    failed = EpisodeReward()(_image_task(), _record("It is 10.", ("python_image_processing", "boom", WORK)))[1]
    assert failed["mode"] == 1.0 and failed["tool_success"] == 0.0


def test_process_credit_is_earned_by_the_answer():
    from vtb_rewards.compose import EpisodeReward, RewardConfig

    task = _image_task(label="tool_redundant")
    wrong = EpisodeReward()(task, _record("It is 99."))  # TN and well formed, but worth nothing
    assert wrong[1]["mode"] == 1.0 and wrong[1]["format"] == 1.0 and wrong[0] == 0.0
    always = EpisodeReward(RewardConfig(process_credit="always"))(task, _record("It is 99."))[0]
    assert always == pytest.approx((0.25 + 0.1) / 2.35)
    assert EpisodeReward()(task, _record("It is 10."))[0] == 1.0
