"""Mode labels measured online for the policy being trained (issue 31, item 5): text-only probes per GRPO group.

Through TRL's real GRPOTrainer (``vtb_app.integrations.trl.train``, the path of ``scripts/train_grpo.py``) with
the scripted coin-flip policy of ``tests/support/grpo.py``: it answers "The answer is 42." or crops the image. On a
task asking for 42 a text-only probe passes, so the group is Tool-Redundant whatever the generator said; on one
asking for 7 nothing passes, so it is Tool-Required.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace

import pytest

from tests.support.env_tools import value_task
from vtb_agents.mode_probes import ModeProbes, label_metrics
from vtb_agents.rollout import Episode
from vtb_rewards.compose import EpisodeReward

pytest.importorskip("trl")

from tests.support.grpo import coin_flip_policy  # noqa: E402
from tests.support.grpo_rollouts import train_args  # noqa: E402
from vtb_app.integrations import trl as vtb_trl  # noqa: E402
from vtb_env.tools.base import ToolRegistry  # noqa: E402
from vtb_env.tools.python_tools import PythonImageProcessing  # noqa: E402


def _episode(task_id: str, used: bool, passed: bool, static: str | None = "tool_required") -> Episode:
    reward = EpisodeReward()
    components = {
        "rubric_score": float(passed),
        "passed": float(passed),
        "format": 1.0,
        "used_tools": float(used),
        "n_tool_calls": float(used),
        "judge_errors": 0.0,
        "judge_incomplete": 0.0,
    }
    value, components = reward.relabel(components, static or "tool_required")
    return Episode(task_id, [], reward=value, components=components, static_label=static)


def test_a_group_is_tool_redundant_when_a_rollout_without_tools_passed():
    probes, reward = ModeProbes(probes=2, group_size=4), EpisodeReward()
    assert [probes.is_probe(i) for i in range(8)] == [False, False, True, True] * 2
    solved = [
        _episode("a", True, True),
        _episode("a", True, False),
        _episode("a", False, True),
        _episode("a", False, False),
    ]
    unsolved = [
        _episode("b", True, True),
        _episode("b", False, False),
        _episode("b", False, False),
        _episode("b", False, False),
    ]
    probes.relabel(solved + unsolved, reward)
    assert {e.online_label for e in solved} == {"tool_redundant"} and {e.online_label for e in unsolved} == {
        "tool_required"
    }
    assert [e.components["mode"] for e in solved] == [0.0, 0.0, 1.0, 1.0]  # calling was not needed
    assert [e.mode_outcome for e in solved] == ["FP", "FP", "TN", "TN"]
    assert solved[0].reward < _episode("a", True, True).reward  # the static label had paid its call
    assert label_metrics(solved + unsolved, 4) == {
        "mode/probe_pass_rate": 0.25,
        "mode/online_redundant": 0.5,
        "mode/online_label_disagreement": 0.5,
    }


def test_the_static_label_stays_the_default_and_the_fallback():
    episodes = [_episode("a", False, True) for _ in range(4)]
    ModeProbes(probes=0, group_size=4).relabel(episodes, EpisodeReward())
    assert all(e.online_label is None and not e.probe for e in episodes) and label_metrics(episodes, 4) == {}
    masked = [replace(_episode("a", False, True), reward=math.nan) for _ in range(4)]
    ModeProbes(probes=1, group_size=4).relabel(masked, EpisodeReward())
    assert all(e.online_label is None for e in masked)  # a masked rollout: the group keeps the static label
    with pytest.raises(ValueError, match="not one task's group"):
        ModeProbes(probes=1, group_size=2).relabel([_episode("a", 0, 0), _episode("b", 0, 0)], EpisodeReward())
    for bad in (-1, 4):
        with pytest.raises(ValueError, match="label probes"):
            ModeProbes(probes=bad, group_size=4)
    with pytest.raises(SystemExit, match="--label-probes"):
        vtb_trl.label_probes(argparse.Namespace(label_probes=4, num_generations=4))


@pytest.fixture(scope="module")
def policy_path(tmp_path_factory):
    return coin_flip_policy(tmp_path_factory.mktemp("policy"), "llama")


@pytest.mark.slow
def test_grpo_with_text_only_probes_labels_each_group_for_the_policy(policy_path, tmp_path):
    tasks = [
        replace(value_task("says-42", 42, turns=1), mode_label="tool_required"),  # the generator says: call
        replace(value_task("asks-7", 7, turns=1), mode_label="tool_redundant"),  # the generator says: don't
    ]
    batches: list[list[Episode]] = []

    class Recording(vtb_trl.EnvRollout):
        def __call__(self, prompts, trainer):
            out = super().__call__(prompts, trainer)
            batches.append(out["vtb_episode"])
            return out

    args = train_args(policy_path, tmp_path / "run", 2, "--tools", "python_image_processing")
    args.label_probes = 2
    tools = ToolRegistry([PythonImageProcessing()])
    try:
        trainer = vtb_trl.train(args, tasks=tasks, tools=tools, rollout_class=Recording)
    finally:
        tools.close()
    groups = [batch[i : i + 4] for batch in batches for i in range(0, len(batch), 4)]
    assert len(groups) == 4
    for group in groups:
        assert [e.probe for e in group] == [False, False, True, True]
        for probe in group[2:]:
            assert probe.record.metadata["tools"] == [] and not any(c.ok for c in probe.record.tool_calls)
        expected = "tool_redundant" if group[0].task_id == "says-42" else "tool_required"
        assert {e.online_label for e in group} == {expected}, [e.components for e in group]
        for episode in group:
            assert episode.components["mode"] == float(
                (expected == "tool_redundant") != bool(episode.components["used_tools"])
            )
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert all(entry["vtb/mode/online_label_disagreement"] == 1.0 for entry in logs)  # both static labels are wrong
    assert all("vtb/mode/probe_pass_rate" in entry and "vtb/mode/online_redundant" in entry for entry in logs)
