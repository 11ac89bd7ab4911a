"""The OCR baseline acts through the real env and the real sandboxed vision tool."""

from __future__ import annotations

import pytest

from agents.ocr_baseline import OcrBaselineAgent, find_answer, ocr_lines
from tests.test_eval import write_menu_tasks
from vtb_env import ocr
from vtb_env.env import VisualToolBenchEnv
from vtb_env.evaluation.runner import run_episode
from vtb_env.loaders import load_tasks
from vtb_env.ocr import OcrWord

pytestmark = pytest.mark.skipif(not ocr.is_available(), reason="tesseract is not installed")


def test_answers_from_the_line_that_matches_the_question():
    words = [OcrWord("Garden", (0, 0, 50, 10), 0.9), OcrWord("Salad", (55, 0, 90, 10), 0.9), OcrWord("$9", (200, 1, 220, 10), 0.9),
             OcrWord("Lemon", (0, 20, 50, 30), 0.9), OcrWord("Soda", (55, 20, 90, 30), 0.9), OcrWord("$4", (200, 20, 220, 30), 0.9)]
    lines = ocr_lines(words)
    assert find_answer("What is the price of the Lemon Soda?", lines) == "The answer is $4."
    assert find_answer("What do the Garden Salad and the Lemon Soda cost in total?", lines) == "The answer is 13."
    assert find_answer("Who painted this?", lines) is None


@pytest.mark.slow
def test_reads_directly_when_it_can_and_uses_the_vision_tool_only_when_it_cannot(tmp_path):
    from vtb_env.tools.base import ToolRegistry
    from vtb_env.tools.python_tools import PythonImageProcessing

    tasks = load_tasks(write_menu_tasks(tmp_path, n=2))  # menu-0: large print; menu-1: tiny print
    env = VisualToolBenchEnv(tasks, tools=ToolRegistry([PythonImageProcessing()]), reward=lambda task, record: (0.0, {}))
    agent = OcrBaselineAgent()
    try:
        big, _, _ = run_episode(env, agent, tasks[0])
        tiny, _, _ = run_episode(env, agent, tasks[1])
    finally:
        env.close()
    assert big.final_answers == ["The answer is $9."] and not big.used_tools
    (call,) = tiny.tool_calls
    assert call.name == "python_image_processing" and call.ok and len(call.images) == 4
    assert tiny.final_answers == ["The answer is $13."]
