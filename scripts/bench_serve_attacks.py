#!/usr/bin/env python
"""Attack a real ``vtb serve`` (a subprocess on 127.0.0.1) as a hostile client and print what it held.

Figures (issue 32, item 2): live sessions under ``--max-sessions 2`` after idle reaping and after two
``openenv/session/create`` calls over ``POST /mcp``; slowloris (connections with unfinished headers
still open after 20 s, ``/health`` latency meanwhile, with the server limited to 256 open files);
one and eight 4 MiB messages of small JSON objects (the longest ``/health`` stall of another client,
the server's RSS growth); a 200,000-level nested action (does the session go on); ``/reset`` with bad
parameters (status codes). Runs against whatever ``vtb`` the interpreter imports, so the same script
measures before and after a change.

    .venv/bin/python scripts/bench_serve_attacks.py [--only sessions,slowloris,large,deep,reset]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import socket
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from typing import Any, Iterator

import httpx
from websockets.asyncio.client import connect

FILE_LIMIT = 256  # the server's RLIMIT_NOFILE in the slowloris run


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def vtb_serve(*extra: str, files: int | None = None) -> Iterator[tuple[str, int]]:
    """``vtb serve --tasks demo`` on a free port; yields (base URL, server pid); stops it after."""
    port = free_port()

    def limit_files() -> None:
        if files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))

    argv = [sys.executable, "-m", "vtb_app.cli", "serve", "--tasks", "demo", "--port", str(port), *extra]
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=limit_files)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, f"vtb serve exited {server.returncode}"
            assert time.monotonic() < deadline, "vtb serve did not start"
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        yield url, server.pid
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def ws_url(url: str) -> str:
    return url.replace("http://", "ws://") + "/ws"


async def ask(ws: Any, message: dict | str, timeout: float = 60) -> dict | str:
    """Send one message; the reply as a dict, or 'closed' / 'timeout'."""
    try:
        await ws.send(message if isinstance(message, str) else json.dumps(message))
        return json.loads(await asyncio.wait_for(ws.recv(), timeout))
    except asyncio.TimeoutError:
        return "timeout"
    except Exception:  # noqa: BLE001 -- the server closed the socket: that is the answer
        return "closed"


def acted(reply: dict | str) -> bool:
    return isinstance(reply, dict) and reply.get("type") == "observation"


async def sessions(url: str) -> dict[str, Any]:
    """Two sessions reset, idle past the timeout, two more join; how many of the four still act."""
    first = [await connect(ws_url(url), max_size=None) for _ in range(2)]
    for ws in first:
        await ask(ws, {"type": "reset", "data": {}})
    await asyncio.sleep(12)  # past --session-timeout 2 and OpenEnv's 5 s reaper interval
    later = [await connect(ws_url(url), max_size=None) for _ in range(2)]
    joined = [acted(await ask(ws, {"type": "reset", "data": {}})) for ws in later]
    live = [acted(await ask(ws, {"type": "reset", "data": {}})) for ws in first + later]
    for ws in first + later:
        await ws.close()
    await asyncio.sleep(1)
    created = [
        httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": i, "method": "openenv/session/create", "params": {}})
        for i in range(2)
    ]
    ws = await connect(ws_url(url), max_size=None)
    after_mcp = await ask(ws, {"type": "reset", "data": {}})
    await ws.close()
    return {
        "new sessions joined after idling": sum(joined),
        "sessions acting at once (max 2)": sum(live),
        "POST /mcp session/create": [r.status_code for r in created],
        "session/create took a slot": [("session_id" in r.text) for r in created],
        "a WebSocket client after two session/create": "acts" if acted(after_mcp) else str(after_mcp)[:120],
    }


def health_latencies(url: str, seconds: float, interval: float = 0.5) -> list[float | None]:
    """/health every ``interval`` s on a fresh connection: seconds each, None when it failed."""
    out: list[float | None] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        start = time.monotonic()
        try:
            ok = httpx.get(f"{url}/health", timeout=5).status_code == 200
            out.append(time.monotonic() - start if ok else None)
        except httpx.HTTPError:
            out.append(None)
        time.sleep(interval)
    return out


def still_open(sock: socket.socket) -> bool:
    try:
        sock.setblocking(False)
        data = sock.recv(1, socket.MSG_PEEK)
        return data != b""  # b"": the server closed it (a 408/400 reply would also be data: not held)
    except BlockingIOError:
        return True
    except OSError:
        return False


def slowloris(url: str, count: int, seconds: float = 20) -> dict[str, Any]:
    """``count`` connections send a request line and drip a header every 2 s, never ending the headers."""
    port = int(url.rsplit(":", 1)[1])
    socks: list[socket.socket] = []
    for _ in range(count):
        sock = socket.socket()
        sock.settimeout(2)
        try:
            sock.connect(("127.0.0.1", port))
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            socks.append(sock)
        except OSError:
            sock.close()
    opened = len(socks)
    start, latencies = time.monotonic(), []
    while time.monotonic() - start < seconds:
        for sock in socks:
            try:
                sock.sendall(b"X-a: b\r\n")
            except OSError:
                pass
        latencies += health_latencies(url, 2.0)
    held = sum(still_open(sock) for sock in socks)
    for sock in socks:
        sock.close()
    answered = [s for s in latencies if s is not None]
    return {
        "connections": count,
        "opened": opened,
        f"held after {seconds:.0f} s": held,
        "/health answered": f"{len(answered)}/{len(latencies)}",
        "/health median ms": round(1000 * statistics.median(answered), 1) if answered else None,
        "/health max ms": round(1000 * max(answered), 1) if answered else None,
    }


def small_objects_message(size: int) -> str:
    """A step message of about ``size`` bytes made of tiny JSON objects (the cheapest bytes to send, the dearest
    to parse)."""
    item = '{"a":1},'
    count = (size - 64) // len(item)
    return '{"type":"step","data":{"message":{"content":[' + item * (count - 1) + '{"a":1}]}}}'


async def large(url: str, pid: int, clients: int) -> dict[str, Any]:
    """``clients`` sessions each send one ~4 MiB message at once; another client pings /health every 5 ms."""
    message = small_objects_message(4 * 1024 * 1024 - 4096)
    sockets = [await connect(ws_url(url), max_size=None) for _ in range(clients)]
    for ws in sockets:
        await ask(ws, {"type": "reset", "data": {}})
    await asyncio.sleep(0.5)
    rss_before = rss_mib(pid)
    stop, gaps = asyncio.Event(), []

    async def ping() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            while not stop.is_set():
                start = time.monotonic()
                await http.get("/health")
                gaps.append((start, time.monotonic() - start))
                await asyncio.sleep(0.005)

    pinger = asyncio.create_task(ping())
    await asyncio.sleep(1.0)  # the quiet baseline
    sent = time.monotonic()
    replies = await asyncio.gather(*(ask(ws, message) for ws in sockets))
    rss_peak = rss_mib(pid)
    stop.set()
    await pinger
    go_on = [acted(await ask(ws, {"type": "reset", "data": {}})) for ws in sockets]
    for ws in sockets:
        await ws.close()
    kinds = sorted({r["data"].get("code", r["type"]) if isinstance(r, dict) else r for r in replies})
    return {
        "clients": clients,
        "message MiB": round(len(message) / 2**20, 2),
        "replies": kinds,
        "sessions go on": f"{sum(go_on)}/{clients}",
        "longest /health ms, quiet": round(1000 * max(d for start, d in gaps if start + d < sent), 1),
        "longest /health ms, during": round(1000 * max(d for start, d in gaps if start + d >= sent), 1),
        "server RSS MiB before -> after": f"{rss_before:.0f} -> {rss_peak:.0f}",
    }


async def deep(url: str) -> dict[str, Any]:
    """A 200,000-level nested action, then a reset on the same socket."""
    depth = 200_000
    message = '{"type":"step","data":{"message":{"content":' + "[" * depth + "]" * depth + "}}}"
    async with connect(ws_url(url), max_size=None) as ws:
        await ask(ws, {"type": "reset", "data": {}})
        reply = await ask(ws, message)
        after = await ask(ws, {"type": "reset", "data": {}})
    return {
        "reply": reply["data"].get("code") if isinstance(reply, dict) else reply,
        "message": (reply["data"].get("message", "") if isinstance(reply, dict) else "")[:100],
        "session goes on": acted(after),
    }


def bad_resets(url: str) -> dict[str, Any]:
    bodies = {
        "task_id unknown": '{"task_id": "no-such-task"}',
        "index 'abc'": '{"index": "abc"}',
        "index 10**30": '{"index": 1000000000000000000000000000000}',
        "index -1": '{"index": -1}',
        "seed 1e400": '{"seed": 1e400}',
        "seed 2**70": '{"seed": 1180591620717411303424}',
    }
    out = {}
    for name, body in bodies.items():
        response = httpx.post(f"{url}/reset", content=body, headers={"content-type": "application/json"}, timeout=60)
        out[name] = f"{response.status_code} {response.text[:110]}"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="sessions,slowloris,large,deep,reset")
    parser.add_argument("--json", default=None, help="write the figures here too")
    chosen = set(parser.parse_args().only.split(","))
    figures: dict[str, Any] = {}
    if "sessions" in chosen:
        with vtb_serve("--max-sessions", "2", "--session-timeout", "2") as (url, _):
            figures["sessions"] = asyncio.run(sessions(url))
            print(json.dumps({"sessions": figures["sessions"]}), flush=True)
    with vtb_serve(files=FILE_LIMIT) as (url, pid):
        if "reset" in chosen:
            figures["reset"] = bad_resets(url)
            print(json.dumps({"reset": figures["reset"]}), flush=True)
        if "deep" in chosen:
            figures["deep"] = asyncio.run(deep(url))
            print(json.dumps({"deep": figures["deep"]}), flush=True)
        if "large" in chosen:
            for clients in (1, 8):
                figures[f"large x{clients}"] = asyncio.run(large(url, pid, clients))
                print(json.dumps({f"large x{clients}": figures[f"large x{clients}"]}), flush=True)
        if "slowloris" in chosen:
            for count in (50, 300):
                figures[f"slowloris {count}"] = slowloris(url, count)
                print(json.dumps({f"slowloris {count}": figures[f"slowloris {count}"]}), flush=True)
            figures["health after"] = health_latencies(url, 1.0)
            print(json.dumps({"health after": figures["health after"]}), flush=True)
    if parser.parse_args().json:
        with open(parser.parse_args().json, "w") as out:
            json.dump(figures, out, indent=1)


if __name__ == "__main__":
    main()
