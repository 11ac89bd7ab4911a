"""Rubric scores: the paper's worked examples (figures 2, 8, 9) from their verdicts, and aggregation."""

import pytest

from vtb_env.tasks import Rubric, Task, Turn
from vtb_rewards.judge import JUDGE_ERROR, MET, NOT_MET, Verdict
from vtb_rewards.scoring import aggregate, score_rubrics, score_task


def rubric_set(weights_and_verdicts, critical_flags=None):
    rubrics, verdicts = [], {}
    for i, (weight, verdict) in enumerate(weights_and_verdicts):
        flag = critical_flags[i] if critical_flags else weight >= 4
        rubrics.append(Rubric(id=f"r{i + 1}", description=f"rubric {i + 1}", weight=weight, critical=flag))
        verdicts[f"r{i + 1}"] = verdict
    return rubrics, verdicts


def test_figure_2_pizza_is_047_and_fails():
    # Weights 3, 4 (critical), 3, 5 (critical), 2; the $17 answer misses the $13 price and the $16 total.
    rubrics, verdicts = rubric_set([(3, MET), (4, NOT_MET), (3, MET), (5, NOT_MET), (2, MET)])
    result = score_rubrics(rubrics, verdicts)
    assert (result.met_weight, result.total_weight) == (8, 17)
    assert round(result.score, 2) == 0.47
    assert result.passed is False


def test_figure_8_mahjong_is_013_and_fails():
    rubrics, verdicts = rubric_set([(5, NOT_MET), (3, NOT_MET), (5, NOT_MET), (2, MET)])
    result = score_rubrics(rubrics, verdicts)
    assert (result.met_weight, result.total_weight) == (2, 15)
    assert round(result.score, 2) == 0.13
    assert result.passed is False


def test_figure_9_truss_is_062_and_passes():
    rubrics, verdicts = rubric_set([(5, MET), (3, MET), (3, NOT_MET), (5, MET), (3, NOT_MET), (2, NOT_MET)])
    result = score_rubrics(rubrics, verdicts)
    assert (result.met_weight, result.total_weight) == (13, 21)
    assert round(result.score, 2) == 0.62
    assert result.passed is True


def test_critical_rules_disagree_on_flagged_light_rubric():
    # A weight-2 rubric flagged critical (exists in the dataset) and a weight-4 rubric not flagged.
    rubrics, verdicts = rubric_set([(2, NOT_MET), (4, MET), (3, MET)], critical_flags=[True, False, False])
    assert score_rubrics(rubrics, verdicts, "weight>=4").passed is True
    assert score_rubrics(rubrics, verdicts, "flag").passed is False
    assert score_rubrics(rubrics, verdicts, "either").passed is False
    rubrics, verdicts = rubric_set([(2, MET), (4, NOT_MET)], critical_flags=[True, False])
    assert score_rubrics(rubrics, verdicts, "flag").passed is True
    assert score_rubrics(rubrics, verdicts, "either").passed is False
    with pytest.raises(ValueError):
        score_rubrics(rubrics, verdicts, "heaviest")


def test_judge_errors_and_missing_verdicts_are_counted_not_dropped():
    rubrics, verdicts = rubric_set([(5, MET), (3, Verdict.failure("timeout")), (2, MET)])
    del verdicts["r3"]
    result = score_rubrics(rubrics, verdicts)
    assert result.n_judge_errors == 2 and not result.complete
    assert result.score == pytest.approx(5 / 10)


def two_turn_task(task_id="t", category="maths", focus="follow_up_test"):
    first, _ = rubric_set([(5, None), (1, None)])
    second = [Rubric(id="s1", description="x", weight=4), Rubric(id="s2", description="y", weight=2)]
    return Task(
        id=task_id,
        turns=(Turn(prompt="a", rubrics=tuple(first)), Turn(prompt="b", rubrics=tuple(second))),
        prompt_category=category,
        eval_focus=focus,
    )


def test_multi_turn_pooled_and_per_turn():
    task = two_turn_task()
    verdicts = [{"r1": MET, "r2": NOT_MET}, {"s1": MET, "s2": MET}]
    pooled = score_task(task, verdicts)
    assert pooled.score == pytest.approx((5 + 4 + 2) / 12) and pooled.passed
    per_turn = score_task(task, verdicts, multi_turn="per_turn")
    assert per_turn.score == pytest.approx((5 / 6 + 1.0) / 2)
    failing = score_task(task, [{"r1": MET, "r2": MET}, {"s1": NOT_MET, "s2": MET}])
    assert not failing.passed and not failing.turns[1].passed and failing.turns[0].passed
    with pytest.raises(ValueError):
        score_task(task, verdicts[:1])


def test_aggregate_groups_counts_and_incomplete_tasks():
    tasks = [
        two_turn_task("a", "maths"),
        two_turn_task("b", "physics"),
        two_turn_task("c", "medical", "temporal_visual_reasoning"),
    ]
    all_met = [{"r1": MET, "r2": MET}, {"s1": MET, "s2": MET}]
    errored = [{"r1": MET, "r2": JUDGE_ERROR}, {"s1": MET, "s2": MET}]
    failed = [{"r1": NOT_MET, "r2": MET}, {"s1": MET, "s2": MET}]
    scores = [score_task(tasks[0], all_met), score_task(tasks[1], errored), score_task(tasks[2], failed)]
    report = aggregate(zip(tasks, scores, strict=True)).to_dict()
    assert report["overall"]["n"] == 3 and report["overall"]["n_incomplete"] == 1
    assert report["overall"]["apr"] == pytest.approx(2 / 3)
    assert report["overall"]["ars"] == pytest.approx((1 + 11 / 12 + 7 / 12) / 3)
    assert report["domain"]["STEM"]["n"] == 2 and report["domain"]["STEM"]["n_incomplete"] == 1
    assert report["domain"]["Medical"]["apr"] == 0.0
    assert report["eval_focus"]["follow_up_test"]["n"] == 2
    assert report["turncase"]["multi-turn"]["n"] == 3
    assert report["turncase_domain"]["multi-turn/STEM"]["n_passed"] == 2
