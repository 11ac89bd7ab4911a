"""The mode credit of a completion scored from its text (issue 39, item 4): TRL's reward function and verl's
``compute_score`` judge its calls as the env judges them (``vtb_env.replay``), so a pointless call earns there
exactly what no call earns, and the reference trajectory earns the credit.

Each policy is played through the real env first (``scripts/bench_mode_credit.py``'s policies: the golden answer
after its calls); its completion is then written from the env's record (the calls as ``<tool_call>`` blocks, the
results the tools returned), as a TRL conversation and as a decoded verl response, and scored on a fresh seed.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.scripts import load_script
from vtb_app.integrations.verl_rows import tool_agent_row
from vtb_env import ocr
from vtb_env.replay import Replayer
from vtb_rewards.compose import EpisodeReward, RewardConfig
from vtb_rewards.grpo import compute_score, make_trl_reward_func

SEED = 5309  # no other test plays it

pytestmark = [
    pytest.mark.usefixtures("exact_rubric_checks_only"),
    pytest.mark.skipif(not ocr.is_available(), reason="the credit's reader (tesseract) is not installed"),
]


def _bench():
    return load_script("bench_mode_credit")


@pytest.fixture(scope="module")
def tasks():
    return _bench().credit_tasks(6, SEED, lookups=1)


@pytest.fixture(scope="module")
def played(tasks):
    """Each policy's env record per task: ``{policy: {task_id: record}}``."""
    records = _bench().play_all(tasks, ("blank_corner", "reference", "never_call", "irrelevant_search"))
    return {
        name: {task.id: record for task, record in zip(tasks, played, strict=True)} for name, played in records.items()
    }


def _calls(record, turn: int) -> list[Any]:
    return _bench().turn_calls(record, turn)


def _trl(tasks, played, policy: str, turn: int = 0, reward=None, replayer=None) -> list[dict[str, float]]:
    """The TRL reward function's components for ``policy``'s completion of ``turn`` of every task."""
    func = make_trl_reward_func({t.id: t for t in tasks}, reward or EpisodeReward(), replayer=replayer)
    completions = [_bench().conversation_of(played[policy][t.id], t, turn) for t in tasks]
    func(
        prompts=["p"] * len(tasks),
        completions=completions,
        task_id=[t.id for t in tasks],
        turn_index=[turn] * len(tasks),
    )
    return func.last_components


def _verl(
    tasks, played, policy: str, turn: int = 0, images: bool = True, shown: bool = False
) -> list[dict[str, float]]:
    """verl's ``compute_score`` of ``policy``'s decoded response, with the ``extra_info`` of the real
    ``tool_agent`` row (``shown``: a VLM's row, its images in verl's images column) or the bench's (``images``
    False: a row that holds none)."""
    bench = _bench()

    def extra_info(task):
        if not images:
            return bench.row_extra_info(task, turn, images=False)
        return tool_agent_row(task, ["python_image_processing"], turn_index=turn, show_images=shown)["extra_info"]

    return [
        compute_score(
            "visualtoolbench", bench.response_of(played[policy][task.id], task, turn), task.to_dict(), extra_info(task)
        )
        for task in tasks
    ]


def _verl_shown(tasks, played, policy: str, turn: int = 0) -> list[dict[str, float]]:
    return _verl(tasks, played, policy, turn, shown=True)


def _vision_required(tasks, played, turn: int = 0) -> list[int]:
    """Indices of the tool-required image tasks whose reference makes a vision call on ``turn``."""
    return [
        i
        for i, task in enumerate(tasks)
        if task.mode_label == "tool_required"
        and not task.metadata.get("needs_lookup")
        and any(c.name == "python_image_processing" for c in _calls(played["reference"][task.id], turn))
    ]


@pytest.mark.slow
@pytest.mark.parametrize("path", ["trl", "verl", "verl_shown"])
def test_a_blank_crop_earns_what_no_call_earns_and_the_reference_earns_the_credit(tasks, played, path):
    score = {"trl": _trl, "verl": _verl, "verl_shown": _verl_shown}[path]
    blank, reference, never = (score(tasks, played, name) for name in ("blank_corner", "reference", "never_call"))
    required = [
        i
        for i, task in enumerate(tasks)
        if task.mode_label == "tool_required" and not task.metadata.get("needs_lookup")
    ]
    assert required and all(blank[i]["used_tools"] == 1.0 for i in required)  # the crop ran and did visual work
    for i in required:
        assert blank[i]["mode"] == never[i]["mode"] == 0.0
        assert blank[i]["reward"] == never[i]["reward"]
    credited = _vision_required(tasks, played)
    assert credited
    assert all(reference[i]["mode"] == 1.0 and reference[i]["credited_tools"] == 1.0 for i in credited)
    assert all(reference[i]["reward"] > never[i]["reward"] for i in credited)


@pytest.mark.slow
def test_the_text_path_judges_each_call_as_the_env_did(tasks, played):
    """A later turn too: the replay answers the earlier turns with their golden answers, so image names agree."""
    from vtb_env.completion import record_from_completion
    from vtb_env.replay import judge_record

    replayer = Replayer()
    try:
        for task in tasks:
            for turn in range(len(task.turns)):
                env_calls = _calls(played["reference"][task.id], turn)
                text = record_from_completion(
                    task.id, _bench().conversation_of(played["reference"][task.id], task, turn)
                )
                judge_record(task, text, turn, replayer)
                assert [c.revealed for c in text.tool_calls] == [c.revealed for c in env_calls], (task.id, turn)
    finally:
        replayer.close()


@pytest.mark.slow
def test_a_lookup_earns_the_credit_only_when_its_result_holds_a_value_the_answer_uses(tasks, played):
    lookups = [
        i for i, task in enumerate(tasks) if task.metadata.get("needs_lookup") and task.mode_label == "tool_required"
    ]
    assert lookups
    for score in (_trl, _verl):
        reference, irrelevant, never = (
            score(tasks, played, name) for name in ("reference", "irrelevant_search", "never_call")
        )
        for i in lookups:
            assert reference[i]["mode"] == 1.0 and reference[i]["credited_tools"] == 1.0
            assert irrelevant[i]["used_tools"] == 1.0 and irrelevant[i]["mode"] == never[i]["mode"] == 0.0
            assert irrelevant[i]["reward"] == never[i]["reward"]


class CountingReplayer(Replayer):
    """A replayer that counts its replays."""

    def __init__(self) -> None:
        super().__init__()
        self.replays = 0

    def replay(self, *args: Any, **kwargs: Any) -> list[Any]:
        self.replays += 1
        return super().replay(*args, **kwargs)


@pytest.mark.slow
def test_the_image_work_rule_keeps_the_old_credit_and_replays_nothing(tasks, played):
    replayer = CountingReplayer()
    try:
        old_rule = EpisodeReward(RewardConfig(mode_credit="image_work"))
        blank = _trl(tasks, played, "blank_corner", reward=old_rule, replayer=replayer)
        never = _trl(tasks, played, "never_call", replayer=replayer)
        assert replayer.replays == 0  # nothing to replay without a vision call, and nothing read under the old rule
        required = [
            i
            for i, task in enumerate(tasks)
            if task.mode_label == "tool_required" and not task.metadata.get("needs_lookup")
        ]
        assert all(blank[i]["mode"] == 1.0 for i in required)  # the gesture is paid under the old rule
        _trl(tasks, played, "blank_corner", replayer=replayer)
        assert replayer.replays == sum(1 for t in tasks if _calls(played["blank_corner"][t.id], 0))
        assert all(never[i]["used_tools"] == 0.0 for i in range(len(tasks)))
    finally:
        replayer.close()


@pytest.mark.slow
def test_a_replay_that_cannot_run_costs_the_call_its_credit_and_never_the_reward(tasks, played):
    """verl's ground truth names its images only: without the row's images the replay cannot show them."""
    required = _vision_required(tasks, played)
    without = _verl(tasks, played, "reference", images=False)
    never = _verl(tasks, played, "never_call")
    for i in required:
        assert without[i]["used_tools"] == 1.0 and without[i]["mode"] == 0.0
        assert without[i]["score"] == never[i]["score"]


@pytest.mark.slow
def test_a_later_turn_of_an_image_task_is_still_one(tasks, played):
    """The turn keeps the images its prompt shows (the earlier turns'): a search there is no use of tools."""
    later = [
        (task, turn) for task in tasks if not task.metadata.get("needs_lookup") for turn in range(1, len(task.turns))
    ]
    assert later
    for task, turn in later:
        irrelevant, never = (_trl([task], played, name, turn)[0] for name in ("irrelevant_search", "never_call"))
        assert irrelevant["used_tools"] == 0.0 and irrelevant["reward"] == never["reward"], (task.id, turn)
