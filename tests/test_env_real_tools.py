"""Whole episodes through the real vision tool: a scripted episode in the sandbox and a generic zoom policy over a
demo task with the default tools."""

from __future__ import annotations

import json

from tests.support.env_tools import (
    exact_reward,
    hermes,
    make_task,
)
from tests.support.scripted_env import roles
from vtb_env.env import VisualToolBenchEnv
from vtb_env.loaders import load_tasks
from vtb_env.tools.base import ToolRegistry
from vtb_env.tools.python_tools import PythonImageProcessing


def test_full_episode_through_the_real_vision_tool():
    env = VisualToolBenchEnv(
        tasks=[make_task("a")], tools=ToolRegistry([PythonImageProcessing()]), reward=exact_reward()
    )
    obs, _ = env.reset(seed=0)
    assert "image_1.png" in obs["tools"][0]["function"]["description"]  # the schema lists the visible files
    code = (
        "from PIL import Image\nimg = Image.open('image_1.png')\nprint(img.size)\n"
        "img.crop((0, 0, 20, 10)).save('transformed_image_0.png')\nimg.resize((5, 5)).save('other.png')"
    )
    obs, *_, info = env.step(hermes("python_image_processing", code=code))
    assert roles(obs)[-3:] == ["assistant", "tool", "user"]
    output = obs["messages"][-2]["content"]
    assert (
        json.loads(output.split("\n[")[0])["stdout"] == "(41, 30)\n"
        and "other.png is shown as transformed_image_1.png" in output
    )
    assert obs["image_names"] == ["image_1.png", "transformed_image_0.png", "transformed_image_1.png"]
    assert [image.size for image in obs["images"]] == [(41, 30), (20, 10), (5, 5)]
    obs, *_ = env.step(
        hermes(
            "python_image_processing", code="from PIL import Image\nprint(Image.open('transformed_image_1.png').size)"
        )
    )
    assert (
        json.loads(obs["messages"][-1]["content"].split("\n[")[0])["stdout"] == "(5, 5)\n"
    )  # the renamed file is visible next round
    obs, reward, terminated, truncated, info = env.step("It is 10.")
    assert terminated and reward == 1.0 and info["record"].tool_calls[0].ok


ZOOM_CODE = """from PIL import Image
img = Image.open('image_1.png')
w, h = img.size
img.crop((0, 0, w // 2, h // 2)).resize((w, h), Image.LANCZOS).save('transformed_image_0.png')
print(img.size)
"""


def test_scripted_episode_over_a_demo_task_with_the_default_tools():
    """A generic zoom policy (it never sees the reference) on the first tool-required single-turn demo task."""
    task = next(t for t in load_tasks("demo") if t.mode_label == "tool_required" and len(t.turns) == 1)
    env = VisualToolBenchEnv(tasks=[task], reward=exact_reward())
    obs, info = env.reset(seed=0)
    assert roles(obs) == ["system", "user"] and obs["image_names"] == ["image_1.png"] and info["task"]["id"] == task.id
    assert [t["function"]["name"] for t in obs["tools"]] == [
        "python_image_processing",
        "python_interpreter",
        "web_search",
        "browser_get_page_text",
        "historical_weather",
        "calculator",
    ]
    size = obs["images"][0].size

    obs, reward, terminated, truncated, info = env.step(
        "<think>zoom into the top-left quarter</think>" + hermes("python_image_processing", code=ZOOM_CODE)
    )
    assert (reward, terminated, truncated, info["parse_errors"]) == (0.0, False, False, [])
    assert roles(obs) == ["system", "user", "assistant", "tool", "user"]
    assert json.loads(obs["messages"][3]["content"].split("\n[")[0])["stdout"] == f"{size}\n"
    labels = [p["text"] for p in obs["messages"][4]["content"] if p["type"] == "text"]
    assert labels[1:] == ["[transformed_image_0.png]"] and obs["image_names"] == [
        "image_1.png",
        "transformed_image_0.png",
    ]
    assert obs["images"][1].size == size and obs in env.observation_space

    obs, reward, terminated, truncated, info = env.step("I zoomed in, but cannot read the bars.")
    assert terminated and not truncated and obs["tools"] == [] and roles(obs)[-1] == "assistant"
    record = info["record"]
    assert record.final_answers == ["I zoomed in, but cannot read the bars."] and record.used_tools
    assert [(c.name, c.ok, [i["name"] for i in c.images]) for c in record.tool_calls] == [
        ("python_image_processing", True, ["transformed_image_0.png"])
    ]
    components = info["reward_components"]
    assert {"rubric_score", "passed", "mode", "format", "used_tools", "credited_tools"} <= components.keys()
    assert components["format"] == 1.0 and components["used_tools"] == 1.0 and components["judge_errors"] == 0.0
    # a demo task carries key facts: the env judged what the zoom revealed, and only a reveal is TP (and tool_success)
    revealed = record.tool_calls[0].revealed
    assert revealed is not None and components["credited_tools"] == components["mode"] == float(bool(revealed))
    assert components.get("tool_success", 0.0) == float(bool(revealed))
    assert reward == components["reward"]
    env.close()
