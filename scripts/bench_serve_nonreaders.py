#!/usr/bin/env python
"""Clients of a real ``vtb serve`` (a subprocess on 127.0.0.1) that never read (issue 41, item 1).

Figures: how long a client that sends resets on ``/ws`` and reads nothing keeps the one slot of
``--max-sessions 1 --session-timeout 5`` (seconds until another client gets an observation, capped);
the server's RSS while one session floods pings and reads no pong; how many ``POST /reset`` run at
once while the one WebSocket slot is held. Raw sockets (a hand-made handshake and masked frames), so
nothing on the client side reads. Same script before and after a change (whatever ``vtb`` it imports).

    python scripts/bench_serve_nonreaders.py [--only slot,pings,http]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from bench_serve_attacks import acted, ask, rss_mib, vtb_serve, ws_url
from websockets.asyncio.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.support (the project itself is installed)
from tests.support import raw_websocket  # noqa: E402
from tests.support.raw_websocket import frame  # noqa: E402


def raw_client(url: str) -> socket.socket:
    """A WebSocket client on a raw socket with a small receive buffer: handshake done, nothing read after."""
    return raw_websocket.raw_client(int(url.rsplit(":", 1)[1]))


def send_quietly(sock: socket.socket, data: bytes, timeout_s: float = 1.0) -> bool:
    """Send ``data``; False once the server stopped reading or closed the connection."""
    sock.settimeout(timeout_s)
    try:
        sock.sendall(data)
        return True
    except OSError:
        return False


async def someone_else_plays(url: str) -> bool:
    try:
        async with connect(ws_url(url), open_timeout=5) as ws:
            return acted(await ask(ws, {"type": "reset", "data": {}}))
    except Exception:  # noqa: BLE001 -- refused, closed, timed out: not playing
        return False


def slot_held(url: str, cap_s: float = 70.0) -> dict[str, Any]:
    """Seconds from a non-reading client's 12 resets until another client gets a session."""
    hog = raw_client(url)
    reset = frame(0x1, json.dumps({"type": "reset", "data": {}}).encode())
    sent = sum(send_quietly(hog, reset) for _ in range(12))
    start = time.monotonic()
    while time.monotonic() - start < cap_s:
        if asyncio.run(someone_else_plays(url)):
            held = time.monotonic() - start
            break
        time.sleep(1.0)
    else:
        held = None
    hog.close()
    return {"resets sent": sent, "slot held s": None if held is None else round(held, 1), "cap s": cap_s}


def ping_flood(url: str, pid: int, seconds: float = 20.0) -> dict[str, Any]:
    """One session sends 125-byte pings as fast as it can and reads no pong; the server's RSS meanwhile."""
    before = rss_mib(pid)
    flood = raw_client(url)
    burst = frame(0x9, os.urandom(125)) * 512
    sent = peak = 0.0
    start = time.monotonic()
    closed_after = None
    while time.monotonic() - start < seconds:
        if not send_quietly(flood, burst, 2.0):
            closed_after = round(time.monotonic() - start, 1)
            break
        sent += len(burst)
        peak = max(peak, rss_mib(pid))
    time.sleep(1.0)
    peak = max(peak, rss_mib(pid))
    flood.close()
    return {
        "MiB sent": round(sent / 2**20),
        "RSS before MiB": round(before),
        "RSS peak MiB": round(peak),
        "connection closed after s": closed_after,
    }


def http_resets(url: str, clients: int = 24) -> dict[str, Any]:
    """``POST /reset`` from ``clients`` threads at once while a WebSocket client holds the one slot."""

    def one(_: int) -> int:
        return httpx.post(f"{url}/reset", json={}, timeout=120).status_code

    async def hold_and_post() -> list[int]:
        async with connect(ws_url(url)) as ws:
            await ask(ws, {"type": "reset", "data": {}})
            with ThreadPoolExecutor(clients) as pool:
                return await asyncio.get_running_loop().run_in_executor(
                    None, lambda: list(pool.map(one, range(clients)))
                )

    codes = asyncio.run(hold_and_post())
    return {str(code): codes.count(code) for code in sorted(set(codes))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="slot,pings,http")
    chosen = set(parser.parse_args().only.split(","))
    with vtb_serve("--max-sessions", "1", "--session-timeout", "5") as (url, pid):
        if "slot" in chosen:
            print(json.dumps({"non-reader slot": slot_held(url)}), flush=True)
        if "http" in chosen:
            print(json.dumps({"http /reset x24, slot held": http_resets(url)}), flush=True)
    if "pings" in chosen:  # a session timeout longer than the flood: the idle close is not what ends it
        with vtb_serve("--session-timeout", "60") as (url, pid):
            print(json.dumps({"ping flood": ping_flood(url, pid)}), flush=True)


if __name__ == "__main__":
    main()
