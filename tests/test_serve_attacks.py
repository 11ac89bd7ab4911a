"""``vtb serve`` as a hostile client meets it (issue 32, item 2): the real app under the real server
(``uvicorn_server`` on 127.0.0.1), real WebSocket, HTTP and raw TCP clients, bounded loops.

Before: a session reaped for idling still answered on its socket while its slot went to a new client
(4 sessions acting under ``--max-sessions 2``); two ``POST /mcp`` ``openenv/session/create`` took
every slot without a connection; unfinished headers were never timed out; anyone reaching the server
ran code in its sandbox pool; bad ``/reset`` parameters answered 500; a 200,000-level nested action
ended the session; 4 MiB of small JSON objects were parsed on the event loop (figures:
scripts/bench_serve_attacks.py, docs/training.md).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import secrets
import socket
import time

import httpx
import pytest

pytest.importorskip("openenv", reason="openenv is the `serve` extra (docs/training.md)")
pytest.importorskip("uvicorn")
pytestmark = pytest.mark.slow  # a server per test: ~30 s on 2 shared cores

from websockets.asyncio.client import connect  # noqa: E402
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402

from tests.support.env_server import Server  # noqa: E402
from tests.support.env_tools import exact_reward, small_tools, value_task  # noqa: E402
from vtb_app.openenv_server import make_app, serve  # noqa: E402
from vtb_app.serve_guard import IDLE_CLOSE_CODE, json_bounds  # noqa: E402
from vtb_app.serve_limits import ServeLimits  # noqa: E402
from vtb_app.serve_socket import TokenRequiredError, bind  # noqa: E402
from vtb_app.serve_token import WeakTokenError  # noqa: E402
from vtb_env.config import EnvConfig  # noqa: E402

RESET = {"type": "reset", "data": {}}
TOKEN = secrets.token_urlsafe(32)


def app(limits: ServeLimits, token: str | None = None):
    tasks = [value_task("a", 1, turns=1), value_task("b", 2, turns=1)]
    return make_app(tasks, small_tools(), EnvConfig.preset("default"), exact_reward(), limits=limits, token=token)


async def ask(ws, message) -> dict | str:
    """One message and its reply: the reply, or ``closed <code>`` if the server closed the socket instead."""
    try:
        await ws.send(message if isinstance(message, (str, bytes)) else json.dumps(message))
        return json.loads(await asyncio.wait_for(ws.recv(), 30))
    except ConnectionClosed as exc:
        return f"closed {exc.rcvd.code if exc.rcvd else None}"


def acted(reply) -> bool:
    return isinstance(reply, dict) and reply["type"] == "observation"


def wait_until(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_an_idle_session_is_closed_with_its_socket_so_no_more_than_max_sessions_act():
    with Server(app(ServeLimits(max_sessions=2, session_timeout_s=1.0))) as server:

        async def play():
            first = [await connect(server.ws_url) for _ in range(2)]
            assert all([acted(await ask(ws, RESET)) for ws in first])
            third = await connect(server.ws_url)
            refused = json.loads(await third.recv())
            assert refused["data"]["code"] == "CAPACITY_REACHED"
            await asyncio.sleep(2.5)  # both idle past the timeout: closed by the server
            later = [await connect(server.ws_url) for _ in range(2)]
            joined = [acted(await ask(ws, RESET)) for ws in later]
            old = [await ask(ws, RESET) for ws in first]
            for ws in [*first, *later, third]:
                await ws.close()
            return joined, old, [ws.close_code for ws in first]

        joined, old, codes = asyncio.run(play())
        wait_until(lambda: server.app.state.vtb.open_sessions == 0)
    assert joined == [True, True] and old == ["closed 4000", "closed 4000"] and codes == [IDLE_CLOSE_CODE] * 2


def test_a_session_that_works_longer_than_the_timeout_is_not_idle():
    with Server(app(ServeLimits(max_sessions=1, session_timeout_s=1.0))) as server:

        async def play():
            async with connect(server.ws_url) as ws:
                replies = []
                for _ in range(6):  # 3 s of activity, 0.5 s apart
                    replies.append(await ask(ws, RESET))
                    await asyncio.sleep(0.5)
                return replies

        assert all(acted(reply) for reply in asyncio.run(play()))


def test_requests_that_hold_no_connection_cannot_take_a_session():
    with Server(app(ServeLimits(max_sessions=2))) as server:
        create = {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}}
        answers = [httpx.post(f"{server.url}/mcp", json=create) for _ in range(3)]
        assert [a.status_code for a in answers] == [404] * 3 and "session_id" not in answers[0].text
        for path in ("/web", "/vtb-gym/tasks", "/mcp/"):
            assert httpx.post(f"{server.url}{path}", json={}).status_code == 404

        async def play():
            with pytest.raises(InvalidStatus):  # the MCP WebSocket is refused at the handshake
                await connect(f"ws://127.0.0.1:{server.port}/mcp")
            sockets = [await connect(server.ws_url) for _ in range(2)]
            replies = [await ask(ws, RESET) for ws in sockets]
            for ws in sockets:
                await ws.close()
            return replies

        assert all(acted(reply) for reply in asyncio.run(play()))
        wait_until(lambda: server.app.state.vtb.open_sessions == 0)  # no session outlives its socket


def partial_request(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # the headers never end
    return sock


def closed_by_server(sock: socket.socket, within_s: float) -> bool:
    sock.settimeout(within_s)
    try:
        return sock.recv(1024) == b""
    except (TimeoutError, socket.timeout):
        return False
    except ConnectionResetError:
        return True


def test_unfinished_headers_time_out_and_health_answers_meanwhile():
    limits = ServeLimits(header_timeout_s=1.0, max_connections=16)
    with Server(app(limits)) as server:
        loris = [partial_request(server.port) for _ in range(40)]  # more than the cap
        for _ in range(3):  # a header now and then: never the blank line that ends them
            for sock in loris:
                try:
                    sock.sendall(b"X-a: b\r\n")
                except OSError:
                    pass
            response = httpx.get(f"{server.url}/health", timeout=5)
            assert response.status_code == 200  # a client that sends its headers at once evicts the oldest loris
            time.sleep(0.2)
        assert all(closed_by_server(sock, 3.0) for sock in loris)
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as keep_alive:
            keep_alive.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = b""
            while b"healthy" not in answer:
                answer += keep_alive.recv(4096)
            assert answer.startswith(b"HTTP/1.1 200")
            keep_alive.sendall(b"GET /health HTTP/1.1\r\n")  # the next request on the same connection stalls
            assert closed_by_server(keep_alive, 3.0)
        for sock in loris:
            sock.close()


def test_a_body_that_never_arrives_gets_408():
    with Server(app(ServeLimits(body_timeout_s=1.0))) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(
                b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
            )
            sock.settimeout(5)
            assert sock.recv(4096).startswith(b"HTTP/1.1 408")


BAD_RESETS = [
    ('{"task_id": "no-such-task"}', "task_id", "no task 'no-such-task' on this server"),
    ('{"index": "abc"}', "index", "valid integer"),
    ('{"index": 1000000000000000000000000000000}', "index", "index must be below 2"),
    ('{"index": -1}', "index", "greater than or equal to 0"),
    ('{"seed": 1e400}', "seed", "finite number"),
    ('{"seed": 1180591620717411303424}', "seed", "less than or equal to"),
    ('{"task_id": "a", "color": "red"}', "color", "Extra inputs are not permitted"),
]


@pytest.mark.parametrize(("body", "field", "says"), BAD_RESETS, ids=[b[1] + str(i) for i, b in enumerate(BAD_RESETS)])
def test_bad_reset_parameters_get_422_naming_the_field(server_for_resets, body, field, says):
    response = httpx.post(
        f"{server_for_resets.url}/reset", content=body, headers={"content-type": "application/json"}, timeout=30
    )
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["loc"][-1] == field and says in error["msg"]


@pytest.fixture(scope="module")
def server_for_resets():
    with Server(app(ServeLimits())) as running:
        yield running


def test_bad_reset_parameters_over_the_websocket_get_errors_and_the_session_goes_on(server_for_resets):
    async def play():
        async with connect(server_for_resets.ws_url) as ws:
            errors = [await ask(ws, '{"type": "reset", "data": ' + body + "}") for body, _, _ in BAD_RESETS]
            return errors, await ask(ws, {"type": "reset", "data": {"task_id": "b"}})

    errors, good = asyncio.run(play())
    for error, (_, field, _) in zip(errors, BAD_RESETS, strict=True):
        assert error["data"]["code"] == "VALIDATION_ERROR" and error["data"]["errors"][0]["loc"][-1] == field
    assert acted(good) and good["data"]["observation"]["task_id"] == "b"


def test_unparseable_deep_or_huge_messages_get_errors_and_the_session_goes_on():
    limits = ServeLimits(max_request_bytes=8 * 1024 * 1024)
    depth = 200_000
    small_objects = '{"type":"step","data":{"message":{"content":[' + '{"a":1},' * 500_000 + '{"a":1}]}}}'
    messages = [
        ("deep", '{"type":"step","data":{"message":{"content":' + "[" * depth + "]" * depth + "}}}", "deeper than 64"),
        ("4 MiB of small objects", small_objects, "more than 10000 values"),
        ("not JSON", "{not json", "invalid JSON"),
        ("a 5,000-digit number", '{"type":"reset","data":{"seed":' + "9" * 5000 + "}}", "invalid JSON"),
        ("an array", "[1, 2]", "a message is a JSON object"),
        ("a binary frame", b'{"type": "reset", "data": {}}', "binary frames are not accepted"),
        ("OpenEnv's mcp", '{"type": "mcp", "data": {"method": "openenv/session/close"}}', "unknown message type 'mcp'"),
    ]
    with Server(app(limits)) as server:

        async def play():
            async with connect(server.ws_url, max_size=None) as ws:
                assert acted(await ask(ws, RESET))
                replies = [await ask(ws, message) for _, message, _ in messages]
                return replies, await ask(ws, {"type": "step", "data": {"text": "The answer is 1."}})

        replies, step = asyncio.run(play())
    codes = ["INVALID_JSON"] * (len(messages) - 1) + ["UNKNOWN_TYPE"]
    for reply, (_, _, says), code in zip(replies, messages, codes, strict=True):
        assert reply["type"] == "error" and reply["data"]["code"] == code and says in reply["data"]["message"]
    assert acted(step) and step["data"]["done"]


def test_json_bounds_stop_at_the_bound_whatever_the_text():
    assert json_bounds('{"type": "step", "data": {"text": "' + "x" * 1_000_000 + '"}}', 100, 8) is None
    assert json_bounds("[" * 10 + "]" * 10, 100, 8) == "nested deeper than 8 levels"
    assert json_bounds("[" + "1," * 200 + "1]", 100, 8) == "more than 100 values"
    assert json_bounds('["[[[[[[[[[[[[", "{{{{{{{{{{{{{{{{{{{{{"]', 100, 8) is None  # brackets in strings do not count
    assert json_bounds('"\\"' + "[" * 50, 100, 8) is None  # an unterminated string runs to the end
    assert json_bounds('"\\\\"' + "[" * 50, 100, 8) == "nested deeper than 8 levels"


def test_a_token_is_checked_on_http_and_on_the_websocket_upgrade():
    with Server(app(ServeLimits(), token=TOKEN)) as server:
        assert httpx.get(f"{server.url}/health").status_code == 200  # a load balancer's probe
        refused = httpx.get(f"{server.url}/schema")
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert httpx.get(f"{server.url}/schema", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(f"{server.url}/schema", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        assert httpx.post(f"{server.url}/reset", json={}).status_code == 401

        async def play():
            with pytest.raises(InvalidStatus):
                await connect(server.ws_url)
            with pytest.raises(InvalidStatus):
                await connect(server.ws_url, additional_headers={"Authorization": "Bearer wrong"})
            async with connect(server.ws_url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
                return await ask(ws, RESET)

        assert acted(asyncio.run(play()))


def test_a_guessable_token_is_refused_by_the_app_and_a_query_string_is_never_logged(caplog):
    with pytest.raises(WeakTokenError, match="the token from the server token carries about 5 bits"):
        app(ServeLimits(), token="x")
    with Server(app(ServeLimits(), token=TOKEN), log_level="info") as server:
        caplog.set_level(logging.INFO)
        seen: list[str] = []
        handler = logging.Handler()
        handler.emit = lambda record: seen.append(record.getMessage())
        for name in ("uvicorn.access", "uvicorn.error"):
            logging.getLogger(name).addHandler(handler)
        try:
            assert httpx.get(f"{server.url}/schema?token={TOKEN}").status_code == 401  # the header only

            async def play():
                with pytest.raises(InvalidStatus):
                    await connect(f"{server.ws_url}?token={TOKEN}")

            asyncio.run(play())
            wait_until(lambda: len(seen) >= 2, 10)
        finally:
            for name in ("uvicorn.access", "uvicorn.error"):
                logging.getLogger(name).removeHandler(handler)
    assert any("/schema?<query hidden>" in line for line in seen), seen
    assert any("/ws?<query hidden>" in line for line in seen), seen
    assert not any(TOKEN in line for line in seen)


def test_serving_beyond_loopback_without_a_token_is_refused_before_listening():
    sock = bind("0.0.0.0", 0)
    with pytest.raises(TokenRequiredError, match="whoever connects runs code in the sandbox pool"):
        serve(app(ServeLimits()), sock=sock)
    assert sock.fileno() == -1  # closed: nothing listens


def test_openenvs_own_client_plays_an_episode_with_the_token():
    from openenv import GenericEnvClient

    if "headers" not in inspect.signature(GenericEnvClient.__init__).parameters:
        pytest.skip("openenv-core 0.3's client sends no headers; openenv >= 0.10's does (the `serve` extra)")
    with Server(app(ServeLimits(), token=TOKEN)) as server:

        async def play():
            async with GenericEnvClient(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}) as env:
                await env.reset(task_id="a")
                return await env.step({"text": "The answer is 1."})

        end = asyncio.run(play())
    assert end.done and end.observation["reward_components"]["rubric_score"] == 1.0


# ---- clients that never read (issue 41, item 1) --------------------------------------------------------


def test_a_client_that_never_reads_loses_its_slot_within_the_session_timeout():
    """Before: 12 resets sent, nothing read, and the one slot stayed taken for as long as the client stayed."""
    from tests.support.raw_websocket import frame, raw_client

    with Server(app(ServeLimits(max_sessions=1, session_timeout_s=2.0))) as server:
        hog = raw_client(server.port)
        hog.settimeout(1.0)
        for _ in range(12):
            try:
                hog.sendall(frame(0x1, json.dumps(RESET).encode()))
            except OSError:
                break
        start = time.monotonic()

        async def other_plays() -> bool:
            async with connect(server.ws_url) as ws:
                return acted(await ask(ws, RESET))

        while not asyncio.run(other_plays()):
            assert time.monotonic() - start < 2.0 + 8.0, "the slot was never given back"
            time.sleep(0.5)
        hog.close()


def test_http_resets_beyond_max_sessions_at_once_are_refused_not_built():
    """Before: 24 concurrent ``POST /reset`` each built an env (24 x 200) while ``--max-sessions 1``; now at
    most ``max_sessions`` run at once and the rest get 503 (a client retries), never a 500."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    with Server(app(ServeLimits(max_sessions=1))) as server:
        start = threading.Barrier(24)

        def post(_: int) -> int:
            start.wait(timeout=30)
            return httpx.post(f"{server.url}/reset", json={}, timeout=60).status_code

        with ThreadPoolExecutor(24) as pool:
            codes = list(pool.map(post, range(24)))
        assert set(codes) <= {200, 503} and 503 in codes and 200 in codes, codes


def test_a_ping_flood_that_reads_no_pong_stops_being_read():
    """Before: pongs were written whatever the backlog, so a client that never read sent 301 MiB of pings in 21 s
    and the server's memory grew byte for byte. Now the server stops reading it once its pongs back up: the
    flood's sends stall well before 64 MiB (the backlog bound), within seconds."""
    import os

    from tests.support.raw_websocket import frame, raw_client

    with Server(app(ServeLimits(session_timeout_s=60.0))) as server:  # the idle close is not what ends it
        flood = raw_client(server.port)
        flood.settimeout(2.0)
        burst, sent, start = frame(0x9, os.urandom(125)) * 512, 0, time.monotonic()
        try:
            while time.monotonic() - start < 20.0 and sent < 256 * 2**20:
                flood.sendall(burst)
                sent += len(burst)
        except OSError:  # the send stalled (the server reads no more) or the connection was aborted
            pass
        flood.close()
        assert sent < 64 * 2**20, f"{sent / 2**20:.0f} MiB of pings read in {time.monotonic() - start:.0f} s"
