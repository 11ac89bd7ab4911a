"""verifiers' own evaluation loop (legacy MultiTurnEnv, verifiers 0.3.x) against a local OpenAI-compatible server.

The server (tests/support/chat_server.py, real HTTP on 127.0.0.1) plays a scripted policy: in each
user turn it crops ``image_1.png`` once with python_image_processing (the real sandbox), then
answers "The answer is 42.". verifiers sends the requests through its OpenAI client, calls our
``env_response``, scores with our rubric and returns its ``GenerateOutputs``.
"""

from __future__ import annotations

import json

import pytest

vf = pytest.importorskip(
    "verifiers.legacy", reason="verifiers>=0.3,<0.4 is installed by the project's setup (docs/training.md)"
)

from tests.support.chat_server import ChatServer  # noqa: E402
from tests.support.env_tools import exact_reward, value_task  # noqa: E402
from vtb_app.integrations.verifiers_env import load_environment  # noqa: E402
from vtb_env.config import EnvConfig  # noqa: E402
from vtb_env.tools.base import ToolRegistry  # noqa: E402
from vtb_env.tools.calculator import Calculator  # noqa: E402
from vtb_env.tools.python_tools import PythonImageProcessing  # noqa: E402

CROP = "from PIL import Image\nImage.open('image_1.png').crop((0, 0, 20, 10)).save('transformed_image_{i}.png')"


def _policy(request: dict) -> dict:
    """One crop after each user message that is a question, then the answer."""
    messages = request["messages"]
    last_question = max(
        i for i, m in enumerate(messages) if m["role"] == "user" and "Question" in json.dumps(m.get("content"))
    )
    crops = sum(1 for m in messages if m["role"] == "tool")
    if not any(m["role"] == "tool" for m in messages[last_question:]):
        code = CROP.format(i=crops)
        return {
            "tool_calls": [
                {
                    "id": f"call_{crops}",
                    "type": "function",
                    "function": {"name": "python_image_processing", "arguments": json.dumps({"code": code})},
                }
            ]
        }
    return {"content": "The answer is 42."}


def test_verifiers_evaluate_runs_multi_turn_episodes_with_tools_and_env_reward(monkeypatch):
    tools = ToolRegistry([PythonImageProcessing(), Calculator()])
    env = load_environment(
        [value_task("right", 42, turns=2), value_task("wrong", 7, turns=1)],
        tools,
        EnvConfig.preset("default", max_tool_calls=3),
        exact_reward(),
    )
    with ChatServer(_policy) as server:
        monkeypatch.setenv("VTB_TEST_CHAT_KEY", "test")
        client = vf.ClientConfig(api_base_url=server.base_url, api_key_var="VTB_TEST_CHAT_KEY", max_retries=0)
        results = env.evaluate_sync(client=client, model="test-model", num_examples=2, rollouts_per_example=1)
    tools.close()

    outputs = sorted(results["outputs"], key=lambda o: o["example_id"])
    assert [o["reward"] for o in outputs][0] > outputs[1]["reward"]
    assert [o["metrics"]["rubric_score"] for o in outputs] == [1.0, 0.0]
    assert all(o["is_completed"] and not o.get("error") for o in outputs)
    requests = server.requests
    assert len(requests) == (2 + 2) + (1 + 1)  # a crop and an answer per turn
    assert {t["function"]["name"] for t in requests[0]["tools"]} == {"python_image_processing", "calculator"}
    images = [
        p
        for r in requests
        for m in r["messages"]
        if isinstance(m.get("content"), list)
        for p in m["content"]
        if p.get("type") == "image_url"
    ]
    assert images and all(p["image_url"]["url"].startswith("data:image/") for p in images)
    last = max((r for r in requests), key=lambda r: len(r["messages"]))  # the 2-turn episode's final request
    texts = json.dumps(last["messages"])
    assert "Question 2: what is the value?" in texts and "transformed_image_1.png" in texts
    tool_results = [json.loads(m["content"]) for m in last["messages"] if m["role"] == "tool"]
    assert [r["exit_code"] for r in tool_results] == [0, 0] and [r["images"] for r in tool_results] == [
        ["transformed_image_0.png"],
        ["transformed_image_1.png"],
    ]
    completion = json.dumps(outputs[0]["completion"], default=str)
    assert completion.count("The answer is 42.") == 2 and "Question 2" in completion


def test_an_episode_verifiers_cuts_at_max_turns_is_scored_by_the_env_as_truncated(monkeypatch):
    """verifiers stops at max_turns before the final answer: the env scores the episode as it stands."""

    def crop_forever(request: dict) -> dict:
        n = sum(1 for m in request["messages"] if m["role"] == "tool")
        arguments = json.dumps({"code": CROP.format(i=n)})
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "python_image_processing", "arguments": arguments},
        }
        return {"tool_calls": [call]}

    tools = ToolRegistry([PythonImageProcessing()])
    env = load_environment(
        [value_task("right", 42, turns=1)], tools, EnvConfig.preset("default"), exact_reward(), max_turns=2
    )
    with ChatServer(crop_forever) as server:
        monkeypatch.setenv("VTB_TEST_CHAT_KEY", "test")
        client = vf.ClientConfig(api_base_url=server.base_url, api_key_var="VTB_TEST_CHAT_KEY", max_retries=0)
        results = env.evaluate_sync(client=client, model="test-model", num_examples=1, rollouts_per_example=1)
    tools.close()

    (output,) = results["outputs"]
    assert len(server.requests) == 2 and not output.get("error")
    # scored by the env's reward as it stood: no answer, so no rubric passes; its two crops worked, but
    # process credit is earned by the answer (docs/rewards.md), so the reward is 0
    assert output["metrics"]["rubric_score"] == 0.0 and output["metrics"]["passed"] == 0.0
    assert output["metrics"]["tool_success"] == 1.0 and output["reward"] == 0.0
