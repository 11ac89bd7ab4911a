"""The ASGI guard in front of OpenEnv's app (``vtb serve``): what reaches OpenEnv is a closed set.

- Routes: the HTTP paths in ``HTTP_PATHS`` and the WebSocket session ``/ws``; anything else (OpenEnv's
  ``/mcp``, whose ``openenv/session/create`` takes a session slot without holding a connection, its
  task and web routes) is 404 / a refused handshake.
- Token: with a token, every request but ``GET /health`` and every WebSocket handshake must carry
  ``Authorization: Bearer <token>`` (compared in constant time); else 401 / a refused handshake.
- HTTP bodies: read in full before the app sees them, at most ``max_request_bytes`` (413) within
  ``body_timeout_s`` (408); a JSON body must pass ``json_bounds`` (400).
- WebSocket messages: each must pass ``json_bounds``, parse as a JSON object and be of a type in
  ``MESSAGE_TYPES`` (not OpenEnv's ``mcp``, whose ``openenv/session/close`` closes another client's
  session by its id), else the client gets OpenEnv's error reply (``INVALID_JSON`` / ``UNKNOWN_TYPE``)
  in its turn and the session goes on. The bound is on work,
  not bytes: 4 MiB of tiny objects would take OpenEnv's ``json.loads`` on the event loop about a second
  and 120 MiB; ``max_json_items`` values take a few milliseconds.
- Idle sessions: a session that waits for its client's next message longer than ``session_timeout_s``
  is closed (close code ``IDLE_CLOSE_CODE``); OpenEnv then destroys the session and frees its slot.
  The socket goes with the slot, so at no time do more than ``max_sessions`` sessions act (OpenEnv's
  own reaper freed the slot and left the socket answering).
- Disconnects: the client's messages are read as they come (``read_ahead`` at most), so a disconnect
  is seen while a step runs; the session's env, registered on ``CONNECTION``, then stops its calls.
"""

from __future__ import annotations

import asyncio
import contextvars
import hmac
import json
import re
import time
from typing import Any, Awaitable, Callable

from vtb_app.serve_limits import ServeLimits
from vtb_app.serve_token import check_token

HTTP_PATHS = frozenset({"/health", "/metadata", "/schema", "/reset", "/step", "/state", "/docs", "/openapi.json"})
WEBSOCKET_PATHS = frozenset({"/ws"})
MESSAGE_TYPES = frozenset({"reset", "step", "state", "close"})
ENV_PATHS = frozenset({"/reset", "/step"})  # HTTP routes that build or step an env
OPEN_PATHS = frozenset({"/health"})  # answered without the token (a load balancer's probe)
IDLE_CLOSE_CODE = 4000
POLICY_CLOSE_CODE = 1008  # before the handshake is accepted: the client sees HTTP 403

Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]

# A JSON string (an unterminated one runs to the end: linear time whatever the input) or a structural character.
_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{},]', re.DOTALL)


def json_bounds(text: str, max_items: int, max_depth: int) -> str | None:
    """Why ``text`` is too big to parse (more than ``max_items`` values or ``max_depth`` levels), or None.

    Work is bounded by the bounds, not by the text: the scan stops at the first one exceeded, and
    strings are skipped by one regular-expression match each.
    """
    items = depth = 0
    for match in _JSON_TOKENS.finditer(text):
        char = match[0][0]
        if char in "[{":
            depth += 1
            items += 1
            if depth > max_depth:
                return f"nested deeper than {max_depth} levels"
        elif char in "]}":
            depth -= 1
        elif char == ",":
            items += 1
        if items > max_items:
            return f"more than {max_items} values"
    return None


def parse_bounded(text: str, limits: ServeLimits) -> tuple[Any, str | None]:
    """(the JSON value, None), or (None, why not): too big, not JSON, or a number Python refuses."""
    reason = json_bounds(text, limits.max_json_items, limits.max_json_depth)
    if reason is not None:
        return None, f"message refused: {reason}"
    try:
        return json.loads(text), None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, or an integer over Python's 4,300 digits
        return None, f"invalid JSON: {exc}"


class Connection:
    """One WebSocket client, seen by the guard: ``on_gone`` callbacks run when it disconnects."""

    def __init__(self) -> None:
        self.gone = False
        self._callbacks: list[Callable[[], None]] = []

    def on_gone(self, callback: Callable[[], None]) -> None:
        if self.gone:
            callback()
        else:
            self._callbacks.append(callback)

    def disconnected(self) -> None:
        self.gone = True
        for callback in self._callbacks:
            callback()


CONNECTION: contextvars.ContextVar[Connection | None] = contextvars.ContextVar("vtb_connection", default=None)


class Guard:
    """ASGI middleware: see the module docstring."""

    def __init__(self, app: Any, limits: ServeLimits, token: str | None = None, read_ahead: int = 2):
        self.app, self.limits, self.read_ahead = app, limits, read_ahead
        # a guessable token guards nothing: refused here, so no way of building the server takes one
        self._token = f"Bearer {check_token(token, 'the server token')}".encode() if token else None
        self._http_envs = 0  # HTTP /reset and /step in flight: each builds or steps an env outside OpenEnv's slots

    async def __call__(self, scope: dict, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            return await self._http(scope, receive, send)
        if scope["type"] == "websocket":
            if scope["path"] not in WEBSOCKET_PATHS or not self._authorized(scope):
                await receive()  # websocket.connect
                return await send({"type": "websocket.close", "code": POLICY_CLOSE_CODE})
            return await _Session(self, scope, receive, send).run()
        return await self.app(scope, receive, send)  # lifespan

    def _authorized(self, scope: dict) -> bool:
        if self._token is None:
            return True
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        return hmac.compare_digest(given, self._token)

    async def _http(self, scope: dict, receive: Receive, send: Send) -> None:
        if scope["path"] not in HTTP_PATHS:
            return await _reply(send, 404, f"no route {scope['path']}: this server offers {sorted(HTTP_PATHS)} and /ws")
        if scope["path"] not in OPEN_PATHS and not self._authorized(scope):
            return await _reply(send, 401, "a token is required: Authorization: Bearer <token>", bearer=True)
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limits.max_request_bytes:
            return await _reply(send, 413, f"request body larger than {self.limits.max_request_bytes} bytes")
        try:
            body = await asyncio.wait_for(self._body(receive), self.limits.body_timeout_s)
        except _Gone:
            return
        except asyncio.TimeoutError:
            return await _reply(send, 408, f"the request body did not arrive within {self.limits.body_timeout_s:g} s")
        except _TooLarge:
            return await _reply(send, 413, f"request body larger than {self.limits.max_request_bytes} bytes")
        if body:
            _, problem = parse_bounded(body.decode("utf-8", "replace"), self.limits)
            if problem is not None:
                return await _reply(send, 400, problem)
        if scope["path"] in ENV_PATHS:  # bounded on their own, as many as --max-sessions at once
            if self._http_envs >= self.limits.max_sessions:
                return await _reply(send, 503, f"at most {self.limits.max_sessions} HTTP /reset or /step at once")
            self._http_envs += 1
            try:
                return await self._forward(scope, receive, send, body)
            finally:
                self._http_envs -= 1
        return await self._forward(scope, receive, send, body)

    async def _forward(self, scope: dict, receive: Receive, send: Send, body: bytes) -> None:
        """Hand the request to the app with the body read already."""
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _body(self, receive: Receive) -> bytes:
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Gone()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limits.max_request_bytes:
                raise _TooLarge()
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


class _TooLarge(Exception):
    pass


class _Gone(Exception):
    """The client left before its body was in: nobody to answer."""


async def _reply(send: Send, status: int, detail: str, bearer: bool = False) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if bearer:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _Refused:
    """A client message the guard answers itself, in its turn (the app never sees it)."""

    def __init__(self, reason: str, code: str = "INVALID_JSON"):
        self.reason, self.code = reason, code


class _Session:
    """One WebSocket connection through the guard: the reader, the idle watch and the app's receive/send."""

    def __init__(self, guard: Guard, scope: dict, receive: Receive, send: Send):
        self.guard, self.scope, self._receive, self._send = guard, scope, receive, send
        self.limits = guard.limits
        self.connection = Connection()
        self.inbox: asyncio.Queue[Any] = asyncio.Queue(guard.read_ahead)
        self.waiting = False  # the app waits for the client's next message (the session is idle)
        self.last_activity = time.monotonic()
        self.closed_by_guard = False

    async def run(self) -> None:
        reader = asyncio.create_task(self._read())
        watch = asyncio.create_task(self._watch_idle())
        token = CONNECTION.set(self.connection)
        try:
            await self.guard.app(self.scope, self._app_receive, self._app_send)
        finally:
            CONNECTION.reset(token)
            reader.cancel()
            watch.cancel()

    async def _read(self) -> None:
        """Read the client's messages as they come; check each one here, off the app's turn."""
        while True:
            message = await self._receive()
            self.last_activity = time.monotonic()
            if message["type"] == "websocket.disconnect":
                self.connection.disconnected()
                return await self.inbox.put(message)
            await self.inbox.put(self._checked(message) if message["type"] == "websocket.receive" else message)

    def _checked(self, message: dict) -> dict | _Refused:
        text = message.get("text")
        if text is None:
            return _Refused("binary frames are not accepted: send each message as JSON text")
        value, problem = parse_bounded(text, self.limits)
        if problem is None and not isinstance(value, dict):
            problem = "invalid JSON: a message is a JSON object"
        if problem is not None:
            return _Refused(problem)
        if value.get("type") not in MESSAGE_TYPES:
            kind = str(value.get("type"))[:100]
            return _Refused(f"unknown message type {kind!r}: this server takes {sorted(MESSAGE_TYPES)}", "UNKNOWN_TYPE")
        return message

    async def _app_receive(self) -> dict:
        """The app's next message; refused ones are answered here, in order, and skipped."""
        while True:
            self.waiting = True
            try:
                item = await self.inbox.get()
            finally:
                self.waiting = False
            if not isinstance(item, _Refused):
                return item
            error = {"type": "error", "data": {"message": item.reason, "code": item.code}}
            await self._app_send({"type": "websocket.send", "text": json.dumps(error)})

    async def _app_send(self, message: dict) -> None:
        self.last_activity = time.monotonic()
        if self.closed_by_guard:
            return  # the socket is closed already; the app's own close after the idle close goes nowhere
        await self._send(message)

    async def _watch_idle(self) -> None:
        timeout = self.limits.session_timeout_s
        while True:
            idle = time.monotonic() - self.last_activity
            if self.waiting and self.inbox.empty() and idle >= timeout:
                return await self._close_idle(timeout)
            await asyncio.sleep(max(timeout - idle, 0.05) if self.waiting else min(timeout, 1.0))

    async def _close_idle(self, timeout: float) -> None:
        """End the app's session as a disconnect would (OpenEnv frees the slot), then close the socket."""
        self.closed_by_guard = True
        self.connection.disconnected()
        self.inbox.put_nowait({"type": "websocket.disconnect", "code": IDLE_CLOSE_CODE})
        reason = f"session idle for {timeout:g} s: closed"
        await self._send({"type": "websocket.close", "code": IDLE_CLOSE_CODE, "reason": reason})
