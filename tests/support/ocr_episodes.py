"""The OCR baseline's episodes for its tests: tasks played in the real env, and the critical checks the answers met."""

from __future__ import annotations

from typing import Sequence

from vtb_agents.ocr_baseline import OcrBaselineAgent
from vtb_app.evaluation.playing import run_episode
from vtb_env.env import VisualToolBenchEnv
from vtb_env.tasks import Task
from vtb_env.tools.base import ToolRegistry
from vtb_env.trajectory import EpisodeRecord
from vtb_rewards.checks import run_check


def play_ocr_baseline(tasks: Sequence[Task], tools: ToolRegistry | None = None) -> list[EpisodeRecord]:
    """Each task played once, in order, by one OCR baseline in one env with ``tools`` (reward 0: the tests read the
    answers and the tool calls); the env is closed after."""
    env = VisualToolBenchEnv(list(tasks), tools=tools, reward=lambda task, record: (0.0, {}))
    agent = OcrBaselineAgent()
    try:
        return [run_episode(env, agent, task)[0] for task in tasks]
    finally:
        env.close()


def critical_passes(task: Task, answers: Sequence[str]) -> list[bool]:
    """Per turn: are all its critical checks met by the answer?"""
    return [
        all(run_check(r.check, a, turn.world) for r in turn.rubrics if r.check and r.critical)
        for turn, a in zip(task.turns, answers, strict=False)
    ]
