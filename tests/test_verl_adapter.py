"""The verl adapter driven the way verl drives it: tools create -> execute -> calc_reward -> release, then compute_score.

verl itself is not installed (it pulls CUDA builds); the adapter runs duck-typed. What this
cannot check: verl's own constructor/schema validation and its agent loop calling us.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from vtb_env.integrations.verl import DATA_SOURCE, VTBTool, tools_config, verl_row
from vtb_env.synth import generate
from vtb_env.tools.base import ToolRegistry
from vtb_env.tools.calculator import Calculator
from vtb_env.tools.python_tools import PythonImageProcessing
from vtb_rewards.grpo import compute_score

FACTORY = f"{__name__}:registry"
CROP = "from PIL import Image\nImage.open('image_1.png').crop((0, 0, 40, 30)).save('transformed_image_0.png')"


def registry() -> ToolRegistry:
    return ToolRegistry([PythonImageProcessing(), Calculator()])


@pytest.fixture(scope="module")
def task():
    return next(t for t in generate(6, seed=0) if len(t.turns) >= 2)


def _create_kwargs(row: dict, tool: str) -> dict:
    return row["extra_info"]["tools_kwargs"][tool]["create_kwargs"]


def test_tools_yaml_round_trip():
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load(yaml.safe_dump(tools_config(["python_image_processing", "calculator"], FACTORY)))
    tools = [VTBTool(entry["config"], entry["tool_schema"]) for entry in config["tools"]]
    assert [t.name for t in tools] == ["python_image_processing", "calculator"]
    assert config["tools"][0]["class_name"] == "vtb_env.integrations.verl.VTBTool"
    assert tools[1].get_openai_tool_schema()["function"]["parameters"]["required"] == ["expression"]
    with pytest.raises(ValueError, match="unknown tool"):
        VTBTool({"tool": "no_such_tool", "factory": FACTORY})


def test_verl_driver_sequence_runs_the_real_tools(task):
    row = verl_row(task, ["python_image_processing", "calculator"], turn_index=1)
    assert row["data_source"] == DATA_SOURCE and "[image_2.png]<image>" in row["prompt"][-1]["content"]
    vision = VTBTool({"type": "native", "tool": "python_image_processing", "factory": FACTORY})
    calc = VTBTool({"type": "native", "tool": "calculator", "factory": FACTORY})

    async def trajectory():
        vid = await vision.create(**_create_kwargs(row, "python_image_processing"))
        cid = await calc.create(**_create_kwargs(row, "calculator"))
        crop = await vision.execute(vid, {"code": CROP})
        again = await vision.execute(vid, {"code": CROP.replace("image_1", "image_2").replace("transformed_image_0", "transformed_image_1")})
        bad = await vision.execute(vid, {"no_code": 1})
        total = await calc.execute(cid, {"expression": "8.4 + 9.5"})
        rewards = (await vision.calc_reward(vid), await calc.calc_reward(cid))
        await vision.release(vid)
        await calc.release(cid)
        return crop, again, bad, total, rewards, vid

    crop, again, bad, total, rewards, vid = asyncio.run(trajectory())
    (response, step_reward, metrics) = crop
    assert json.loads(response["text"])["exit_code"] == 0 and step_reward == 0.0 and metrics["error"] is False
    assert [image.size for image in response["image"]] == [(40, 30)]
    assert again[0]["image"][0].size == (40, 30)  # turn 2's image is visible (turn_index=1)
    assert "error" in bad[0]["text"].lower() and bad[2]["error"] is True and "image" not in bad[0]
    assert "17.9" in total[0]["text"]
    assert rewards == (pytest.approx(2 / 3), 1.0)
    assert vid not in vision._trajectories


def test_create_without_task_is_a_clear_error():
    tool = VTBTool({"tool": "calculator", "factory": FACTORY})
    with pytest.raises(ValueError, match="needs the task's images"):
        asyncio.run(tool.create())


def test_compute_score_as_verl_calls_it(task):
    row = verl_row(task, [], turn_index=0)
    answer = task.turns[0].rubrics[0].check["value"]
    call = dict(data_source=row["data_source"], ground_truth=row["reward_model"]["ground_truth"], extra_info=row["extra_info"])
    right = compute_score(solution_str=f"The result is {answer}.", **call)
    wrong = compute_score(solution_str="The result is 123456.", **call)
    assert right["rubric_score"] == 1.0 and wrong["rubric_score"] == 0.0 and right["score"] > wrong["score"]
    assert all(isinstance(v, float) for v in right.values())


def test_compute_score_on_a_multi_turn_verl_response(task):
    row = verl_row(task, ["calculator"], turn_index=0)
    answer = task.turns[0].rubrics[0].check["value"]
    call = f'<tool_call>{{"name": "calculator", "arguments": {{"expression": "{answer} + 0"}}}}</tool_call>'
    response = f'{call}\n{{"result": {answer}}}\nThe result is {answer}.'
    score = compute_score(DATA_SOURCE, response, row["reward_model"]["ground_truth"], row["extra_info"])
    assert score["rubric_score"] == 1.0


def test_compute_score_reads_chat_template_markup_and_accepts_new_keywords(task):
    row = verl_row(task, ["calculator"], turn_index=0)
    answer = task.turns[0].rubrics[0].check["value"]
    call = f'<tool_call>\n{{"name": "calculator", "arguments": {{"expression": "{answer} + 0"}}}}\n</tool_call><|im_end|>\n'
    result = f'<|im_start|>user\n<tool_response>\n{{"result": {answer}}}\n</tool_response><|im_end|>\n<|im_start|>assistant\n'
    keywords = dict(data_source=DATA_SOURCE, ground_truth=row["reward_model"]["ground_truth"], extra_info=row["extra_info"], reward_router_address=None)
    answered = compute_score(solution_str=call + result + f"The result is {answer}.<|im_end|>", **keywords)
    unanswered = compute_score(solution_str=call + result, **keywords)  # cut off after the tool result
    assert answered["rubric_score"] == 1.0 and answered["used_tools"] == 1.0 and answered["format"] == 1.0
    assert unanswered["rubric_score"] == 0.0 and unanswered["format"] == 0.0
