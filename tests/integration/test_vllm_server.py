"""A real vLLM (CPU build) server: tool calls parsed natively and as raw text, images in, a judge model.

Run by ``scripts/test_vllm.sh`` (``pytest -m vllm``); the default test run deselects these.
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
import time

import pytest
from openai import OpenAI
from PIL import Image

from tests.integration.conftest import (
    JUDGE_VERDICT,
    SCRIPTED_ANSWER,
    SCRIPTED_CALL,
    SCRIPTED_SERVER_OPTIONS,
    SERVER_SCRIPT,
    VLLMServer,
)

pytestmark = pytest.mark.vllm

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "python_image_processing",
            "description": "Run Python code on the task images (image_1.png, ...).",
            "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
        },
    }
]


def _image_part(color: tuple[int, int, int]) -> dict:
    buffer = io.BytesIO()
    Image.new("RGB", (96, 64), color).save(buffer, format="PNG")
    return {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()},
    }


def _question() -> dict:
    return {"role": "user", "content": [_image_part((20, 120, 220)), {"type": "text", "text": "How many boats?"}]}


def _chat(server: VLLMServer, messages: list[dict], metrics: dict, key: str, **kwargs):
    client = OpenAI(base_url=server.base_url, api_key="unused", timeout=60)
    began = time.perf_counter()
    response = client.chat.completions.create(model=server.model, messages=messages, temperature=0, **kwargs)
    metrics[f"{key}_latency_s"] = round(time.perf_counter() - began, 3)
    return response.choices[0]


def test_native_tool_call_with_an_image_is_parsed(scripted_vlm_server, vllm_metrics):
    choice = _chat(scripted_vlm_server, [_question()], vllm_metrics, "native_tool_call", tools=TOOLS)
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls
    assert call.function.name == SCRIPTED_CALL["name"]
    assert json.loads(call.function.arguments) == SCRIPTED_CALL["arguments"]


@pytest.mark.parametrize("tools", [{}, {"tools": TOOLS, "tool_choice": "none"}], ids=["no_tools", "tool_choice_none"])
def test_unparsed_calls_come_back_as_raw_text(scripted_vlm_server, vllm_metrics, tools):
    """What OpenAIChatAgent's text mode gets (tools rendered, tool_choice="none"), and a tool-less request."""
    choice = _chat(scripted_vlm_server, [_question()], vllm_metrics, "raw_text", **tools)
    assert not choice.message.tool_calls
    assert choice.message.content == f"<tool_call>{json.dumps(SCRIPTED_CALL)}</tool_call>"


def test_after_a_tool_result_with_an_image_the_model_answers(scripted_vlm_server, vllm_metrics):
    call = _chat(scripted_vlm_server, [_question()], vllm_metrics, "first_step", tools=TOOLS).message.tool_calls[0]
    messages = [
        _question(),
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump(include={"id", "type", "function"})]},
        {
            "role": "tool",
            "tool_call_id": call.id,
            "content": [{"type": "text", "text": "(96, 64)"}, _image_part((200, 30, 30))],
        },
    ]
    choice = _chat(scripted_vlm_server, messages, vllm_metrics, "final_answer", tools=TOOLS)
    assert choice.finish_reason == "stop" and not choice.message.tool_calls
    assert choice.message.content == SCRIPTED_ANSWER


def test_start_is_idempotent_while_the_server_runs(scripted_vlm_server):
    state = scripted_vlm_server.state
    status = subprocess.run(
        ["bash", str(SERVER_SCRIPT), "status", "--state", str(state)], capture_output=True, text=True
    )
    assert status.returncode == 0 and status.stdout.startswith("running")
    signature = (state / "server.args").read_text().splitlines()
    model, port = signature[signature.index("--model") + 1], signature[signature.index("--port") + 1]
    began = time.perf_counter()
    again = subprocess.run(
        [
            "bash",
            str(SERVER_SCRIPT),
            "start",
            "--model",
            model,
            "--family",
            "tiny",
            "--name",
            scripted_vlm_server.model,
            "--port",
            port,
            "--state",
            str(state),
            *SCRIPTED_SERVER_OPTIONS,
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == scripted_vlm_server.base_url
    assert time.perf_counter() - began < 5


def test_judge_text_model_answers(judge_server, vllm_metrics):
    messages = [
        {"role": "system", "content": "Grade the response against the rubric."},
        {"role": "user", "content": "Rubric: says 3.\nResponse: The answer is 3."},
    ]
    choice = _chat(judge_server, messages, vllm_metrics, "judge")
    assert choice.message.content == JUDGE_VERDICT


def test_unknown_family_is_refused_before_starting(tmp_path):
    done = subprocess.run(
        ["bash", str(SERVER_SCRIPT), "start", "--model", str(tmp_path), "--family", "gpt", "--state", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode != 0 and "unknown --family 'gpt'" in done.stderr
    assert not (tmp_path / "server.pid").exists()
