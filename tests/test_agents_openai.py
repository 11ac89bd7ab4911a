"""OpenAIChatAgent against a real chat-completions HTTP server on 127.0.0.1."""

from __future__ import annotations

import base64
import io
import time

import numpy as np
import pytest
from PIL import Image

from tests.support.chat_server import ChatServer
from tests.support.env_tools import CALCULATOR_SCHEMA
from vtb_agents.base import summarize_calls
from vtb_agents.images import ImagePolicy, encode_image
from vtb_agents.openai_chat import AgentCallError, OpenAIChatAgent, Sampling

CALL = {"id": "call_1", "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "2+2"}'}}


def observation(image_side: int = 200) -> dict:
    image = Image.fromarray(np.random.default_rng(0).integers(0, 255, (image_side, image_side, 3), dtype=np.uint8))
    return {
        "messages": [
            {"role": "system", "content": "You are a helpful visual reasoning assistant."},
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is 2+2?"}]},
        ],
        "images": [image],
        "tools": [CALCULATOR_SCHEMA],
    }


def sent_image(request: dict) -> Image.Image:
    url = request["messages"][1]["content"][0]["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))


def test_native_mode_returns_the_servers_tool_calls_and_sends_sampling_and_tools():
    with ChatServer(lambda request: {"tool_calls": [CALL]}) as server:
        agent = OpenAIChatAgent("m", server.base_url, sampling=Sampling(temperature=0.7, seed=11, max_tokens=64))
        action = agent.act(observation())
    assert action["role"] == "assistant" and action["tool_calls"] == [CALL]
    request = server.requests[0]
    assert request["tools"] == [CALCULATOR_SCHEMA] and "tool_choice" not in request
    assert (request["temperature"], request["seed"], request["max_tokens"]) == (0.7, 11, 64)
    assert sent_image(request).size == (200, 200)
    (call,) = agent.drain_records()
    assert (call.prompt_tokens, call.completion_tokens, call.attempts, call.error) == (10, 5, 1, None)
    assert call.latency_s > 0 and agent.drain_records() == []


def test_text_mode_returns_raw_text_and_asks_the_server_not_to_parse():
    text = '<tool_call>{"name": "calculator", "arguments": {"expression": "2+2"}}</tool_call>'
    with ChatServer(lambda request: {"content": text}) as server:
        action = OpenAIChatAgent("m", server.base_url, tool_mode="text").act(observation())
    assert action == text
    assert server.requests[0]["tool_choice"] == "none" and server.requests[0]["tools"] == [CALCULATOR_SCHEMA]


def test_transient_errors_are_retried_with_backoff_then_succeed():
    failures = iter([{"status": 503}, {"status": 429}])
    with ChatServer(lambda request: next(failures, {"content": "4"})) as server:
        agent = OpenAIChatAgent("m", server.base_url)
        assert agent.act(observation())["content"] == "4"
    assert len(server.requests) == 3
    assert agent.drain_records()[0].attempts == 3


def test_retry_after_is_honoured():
    arrivals = []

    def respond(request):
        arrivals.append(time.perf_counter())
        return {"status": 429, "headers": {"Retry-After": "1.5"}} if len(arrivals) == 1 else {"content": "4"}

    with ChatServer(respond) as server:
        agent = OpenAIChatAgent("m", server.base_url)
        assert agent.act(observation())["content"] == "4"
    assert 1.5 <= arrivals[1] - arrivals[0] < 3.0  # the server's delay, not the SDK's first backoff (<= 0.5 s)


def test_permanent_errors_fail_at_once_and_are_recorded():
    with ChatServer(lambda request: {"status": 401, "body": {"error": {"message": "bad key"}}}) as server:
        agent = OpenAIChatAgent("m", server.base_url)
        with pytest.raises(AgentCallError, match="HTTP 401: bad key"):
            agent.act(observation())
    assert len(server.requests) == 1
    assert "bad key" in agent.drain_records()[0].error


def test_timeouts_exhaust_retries():
    with ChatServer(lambda request: {"content": "late"}, latency_s=0.4) as server:
        agent = OpenAIChatAgent("m", server.base_url, timeout_s=0.1, max_retries=1)
        with pytest.raises(AgentCallError, match="after 2 attempts"):
            agent.act(observation())
    assert summarize_calls(agent.drain_records())["failed_calls"] == 1


def test_a_rejected_image_is_downscaled_and_resent():
    def respond(request):
        if max(sent_image(request).size) > 64:
            return {"status": 400, "body": {"error": {"message": "image exceeds the maximum size"}}}
        return {"content": "ok"}

    with ChatServer(respond) as server:
        agent = OpenAIChatAgent("m", server.base_url)
        assert agent.act(observation(image_side=300))["content"] == "ok"
    sides = [max(sent_image(request).size) for request in server.requests]
    assert sides == [300, 150, 75, 37]
    assert agent.drain_records()[0].meta["image_shrinks"] == 3


def test_image_policy_bounds_side_and_bytes():
    noise = Image.fromarray(np.random.default_rng(1).integers(0, 255, (800, 600, 3), dtype=np.uint8))
    data, size = encode_image(noise, ImagePolicy(max_side=400))
    assert max(size) == 400 and Image.open(io.BytesIO(data)).format == "JPEG"
    data, size = encode_image(noise, ImagePolicy(max_bytes=30_000))
    assert len(data) <= 30_000 and max(size) < 800


def test_act_batch_sends_requests_concurrently():
    with ChatServer(lambda request: {"content": "x"}, latency_s=0.3) as server:
        agent = OpenAIChatAgent("m", server.base_url, concurrency=4)
        start = time.perf_counter()
        actions = agent.act_batch([observation(32) for _ in range(4)])
        elapsed = time.perf_counter() - start
    assert [a["content"] for a in actions] == ["x"] * 4
    assert elapsed < 1.0  # 4 x 0.3 s sequentially
    assert len(agent.drain_records()) == 4


def test_ready_data_urls_are_kept_or_shrunk_to_the_policy():
    from vtb_agents.images import image_data_url
    from vtb_agents.messages import to_chat_messages

    url, _ = image_data_url(Image.new("RGB", (300, 100), "white"), ImagePolicy(format="PNG"))
    obs = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}]}
    kept, side = to_chat_messages(obs, ImagePolicy())
    assert kept[0]["content"][0]["image_url"]["url"] == url and side == 300
    shrunk, side = to_chat_messages(obs, ImagePolicy(max_side=150))
    assert side == 150 and sent_image({"messages": [None, shrunk[0]]}).size == (150, 50)
