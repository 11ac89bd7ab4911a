"""Adaptive mode selection (seed 000): labels, TP/FN/TN/FP, MCC, and mode rewards.

A task is Tool-Required for a model if the model's text-only attempt (no tools offered) fails
it, Tool-Redundant if it passes. An episode is TP (required, used tools), FN (required, no
tools), TN (redundant, no tools) or FP (redundant, used tools).

What "used tools" means is a *reading* (``used_tools``):

- ``"vision"`` (the RL reward's default): the decision the seed defines, "visual tool invocation is
  necessary": a call of the vision tool on a task with images, or, on a task that needs a lookup
  (``metadata["needs_lookup"]``, or a reference trajectory that uses one: ``needs_lookup``), of a
  lookup tool. A ``calculator("1+1")`` is not that decision, so it earns no mode credit (and no
  ``tool_success`` credit: ``relevant_calls``). The rule is ``counted_tools``; the report's MCC uses it too.
  A vision call counts only when its sandbox saw it do visual work (``ToolCallRecord.did_image_work``:
  it read an input image and returned a new image or printed values), so code that reads nothing
  (``pass``, or code that raises first) earns exactly what no call earns.
- ``"any"``: any tool call (the paper's reading, and Table 7's proactivity, which counts every tool).

**Mode credit is for revealing** (``"vision"`` reading; ``credited_calls``, ``mode_decision``): on a Tool-Required
task the episode is TP only when a counted call *revealed* what the task hides, as the env judged where the
images are (``ToolCallRecord.revealed``, ``vtb_env.reveal``: a returned image shows a hidden key fact to the
labels' reader, or a lookup's result holds a value the answer uses). On a Tool-Redundant task every counted
call is still a use of tools (FP): a pointless call never pays and still costs where tools are not needed.
A call the env did not judge (``revealed is None``: official data has no key facts; a record scored from
completion text) keeps the "did visual work" rule.

Under both readings a call counts only if it ran: one read from a completion's text without a result
in the conversation (``ToolCallRecord.answered``) is no call. ``call_counts`` is the one rule.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Literal, Mapping, Sequence

from vtb_env.tasks import ModeLabel, Task
from vtb_env.toolsets import ALL_TOOLS, LOOKUP_TOOLS, VISION_TOOL
from vtb_env.trajectory import NO_RESULT, EpisodeRecord, ToolCallRecord, image_work_done

Outcome = Literal["TP", "FN", "TN", "FP"]
Reading = Literal["vision", "any"]
READINGS: tuple[Reading, ...] = ("vision", "any")
TOOL_REQUIRED: ModeLabel = "tool_required"
TOOL_REDUNDANT: ModeLabel = "tool_redundant"
MCC_EPSILON = 1e-12


def reference_tools(task: Task) -> list[str]:
    """The tools the task's reference trajectories name (JSON or the dataset's free text; the
    toolkit's ``google_search`` is ``web_search``)."""
    text = " ".join(turn.tool_trajectory_raw for turn in task.turns).replace("google_search", "web_search")
    return [name for name in ALL_TOOLS if name in text]


def needs_lookup(task: Task) -> bool:
    """Does the task need a lookup tool? The generator says so (``metadata["needs_lookup"]``) or the
    task's reference trajectory uses one."""
    return bool(task.metadata.get("needs_lookup")) or bool(set(reference_tools(task)) & set(LOOKUP_TOOLS))


def counted_tools(reading: Reading, has_images: bool, lookup_needed: bool) -> frozenset[str] | None:
    """The tools whose calls count as "using tools" under ``reading``; None when every call counts
    (``"any"``, or a task with neither images nor a lookup need: it has no vision decision to make).
    The one rule behind the reward's ``relevant_calls`` and the report's MCC (``vtb_app.evaluation.modes``)."""
    if reading == "any":
        return None
    if reading != "vision":
        raise ValueError(f"unknown used-tools reading {reading!r}; choose one of {READINGS}")
    if not has_images and not lookup_needed:
        return None
    return frozenset(({VISION_TOOL} if has_images else set()) | (set(LOOKUP_TOOLS) if lookup_needed else set()))


def call_counts(
    name: str, error_kind: str | None, image_work: Mapping | None, reading: Reading, names: frozenset[str] | None
) -> bool:
    """Does one call (its tool name, error kind and vision record) count as using tools? It ran (a result came
    back), its tool is among ``names`` (``counted_tools``; None: any), and under ``"vision"`` a vision call did
    visual work (``image_work_done``)."""
    if error_kind == NO_RESULT or (names is not None and name not in names):
        return False
    return reading == "any" or name != VISION_TOOL or image_work_done(image_work)


def relevant_calls(
    record: EpisodeRecord, reading: Reading = "vision", task: Task | None = None
) -> list[ToolCallRecord]:
    """The episode's calls that count as "using tools" under ``reading`` (see the module docstring).

    The task's images and lookup need come from ``task`` when given (``needs_lookup``), else from the
    record's metadata (what the env stores: ``images``, and the task's ``metadata``).
    """
    if task is not None:
        has_images, lookup_needed = bool(task.images), needs_lookup(task)
    else:
        has_images = bool(record.metadata.get("images"))
        lookup_needed = bool((record.metadata.get("metadata") or {}).get("needs_lookup"))
    names = counted_tools(reading, has_images, lookup_needed)
    return [c for c in record.tool_calls if call_counts(c.name, c.error_kind, c.image_work, reading, names)]


def used_tools(record: EpisodeRecord, reading: Reading = "vision", task: Task | None = None) -> bool:
    """Did the episode choose the tool mode? ``reading="vision"``: the vision tool doing visual work (or a
    needed lookup); ``"any"``: any tool call (the paper's MCC reading). Malformed attempts of a counted
    lookup tool count (the env answered them); calls without a result never do."""
    return bool(relevant_calls(record, reading, task))


def credited_calls(calls: Iterable[ToolCallRecord]) -> list[ToolCallRecord]:
    """The counted calls (``relevant_calls``) that earn the mode credit: those the env judged to have revealed
    something (``revealed`` non-empty), and those it did not judge (``revealed is None``: the image-work rule)."""
    return [call for call in calls if call.revealed is None or bool(call.revealed)]


def mode_decision(label: ModeLabel, used: bool, credited: bool) -> bool:
    """What the mode outcome reads as "used tools": a call that earned the credit on a Tool-Required task (TP
    needs the work), any counted call on a Tool-Redundant one (FP needs only the gesture)."""
    return credited if label == TOOL_REQUIRED else used


def label_from_text_only(passed: bool) -> ModeLabel:
    """The label of a task for a model, from whether its text-only attempt passed."""
    return TOOL_REDUNDANT if passed else TOOL_REQUIRED


def mode_outcome(label: ModeLabel, used_tools: bool) -> Outcome:
    if label == TOOL_REQUIRED:
        return "TP" if used_tools else "FN"
    if label == TOOL_REDUNDANT:
        return "FP" if used_tools else "TN"
    raise ValueError(f"unknown mode label {label!r}; expected {TOOL_REQUIRED!r} or {TOOL_REDUNDANT!r}")


@dataclass(frozen=True)
class ConfusionMatrix:
    tp: int = 0
    fn: int = 0
    tn: int = 0
    fp: int = 0

    @classmethod
    def from_outcomes(cls, outcomes: Iterable[Outcome]) -> "ConfusionMatrix":
        counts = {"TP": 0, "FN": 0, "TN": 0, "FP": 0}
        for outcome in outcomes:
            counts[outcome] += 1
        return cls(tp=counts["TP"], fn=counts["FN"], tn=counts["TN"], fp=counts["FP"])

    @property
    def n(self) -> int:
        return self.tp + self.fn + self.tn + self.fp

    def mcc(self, epsilon: float = MCC_EPSILON) -> float:
        """(TP·TN − FP·FN) / (sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) + ε), exactly as the seed's formula.

        When a margin is empty the numerator is 0 too, so MCC = 0 (chance level), as in sklearn
        (``matthews_corrcoef``), for any ``epsilon`` including 0.
        """
        numerator = self.tp * self.tn - self.fp * self.fn
        denominator = math.sqrt(
            float(self.tp + self.fp) * (self.tp + self.fn) * (self.tn + self.fp) * (self.tn + self.fn)
        )
        if denominator == 0.0:
            return 0.0
        return numerator / (denominator + epsilon)

    def to_dict(self) -> dict[str, float | int]:
        return {"TP": self.tp, "FN": self.fn, "TN": self.tn, "FP": self.fp, "n": self.n, "mcc": self.mcc()}


@dataclass(frozen=True)
class ModeRewardConfig:
    """Reward per outcome. Defaults: 1 for the right mode, 0 for the wrong one."""

    tp: float = 1.0
    tn: float = 1.0
    fp: float = 0.0
    fn: float = 0.0

    def reward(self, outcome: Outcome) -> float:
        return {"TP": self.tp, "TN": self.tn, "FP": self.fp, "FN": self.fn}[outcome]


def mode_reward(label: ModeLabel, used_tools: bool, config: ModeRewardConfig = ModeRewardConfig()) -> float:
    return config.reward(mode_outcome(label, used_tools))


def group_label(used_tools: Sequence[bool], passed: Sequence[bool], min_text_only_passes: int = 1) -> ModeLabel:
    """A label from a GRPO group itself: Tool-Redundant when enough no-tool rollouts passed.

    This is the text-only criterion applied online to the current policy: if the policy solves
    the task without tools in its own group, tool use was not needed.
    """
    text_only_passes = sum(1 for used, ok in zip(used_tools, passed, strict=False) if ok and not used)
    return TOOL_REDUNDANT if text_only_passes >= min_text_only_passes else TOOL_REQUIRED


def group_relative_mode_rewards(
    used_tools: Sequence[bool],
    passed: Sequence[bool] | None = None,
    *,
    label: ModeLabel | None = None,
    config: ModeRewardConfig = ModeRewardConfig(),
) -> list[float]:
    """Mode rewards for one group of rollouts of one task, centred on the group mean.

    The label is the task's (static) label when given, else ``group_label`` of the group's own
    rollouts (then ``passed`` is required). Centring makes the signal relative within the group.
    """
    if label is None:
        if passed is None or len(passed) != len(used_tools):
            raise ValueError("without a label, give one 'passed' flag per rollout")
        label = group_label(used_tools, passed)
    rewards = [mode_reward(label, used, config) for used in used_tools]
    mean = sum(rewards) / len(rewards) if rewards else 0.0
    return [r - mean for r in rewards]


class ModeLabelStore:
    """Labels per (model, task) in one JSON file: ``{model: {task_id: label}}``; writes are atomic."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._labels: dict[str, dict[str, ModeLabel]] = {}
        if self.path.exists():
            data = json.loads(self.path.read_text())
            if not isinstance(data, dict):
                raise ValueError(f"{self.path}: expected a JSON object {{model: {{task_id: label}}}}")
            self._labels = {str(m): dict(labels) for m, labels in data.items()}

    def labels(self, model: str) -> dict[str, ModeLabel]:
        return dict(self._labels.get(model, {}))

    def get(self, model: str, task_id: str) -> ModeLabel | None:
        return self._labels.get(model, {}).get(task_id)

    def record_text_only(
        self, model: str, results: Mapping[str, bool] | Iterable[tuple[str, bool]]
    ) -> dict[str, ModeLabel]:
        """Store labels from text-only pass results (``{task_id: passed}``) and save; returns them."""
        pairs = results.items() if isinstance(results, Mapping) else results
        new = {task_id: label_from_text_only(passed) for task_id, passed in pairs}
        self._labels.setdefault(model, {}).update(new)
        self.save()
        return new

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
        with os.fdopen(fd, "w") as handle:
            json.dump(self._labels, handle, indent=1, sort_keys=True)
        os.replace(tmp, self.path)
