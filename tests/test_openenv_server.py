"""``vtb serve`` on openenv's own server, driven by openenv's own ``GenericEnvClient`` over real sockets.

The app is ``vtb_app.openenv_server.make_app`` (openenv's ``create_app``) under uvicorn on
127.0.0.1; the tools are the real sandboxed ``python_image_processing`` and the calculator.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import time

import httpx
import pytest

pytestmark = pytest.mark.slow  # a sandbox pool and uvicorn start: ~20 s on 2 shared cores

openenv = pytest.importorskip(
    "openenv", reason="openenv is the `serve` extra (docs/training.md; CI: scripts/test_py312.sh)"
)
uvicorn = pytest.importorskip("uvicorn")

from openenv import GenericEnvClient  # noqa: E402
from PIL import Image  # noqa: E402

from tests.support.env_server import Server  # noqa: E402
from tests.support.env_tools import exact_reward, hermes, value_task  # noqa: E402
from vtb_app.openenv_server import make_app  # noqa: E402
from vtb_app.serve_limits import ServeLimits  # noqa: E402
from vtb_env.config import EnvConfig  # noqa: E402
from vtb_env.tools.base import Tool, ToolRegistry  # noqa: E402
from vtb_env.tools.calculator import Calculator  # noqa: E402
from vtb_env.tools.python_tools import PythonImageProcessing  # noqa: E402

CROP = "from PIL import Image\nImage.open('image_1.png').crop((0, 0, 20, 10)).save('transformed_image_0.png')"
SLOW = "import time\ntime.sleep({s})\nfrom PIL import Image\nImage.open('image_1.png').save('transformed_image_0.png')"


class CountingTool(Tool):
    """The real sandboxed tool, counting the calls that started (what a closed session must not start)."""

    def __init__(self, tool: Tool):
        self.name, self.schema, self.tool, self.started = tool.name, tool.schema, tool, 0

    def run(self, arguments, context):
        self.started += 1
        return self.tool.run(arguments, context)

    def close(self) -> None:
        self.tool.close()


@pytest.fixture(scope="module")
def tools():
    registry = ToolRegistry([CountingTool(PythonImageProcessing()), Calculator()])
    yield registry
    registry.close()


def _server(tools, limits: ServeLimits = ServeLimits(max_sessions=4)) -> Server:
    tasks = [value_task("right", 42, turns=2), value_task("wrong", 7, turns=1), value_task("slow", 1, turns=1)]
    app = make_app(tasks, tools, EnvConfig.preset("default", max_tool_calls=3), exact_reward(), limits=limits)
    return Server(app)


@pytest.fixture(scope="module")
def server(tools):
    with _server(tools) as running:
        yield running


def _wait(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


async def _episode(url: str, task_id: str, answer: str) -> list:
    """A crop then the answer in every turn, as a policy would over the wire; returns every StepResult."""
    results = []
    async with GenericEnvClient(base_url=url) as client:
        result = await client.reset(task_id=task_id)
        results.append(result)
        while not result.done:
            result = await client.step({"text": hermes("python_image_processing", code=CROP)})
            results.append(result)
            result = await client.step({"message": {"content": answer}})
            results.append(result)
    return results


def _data_url_image(observation: dict, name: str) -> Image.Image:
    parts = [p for m in observation["messages"] if isinstance(m["content"], list) for p in m["content"]]
    index = [i for i, p in enumerate(parts) if p.get("type") == "text" and p["text"] == f"[{name}]"][0]
    url = parts[index + 1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))


def test_concurrent_sessions_play_full_episodes_with_images_and_typed_reward_components(server):
    async def play():
        return await asyncio.gather(
            _episode(server.url, "right", "The answer is 42."),
            _episode(server.url, "wrong", "The answer is 42."),
            _episode(server.url, "right", "The answer is 5."),
        )

    right, wrong, bad_answer = asyncio.run(play())
    first = right[0].observation
    assert right[0].reward == 0.0 and not right[0].done and first["task_id"] == "right"
    assert [t["function"]["name"] for t in first["tools"]] == ["python_image_processing", "calculator"]
    assert _data_url_image(first, "image_1.png").size == (48, 32)
    crop = right[1].observation
    assert "transformed_image_0.png" in crop["image_names"]
    assert _data_url_image(crop, "transformed_image_0.png").size == (20, 10)  # the sandbox's real crop, as a data URL
    assert [r.observation["turn"] for r in right] == [0, 0, 1, 1, 1]  # the second turn arrives after the answer
    end = right[-1]
    assert end.done and end.observation["terminated"] and not end.observation["truncated"]
    assert end.observation["reward_components"]["rubric_score"] == 1.0
    assert wrong[-1].observation["reward_components"]["rubric_score"] == 0.0
    assert bad_answer[-1].observation["reward_components"]["rubric_score"] == 0.0
    assert end.reward > wrong[-1].reward and end.reward > bad_answer[-1].reward
    _wait(lambda: server.app.state.vtb.open_sessions == 0)


def test_malformed_actions_get_clear_errors_and_the_session_goes_on(server):
    async def play():
        async with GenericEnvClient(base_url=server.url) as client:
            await client.reset(task_id="wrong")
            errors = []
            for bad in ({"txt": "hi"}, {"text": "a", "message": {"content": "b"}}, {"message": "not a dict"}, {}):
                with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
                    await client.step(bad)
                await client._send({"type": "step", "data": bad})  # the raw reply carries pydantic's details
                errors.append(await client._receive())
            bad_call = await client.step({"text": "<tool_call>{not json</tool_call>"})
            end = await client.step({"text": "The answer is 7."})
            return errors, bad_call, end

    errors, bad_call, end = asyncio.run(play())
    assert [e["type"] for e in errors] == ["error"] * 4
    details = [json.dumps(e["data"]["errors"]) for e in errors]
    assert "txt" in details[0] and "exactly one" in details[1] and "exactly one" in details[3]
    assert not bad_call.done and bad_call.observation["parse_errors"]  # the env's own error tool message
    assert end.done and end.observation["reward_components"]["rubric_score"] == 1.0


def test_client_disconnect_mid_episode_closes_the_session_and_its_pending_calls(server, tools):
    state, crops = server.app.state.vtb, tools["python_image_processing"]
    _wait(lambda: state.open_sessions == 0)  # the earlier tests' sessions close after their clients leave
    closed_before, started_before = state.closed_sessions, crops.started

    async def leave_during_a_slow_call():
        client = GenericEnvClient(base_url=server.url)
        await client.connect()
        await client.reset(task_id="slow")
        code = SLOW.format(s=1.5)
        action = {"text": hermes("python_image_processing", code=code) + hermes("python_image_processing", code=code)}
        await client._send({"type": "step", "data": action})
        await asyncio.sleep(0.3)  # the first call is running in the sandbox
        await client._ws.close()  # the client goes away without a close message

    asyncio.run(leave_during_a_slow_call())
    _wait(lambda: state.closed_sessions == closed_before + 1 and state.open_sessions == 0)
    assert crops.started == started_before + 1  # the call in flight finished; the second was never started
    asyncio.run(_episode(server.url, "wrong", "The answer is 7."))  # the server and the sandbox serve the next client


def test_sessions_and_request_sizes_are_bounded(tools):
    limits = ServeLimits(max_sessions=1, max_request_bytes=64 * 1024)
    with _server(tools, limits) as running:

        async def second_session_refused():
            async with GenericEnvClient(base_url=running.url) as first:
                await first.reset(task_id="wrong")
                second = GenericEnvClient(base_url=running.url)
                await second.connect()  # openenv answers a session over capacity at once, then closes it
                refused = await second._receive()
                assert refused["data"]["code"] == "CAPACITY_REACHED"
                await second.close()
                big = {"text": "x" * (100 * 1024)}
                with pytest.raises(Exception):  # noqa: B017 -- the server closes the socket (1009: message too big)
                    await first.step(big)

        asyncio.run(second_session_refused())
        response = httpx.post(f"{running.url}/step", json={"action": {"text": "x" * (100 * 1024)}})
        assert response.status_code == 413
        response = httpx.post(f"{running.url}/step", json={"action": {"text": "hi"}})
        assert response.status_code == 409 and "reset" in response.json()["detail"]
        response = httpx.post(f"{running.url}/reset", json={"task_id": "right"})
        assert response.status_code == 200 and response.json()["observation"]["task_id"] == "right"
        schema = httpx.get(f"{running.url}/schema").json()
        assert {"reward_components", "messages", "terminated"} <= set(schema["observation"]["properties"])


def test_vtb_serve_binds_to_localhost_by_default(capsys):
    from vtb_app.cli import build_parser, main

    args = build_parser().parse_args(["serve"])
    assert args.host == "127.0.0.1" and args.max_sessions == ServeLimits().max_sessions
    assert main(["serve", "--tasks", "nowhere/at/all"]) != 0
    error = capsys.readouterr().err
    assert error.startswith("error: ") and "nowhere/at/all" in error and "Traceback" not in error
