"""The mode-credit zoo (issue 39, item 4; issue 31, items 3 and 4): only work that reveals what the task hides
earns the mode reward, played through the real env, sandbox, reader (Tesseract) and reward.

``scripts/bench_mode_credit.py`` plays the golden answers after each policy's calls on fresh synthetic tasks (a
seed no other test uses) and a lookup task. Pointless calls on the tool-required tasks (a blank 16x16 corner
crop, the whole picture upside down, a printed size, ``web_search("hello")``) and no-work calls earn exactly
what no call earns, episode by episode; the reference trajectory earns the credit on every tool-required
task; the right mode beats always-call and never-call.
"""

from __future__ import annotations

import pytest

from tests.support.scripts import load_script
from vtb_env import ocr

SEED = 4127  # no other test plays it


def _bench():
    return load_script("bench_mode_credit")


pytestmark = [
    pytest.mark.usefixtures("exact_rubric_checks_only"),
    pytest.mark.skipif(not ocr.is_available(), reason="the credit's reader (tesseract) is not installed"),
]
POINTLESS = ("blank_corner", "rotate_180", "print_size", "irrelevant_search", "noop_vision", "failing_vision")


@pytest.fixture(scope="module")
def tasks():
    return _bench().credit_tasks(6, SEED, lookups=1)


@pytest.fixture(scope="module")
def played(tasks):
    policies = ("reference", "never_call", "always_call", *POINTLESS)
    return _bench().credit_episodes(tasks, policies)


def _required(episodes):
    return [e for e in episodes if e["label"] == "tool_required"]


@pytest.mark.slow
def test_pointless_calls_earn_exactly_what_no_call_earns(played):
    baseline = played["never_call"]
    assert any(e["mode"] == 0.0 for e in baseline)  # tool-required tasks: no call is the wrong mode there
    for name in POINTLESS:
        assert [e["reward"] for e in played[name]] == [e["reward"] for e in baseline], name
        assert [e["mode"] for e in played[name]] == [e["mode"] for e in baseline], name
    # before the judgement the gestures paid (the finding): the zoo still shows it
    assert all(e["mode_before"] == 1.0 for e in _required(played["blank_corner"]))
    assert any(e["mode_before"] == 1.0 for e in _required(played["irrelevant_search"]))


@pytest.mark.slow
def test_the_reference_trajectory_earns_the_credit_and_the_right_mode_beats_either_habit(played, tasks):
    assert any(task.metadata.get("needs_lookup") for task in tasks)
    assert all(e["mode"] == 1.0 for e in played["reference"])  # TP on every required task, TN on every twin
    mean = {name: sum(e["mode"] for e in episodes) / len(episodes) for name, episodes in played.items()}
    reward = {name: sum(e["reward"] for e in episodes) / len(episodes) for name, episodes in played.items()}
    for habit in ("always_call", "never_call"):
        assert mean["reference"] > mean[habit] and reward["reference"] > reward[habit], habit


def _late_task(seed: int):
    """A multi-turn tool-required task whose last turn asks none of the earlier turns' key facts."""
    from vtb_env.loaders import load_tasks

    for task in load_tasks(f"synth:16:{seed}"):
        facts = task.metadata["key_facts"]
        last = len(task.turns) - 1
        asked_last = {(f["text"], *f.get("names", ())) for f in facts if f["turn"] == last}
        earlier = {(f["text"], *f.get("names", ())) for f in facts if f["turn"] < last}
        if task.mode_label == "tool_required" and last and not earlier & asked_last:
            return task
    raise AssertionError("no such task in the seed")


@pytest.mark.slow
def test_a_crop_made_after_the_turn_that_needed_it_earns_nothing():
    from vtb_env.env import VisualToolBenchEnv
    from vtb_rewards.compose import EpisodeReward

    task = _late_task(SEED)
    env = VisualToolBenchEnv(tasks=[task])
    try:
        late, on_time = (_bench().play(env, name, task) for name in ("late_crop", "reference"))
    finally:
        env.close()
    first_turn = [call for call in on_time.turns[0].tool_calls if call.revealed]
    assert first_turn  # the same crop, made on its own turn, reveals the fact
    late_calls = late.tool_calls
    assert late_calls and all(call.did_image_work and call.revealed == [] for call in late_calls)
    reward = EpisodeReward()
    assert reward(task, late)[1]["mode"] == 0.0 and reward(task, on_time)[1]["mode"] == 1.0


def test_a_call_block_that_never_ran_earns_exactly_what_no_call_earns(tasks):
    scores = _bench().unexecuted_call_scores(tasks)
    assert scores["unexecuted_call (TRL)"] == scores["golden (TRL)"]
    assert scores["unexecuted_call (verl)"] == scores["golden (verl)"]
    assert any(score > 0 for score in scores["golden (verl)"])


@pytest.mark.parametrize(
    ("value", "shown", "output", "revealed"),
    [
        ("77.4", "Ferritin", "Ferritin 774", True),  # the reader lost the point: the output still shows the fact
        ("77.4", "Ferritin 774", "Ferritin 774", False),  # the same reading as shown reveals nothing
        ("77.4", "Ferritin", "Ferritin 77.4", True),
        ("7.5", "Urea", "Urea 75", False),  # two digits: "75" is too common a number to stand for 7.5
        ("77.4", "Ferritin", "Ferritin 1774", False),  # a longer number is no reading of it
    ],
)
def test_a_value_read_without_its_decimal_point_is_judged_alike_in_the_picture_and_the_output(
    value, shown, output, revealed
):
    from vtb_env.reveal import revealed_by

    fact = {"text": value, "names": ["Ferritin"] if "Ferritin" in shown else ["Urea"]}
    assert revealed_by(fact, shown, output) is revealed
