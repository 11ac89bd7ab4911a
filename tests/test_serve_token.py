"""``vtb serve``'s token (issue 41, item 2): strong, not shown, never logged; through the real CLI and uvicorn.

Issue 41: ``--token T`` sat in ``/proc/<pid>/cmdline`` for every local user and ``--help`` offered it first; any
length was taken (one character guessed in 23 requests, 0.01 s); a token in ``?token=`` reached the access log.
Everything here runs without the ``serve`` extra: the token is resolved before the server's packages are
looked for, and the log filter is uvicorn's own logging (``tests/test_serve_attacks.py`` runs the served app).
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
import subprocess
import sys
import threading
import time

import httpx
import pytest

from tests.support.menu_tasks import ROOT
from vtb_app.serve_socket import QUERY_HIDDEN, bind, hide_query_strings
from vtb_app.serve_token import (
    MIN_TOKEN_BITS,
    TOKEN_VARIABLE,
    TokenError,
    WeakTokenError,
    check_token,
    resolve_token,
)


def test_random_tokens_pass_and_guessable_ones_are_refused():
    for _ in range(300):  # 16 random bytes as hex, and what --token-file generates, pass every time
        for token in (secrets.token_hex(16), secrets.token_urlsafe(32)):
            assert check_token(token, "test") == token
    for weak in ("x", "s3cret", "a" * 200, "ab" * 100, secrets.token_hex(12), "Password1234567!"):
        with pytest.raises(WeakTokenError, match=f"fewer than {MIN_TOKEN_BITS}"):
            check_token(weak, "test")
    with pytest.raises(TokenError, match="printable ASCII"):
        check_token(secrets.token_hex(16) + " " + secrets.token_hex(16), "test")


def vtb_serve(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != TOKEN_VARIABLE} | (env or {})
    return subprocess.run(
        [sys.executable, "-m", "vtb_app.cli", "serve", "--port", "0", "--tasks", "synth:0:1", *args],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--token", "x"], {}, "the token from --token carries about 5 bits, fewer than 128"),
        ([], {TOKEN_VARIABLE: "hunter2hunter2"}, f"the token from ${TOKEN_VARIABLE} carries about"),
        (["--token", secrets.token_urlsafe(32)], {TOKEN_VARIABLE: secrets.token_urlsafe(32)}, "give the token one way"),
    ],
)
def test_vtb_serve_refuses_a_weak_or_doubly_given_token_before_anything_else(args, env, says):
    done = vtb_serve(*args, env=env)
    assert done.returncode == 2 and done.stderr.startswith(f"error: vtb serve: {says}"), done.stderr


def test_a_token_file_others_can_read_is_refused(tmp_path):
    path = tmp_path / "token"
    path.write_text(secrets.token_urlsafe(32) + "\n")
    path.chmod(0o644)
    done = vtb_serve("--token-file", str(path))
    assert done.returncode == 2 and "can be read by other users (mode 644): chmod 600" in done.stderr, done.stderr
    path.chmod(0o600)
    assert resolve_token(str(path), None, {})[0] == path.read_text().strip()


def test_a_missing_token_file_gets_a_strong_token_whose_place_is_printed_not_the_token(tmp_path):
    path = tmp_path / "secrets" / "serve-token"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vtb_app.cli",
            "serve",
            "--port",
            "0",
            "--tasks",
            "synth:1:0",
            "--token-file",
            str(path),
        ],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != TOKEN_VARIABLE},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = process.stderr.readline()  # said at once, before the server's packages are looked for
    finally:
        process.kill()
        rest = process.communicate(timeout=30)[1]
    token = path.read_text().strip()
    assert first.startswith(f"vtb serve: a new token was generated into {path} (mode 600): clients send its")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and check_token(token, "file") == token
    assert token not in first + rest


def test_uvicorn_logs_no_query_string(tmp_path):
    """The real uvicorn, its own logging configuration, a plain ASGI app: the request line loses its query."""
    import uvicorn

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    sock = bind("127.0.0.1", 0)
    config = uvicorn.Config(app, log_level="info", access_log=True)
    hide_query_strings()
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    logging.getLogger("uvicorn.access").addHandler(handler)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: server.run(sockets=[sock]), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        secret = secrets.token_urlsafe(32)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/health?token={secret}&x=1"
        assert httpx.get(url, timeout=10).status_code == 200
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
        logging.getLogger("uvicorn.access").removeHandler(handler)
    assert len(seen) == 1 and f"GET /health{QUERY_HIDDEN} HTTP/1.1" in seen[0] and secret not in seen[0], seen
