"""Rubric judging: the paper's judge prompt, lenient verdict parsing, backends, a verdict cache."""

from vtb_rewards.judge.backends import BackendError, JudgeBackend, OpenAIChatBackend, TransformersBackend
from vtb_rewards.judge.cache import VerdictCache
from vtb_rewards.judge.factory import judge_from_env, make_judge
from vtb_rewards.judge.judge import Judge, JudgeItem, judge_task
from vtb_rewards.judge.prompt import (
    KEY_STEP_JUDGE_TEMPLATE,
    RUBRIC_JUDGE_TEMPLATE,
    TOOL_CALL_JUDGE_TEMPLATE,
    template_hash,
)
from vtb_rewards.judge.verdict import JUDGE_ERROR, MET, NOT_MET, Verdict, parse_verdict

__all__ = [
    "BackendError",
    "JUDGE_ERROR",
    "Judge",
    "JudgeBackend",
    "JudgeItem",
    "KEY_STEP_JUDGE_TEMPLATE",
    "MET",
    "NOT_MET",
    "OpenAIChatBackend",
    "RUBRIC_JUDGE_TEMPLATE",
    "TOOL_CALL_JUDGE_TEMPLATE",
    "TransformersBackend",
    "Verdict",
    "VerdictCache",
    "judge_from_env",
    "judge_task",
    "make_judge",
    "parse_verdict",
    "template_hash",
]
