"""One per-episode reward from the components, for RL. The environment calls it at episode end.

    reward = sum(w_c * v_c) / sum(w_c)   over the components c that apply to the episode

Components (each in [0, 1] except the mode reward, which takes the configured outcome values):

- ``rubric_score``: weighted rubric score (paper eq. 1; multi-turn pooled by default)
- ``passed``: 1 if every critical rubric is Met (critical rule configurable)
- ``mode``: adaptive mode-selection reward from TP/FN/TN/FP; applies when the task has a mode
  label (``Task.mode_label`` or the ``mode_labels`` given to the reward). "Used tools" is read as
  ``mode_reading`` says (``vtb_rewards.mode.used_tools``; default ``"vision"``: the vision tool, or a
  lookup tool where the task needs one -- a calculator call is not the decision the seed defines); on a
  Tool-Required task TP needs a call that revealed what the task hides (``vtb_rewards.mode.mode_decision``)
- ``format``: share of steps whose action parsed cleanly, 0 if a turn ended without an answer
- ``tool_success``: share of the counted calls (``mode_reading``) without an error; applies when
  one of them earned the mode credit (``credited_calls``), so a call of another tool, or a vision call
  that revealed nothing, earns nothing on its own
- ``kcoverage``, ``tool_effectiveness``: judged process metrics (one judge call per key step /
  tool call); applied when their weight is above 0 and the episode has key steps / tool calls

Components that do not apply are left out of both sums (and of ``info``), so an episode without
tool calls is neither rewarded nor punished by ``tool_success``; the mode reward judges that.

Process credit is earned (``process_credit="earned"``, the default): the process components (mode,
format, tool_success, kcoverage, tool_effectiveness) are weighted by the episode's rubric score, so
an answer worth nothing earns nothing for its form (a constant answer in the right mode, a
well-formed tool call before a wrong answer), and a half-right one half its process credit:

    reward = (w_r * rubric_score + w_p * passed + rubric_score * sum(w_c * v_c, process c)) / sum(w)

``process_credit="always"`` adds the process components unweighted (the earlier reward).
Default weights: rubric_score 1.0, passed 1.0, mode 0.25, format 0.1, tool_success 0.1,
kcoverage 0, tool_effectiveness 0 (the judged process metrics cost calls: opt in).

Judge outages: a rubric whose judging failed counts as not Met (``judge_incomplete="not_met"``,
the default; ``info`` says ``judge_incomplete: 1``). With ``judge_incomplete="mask"`` such an
episode's reward is NaN and ``masked: 1`` is in ``info``: ``vtb_rewards.grpo.group_advantages``
leaves it out of its group (advantage 0) and the TRL reward function returns None for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal, Mapping

from vtb_env.reward import RewardFn
from vtb_env.tasks import CriticalRule, ModeLabel, Task
from vtb_env.trajectory import EpisodeRecord
from vtb_rewards.checks import ANSWER_FORMATS
from vtb_rewards.judge.factory import judge_from_env
from vtb_rewards.judge.judge import Judge, judge_task
from vtb_rewards.mode import ModeRewardConfig, Reading, credited_calls, mode_decision, mode_outcome, relevant_calls
from vtb_rewards.process import judge_kcoverage, judge_tool_effectiveness
from vtb_rewards.scoring import MultiTurnMode, score_task, scored_report

__all__ = ["EpisodeReward", "RewardConfig", "RewardFn", "default_reward", "format_validity"]

PROCESS_COMPONENTS = ("mode", "format", "tool_success", "kcoverage", "tool_effectiveness")


@dataclass(frozen=True)
class RewardConfig:
    """How an episode is scored: the component weights, how verdicts become a task score
    (``critical_rule``, ``multi_turn``: see ``vtb_rewards.scoring``), the mode-reward values, which
    calls count as using tools (``mode_reading``), whether process credit must be earned
    (``process_credit``), and what a judge outage does (``judge_incomplete``). The env's reward and
    the evaluation share it."""

    rubric_score: float = 1.0
    passed: float = 1.0
    mode: float = 0.25
    format: float = 0.1
    tool_success: float = 0.1
    kcoverage: float = 0.0
    tool_effectiveness: float = 0.0
    critical_rule: "CriticalRule" = "weight>=4"
    multi_turn: MultiTurnMode = "pooled"
    mode_values: ModeRewardConfig = field(default_factory=ModeRewardConfig)
    judge_incomplete: Literal["not_met", "mask"] = "not_met"  # see the module docstring
    mode_reading: Reading = "vision"  # which calls are "using tools": vtb_rewards.mode.used_tools
    # what earns a Tool-Required task's mode credit: a call that "revealed" what it hides (the env's judgement,
    # vtb_env.reveal), or any counted call that did "image_work" (the rule before reveals were judged: for a
    # policy whose call is a fixed action, such as the learning check's two-action policy, which asks *when*)
    mode_credit: Literal["revealed", "image_work"] = "revealed"
    process_credit: Literal["earned", "always"] = "earned"  # see the module docstring
    # how exact checks read an answer: "free" text (the benchmark's judge) or only its "slot" (a final
    # "Answer: ..." line or \boxed{...}, the RLVR convention): vtb_rewards.checks, docs/rewards.md
    answer_format: Literal["free", "slot"] = "free"

    def __post_init__(self) -> None:
        if self.answer_format not in ANSWER_FORMATS:
            raise ValueError(f"answer_format must be one of {ANSWER_FORMATS}, got {self.answer_format!r}")
        if self.mode_reading not in ("vision", "any"):
            raise ValueError(f"mode_reading must be 'vision' or 'any', got {self.mode_reading!r}")
        if self.mode_credit not in ("revealed", "image_work"):
            raise ValueError(f"mode_credit must be 'revealed' or 'image_work', got {self.mode_credit!r}")
        if self.process_credit not in ("earned", "always"):
            raise ValueError(f"process_credit must be 'earned' or 'always', got {self.process_credit!r}")

    def weights(self) -> dict[str, float]:
        names = ("rubric_score", "passed", "mode", "format", "tool_success", "kcoverage", "tool_effectiveness")
        return {name: getattr(self, name) for name in names}

    def scoring(self) -> dict[str, str]:
        """The fields that turn verdicts into a task score (what a run's ``config.json`` records as ``scoring``)."""
        return {"critical_rule": self.critical_rule, "multi_turn": self.multi_turn}


def format_validity(task: "Task", record: "EpisodeRecord") -> float:
    """Share of steps without parse errors; 0 when some turn of the task got no final answer."""
    answered = len(record.turns) >= len(task.turns) and all(
        t.final_answer is not None for t in record.turns[: len(task.turns)]
    )
    steps = [step for turn in record.turns for step in turn.steps]
    if not answered or not steps:
        return 0.0
    return sum(not step.parse_errors for step in steps) / len(steps)


class EpisodeReward:
    """``reward(task, record) -> (scalar, components)``; judge failures never raise (see ``info``).

    Diagnostics in the components dict (not rewarded): ``used_tools`` (under ``mode_reading``), ``credited_tools``
    (some counted call earned the mode credit: ``vtb_rewards.mode.credited_calls``), ``n_tool_calls`` (all),
    ``judge_errors`` (rubric verdicts that failed; those rubrics count as not Met) and
    ``judge_incomplete`` (1 when any did).
    """

    def __init__(
        self,
        config: RewardConfig | None = None,
        judge: Judge | None = None,
        mode_labels: Mapping[str, "ModeLabel"] | None = None,
    ):
        self.config = config or RewardConfig()
        self.judge = judge if judge is not None else Judge(backend=None)
        self.mode_labels = dict(mode_labels or {})

    def components(self, task: "Task", record: "EpisodeRecord") -> dict[str, float]:
        return self._judged(task, record)[0]

    def _judged(self, task: "Task", record: "EpisodeRecord") -> tuple[dict[str, float], dict[str, Any]]:
        """The components, and the verdicts and task score they came from (``explain``'s details)."""
        cfg = self.config
        verdicts = judge_task(self.judge, task, record.final_answers, self.config.answer_format)
        scored = score_task(task, verdicts, cfg.critical_rule, cfg.multi_turn)
        details = {
            **scored_report(task, verdicts, scored, cfg.critical_rule),
            "judge": self.judge.judge_id,
            "scoring": cfg.scoring(),
        }
        values: dict[str, float] = {
            "rubric_score": scored.score,
            "passed": float(scored.passed),
            "format": format_validity(task, record),
        }
        counted = relevant_calls(record, cfg.mode_reading, task)
        judged = cfg.mode_reading == "vision" and cfg.mode_credit == "revealed"
        credited = credited_calls(counted) if judged else counted
        label = self.mode_labels.get(task.id) or task.mode_label
        if label is not None:
            values["mode"] = cfg.mode_values.reward(
                mode_outcome(label, mode_decision(label, bool(counted), bool(credited)))
            )
        if credited:  # a call that earned nothing earns no tool_success either: exactly what no call earns
            values["tool_success"] = sum(call.ok for call in counted) / len(counted)
        judge_errors = scored.n_judge_errors
        for name, metric in (("kcoverage", judge_kcoverage), ("tool_effectiveness", judge_tool_effectiveness)):
            if getattr(cfg, name) > 0:
                measured = metric(self.judge, task, record)
                if measured.value is not None:
                    values[name] = measured.value
                judge_errors += measured.n_judge_errors
        values.update(
            used_tools=float(bool(counted)),
            credited_tools=float(bool(credited)),
            n_tool_calls=float(len(record.tool_calls)),
            judge_errors=float(judge_errors),
            judge_incomplete=float(judge_errors > 0),
        )
        return values, details

    def __call__(self, task: "Task", record: "EpisodeRecord") -> tuple[float, dict[str, float]]:
        reward, components, _ = self.explain(task, record)
        return reward, components

    def explain(self, task: "Task", record: "EpisodeRecord") -> tuple[float, dict[str, float], dict[str, Any]]:
        """The reward, its components, and the details it came from: ``verdicts`` and ``score`` (as
        evaluation records store them), the ``judge`` id and the ``scoring`` fields. The env puts the
        details in ``info["reward_details"]``, so an evaluation does not judge the answers again."""
        values, details = self._judged(task, record)
        reward, components = self._combined(values)
        return reward, components, details

    def relabel(self, components: Mapping[str, float], label: "ModeLabel") -> tuple[float, dict[str, float]]:
        """The reward and components of an episode that ``explain`` scored as ``components``, had its task
        carried the mode label ``label`` (an online label: ``vtb_agents.mode_probes``). Only the mode
        component changes, from the episode's own ``used_tools``: nothing is judged again."""
        values = {name: value for name, value in components.items() if name not in ("reward", "masked")}
        used = bool(values["used_tools"])
        decision = mode_decision(label, used, bool(values.get("credited_tools", used)))
        values["mode"] = self.config.mode_values.reward(mode_outcome(label, decision))
        return self._combined(values)

    def _combined(self, values: dict[str, float]) -> tuple[float, dict[str, float]]:
        """The weighted reward of the components (module doc), and the components with it."""
        if self.config.judge_incomplete == "mask" and values["judge_incomplete"]:
            return float("nan"), {**values, "masked": 1.0, "reward": float("nan")}
        weights = {name: w for name, w in self.config.weights().items() if w > 0 and name in values}
        total = sum(weights.values())
        earned = values["rubric_score"] if self.config.process_credit == "earned" else 1.0
        reward = (
            sum(w * values[name] * (earned if name in PROCESS_COMPONENTS else 1.0) for name, w in weights.items())
            / total
            if total
            else 0.0
        )
        return reward, {**values, "reward": reward}


def default_reward(
    config: RewardConfig | None = None,
    judge: Judge | None = None,
    mode_labels: Mapping[str, "ModeLabel"] | None = None,
    judge_options: Mapping[str, Any] | None = None,
    reward_options: Mapping[str, Any] | None = None,
) -> EpisodeReward:
    """The environment's reward: default weights, and the judge from ``VTB_JUDGE_*`` variables when not given,
    its request options (temperature, max tokens, token field, structured output) overridden by ``judge_options``
    (see ``vtb_rewards.judge.factory``). ``reward_options``: ``RewardConfig`` fields (``EnvConfig.reward_options``)."""
    if reward_options:
        if config is not None:
            raise ValueError("give a RewardConfig or reward_options, not both")
        unknown = sorted(set(reward_options) - {f.name for f in fields(RewardConfig)})
        if unknown:
            raise ValueError(
                f"unknown reward options {unknown}; RewardConfig fields: {[f.name for f in fields(RewardConfig)]}"
            )
        config = RewardConfig(**reward_options)
    if judge is None:
        judge = judge_from_env(judge_options)
    elif judge_options:
        raise ValueError("judge_options configure the judge from VTB_JUDGE_*: give them or a judge, not both")
    return EpisodeReward(config, judge, mode_labels)
