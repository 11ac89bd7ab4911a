"""Mode labels measured online for the policy being trained: text-only probes in every GRPO group.

Seed 000 defines a task's mode label per model: Tool-Redundant "if a task can be solved using text
reasoning alone" by that model, measured by its text-only attempt. The generator's static label
(``Task.mode_label``) is fixed by the OCR probe that built the task, so a policy that reads small
print unaided is still told to call the tool. ``ModeProbes(probes=k, group_size=G)`` measures the
label for the current policy instead, in the group itself: the last ``k`` rollouts of each group of
``G`` run with the tools withdrawn (``probe_config``: the ``no_tools`` ablation, what
``vtb label-modes`` runs), and the group's label is ``vtb_rewards.mode.group_label`` over the group:
Tool-Redundant when a rollout that used no tool passed (a probe, or a rollout that chose not to call),
else Tool-Required. Every rollout of the group (probes included: they are ordinary members, trained
on like the rest) then has its mode component scored against that label (``EpisodeReward.relabel``:
nothing is judged again). The static label stays the default (``probes=0``) and the fallback: a
group whose rollouts were masked (``judge_incomplete="mask"``) keeps it.

``label_metrics`` reports, per batch, how often the online label disagrees with the static one
(``mode/online_label_disagreement``), the share of groups labelled Tool-Redundant online and the
probes' pass rate (TRL logs them as ``vtb/mode/...``; the learning check's training curve carries the
disagreement).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

from vtb_agents.rollout import Episode
from vtb_env.config import EnvConfig
from vtb_env.toolsets import ABLATIONS
from vtb_rewards.compose import EpisodeReward
from vtb_rewards.mode import TOOL_REDUNDANT, group_label, mode_outcome


def probe_config(config: EnvConfig) -> EnvConfig:
    """``config`` with the tools withdrawn, as the text-only pass runs (the ``no_tools`` ablation)."""
    return replace(config, **ABLATIONS["no_tools"])


@dataclass(frozen=True)
class ModeProbes:
    """``probes`` text-only rollouts at the end of every group of ``group_size`` (0: static labels only)."""

    probes: int
    group_size: int

    def __post_init__(self) -> None:
        if not 0 <= self.probes < self.group_size:
            raise ValueError(
                f"label probes must be 0 (off) up to {self.group_size - 1} (one rollout per group keeps the tools), "
                f"got {self.probes}"
            )

    def is_probe(self, position: int) -> bool:
        """Whether rollout ``position`` of a batch (groups of ``group_size`` one after another) is a probe."""
        return position % self.group_size >= self.group_size - self.probes

    def relabel(self, episodes: Sequence[Episode], reward: EpisodeReward) -> None:
        """Give each group its online label and rescore its rollouts' mode component (module doc), in place."""
        if self.probes == 0:
            return
        if len(episodes) % self.group_size:
            raise ValueError(f"{len(episodes)} rollouts do not split into groups of {self.group_size}")
        for start in range(0, len(episodes), self.group_size):
            group = episodes[start : start + self.group_size]
            if len({episode.task_id for episode in group}) != 1:
                raise ValueError(f"rollouts {start}..{start + self.group_size - 1} are not one task's group")
            for episode, probe in zip(group, (self.is_probe(start + i) for i in range(len(group))), strict=True):
                episode.probe = probe
            if any(math.isnan(e.reward) or "used_tools" not in e.components for e in group):
                continue  # a masked or unscored rollout: the group keeps the static label
            label = group_label(
                [not e.probe and bool(e.components["used_tools"]) for e in group],
                [bool(e.components.get("passed")) for e in group],
            )
            for episode in group:
                episode.online_label = label
                episode.reward, episode.components = reward.relabel(episode.components, label)
                episode.mode_outcome = mode_outcome(label, bool(episode.components["used_tools"]))


def label_metrics(episodes: Sequence[Episode], group_size: int) -> dict[str, float]:
    """With probes: how often a group's online label disagrees with its task's static one, the share of groups
    labelled Tool-Redundant online, and the probes' pass rate; nothing without probes."""
    groups = [episodes[i : i + group_size] for i in range(0, len(episodes), group_size)]
    labelled = [group[0] for group in groups if group[0].online_label is not None]
    probes = [e for e in episodes if e.probe]
    if not probes:
        return {}
    metrics = {"mode/probe_pass_rate": sum(e.components.get("passed", 0.0) for e in probes) / len(probes)}
    if labelled:
        metrics["mode/online_redundant"] = sum(e.online_label == TOOL_REDUNDANT for e in labelled) / len(labelled)
        both = [e for e in labelled if e.static_label is not None]
        if both:
            metrics["mode/online_label_disagreement"] = sum(e.online_label != e.static_label for e in both) / len(both)
    return metrics
