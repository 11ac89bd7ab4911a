"""Where ``vtb serve`` listens: the bound socket, and uvicorn's HTTP protocol with a deadline on request
headers and a cap on open connections.

uvicorn times out idle keep-alive connections but not unfinished headers: a client that sends a
request line and then one header every few seconds held its connection for ever (slowloris: 50 of 50
still open after 20 s; 300 of them exhausted a 256-file server and ``/health`` failed).
``http_protocol`` is uvicorn's own h11 protocol plus (a) a deadline of ``header_timeout_s`` from a
connection's start, or from the end of its previous response, to the end of its next request's
headers; (b) at most ``max_connections`` open connections (HTTP and WebSocket), fewer when the
open-file limit leaves less room: over the cap a new connection evicts the oldest one still sending
headers, and is refused with 503 only when there is none, so a slowloris cannot lock out clients
that send their headers at once. Request bodies have their own deadline in the ASGI guard
(``vtb_app.serve_guard``). What uvicorn logs carries no query string (``hide_query_strings``).
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import os
import resource
import socket
from typing import Any

from vtb_app.serve_limits import ServeLimits

FD_RESERVE = 64  # open files kept for the sandbox pool, logs and the sessions' own work
REFUSED = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\nconnection: close\r\n"
    b"content-length: 26\r\n\r\ntoo many open connections\n"
)


class BindError(OSError):
    """The server cannot listen where asked: an unknown host, an address of no interface here, a busy port."""


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (0: any free port), not listening yet (the server listens on it
    once it starts, after ``require_token_off_loopback``); ``BindError`` saying why not."""
    if not 0 <= port <= 65535:
        raise BindError(f"port {port} is not in 0..65535")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise BindError(f"cannot resolve host {host!r}: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: restart over TIME_WAIT
        sock.bind(address)  # a port with a listener already fails here, SO_REUSEADDR or not
    except OSError as exc:
        sock.close()
        raise BindError(f"cannot listen on {host}:{port}: {_why(exc)}") from None
    return sock


def _why(exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return "the port is in use (another server listens there)"
    if exc.errno == errno.EADDRNOTAVAIL:
        return "no network interface of this machine has that address"
    if exc.errno == errno.EACCES:
        return "permission denied (ports below 1024 need privileges)"
    return exc.strerror or str(exc)


class TokenRequiredError(ValueError):
    """A server bound beyond loopback without a token: anyone who reaches it runs code in the sandbox pool."""


def require_token_off_loopback(sock: socket.socket, has_token: bool) -> None:
    """``TokenRequiredError`` unless ``sock`` listens on loopback only (127.0.0.0/8, ::1) or there is a token."""
    address = sock.getsockname()[0]
    if not has_token and not ipaddress.ip_address(address).is_loopback:
        raise TokenRequiredError(
            f"{address} is reachable from other machines, and whoever connects runs code in the sandbox pool: "
            "give a token (--token-file PATH, generated there when PATH does not exist, or $VTB_SERVE_TOKEN), "
            "or bind 127.0.0.1"
        )


QUERY_HIDDEN = "?<query hidden>"
LOGGERS = ("uvicorn.access", "uvicorn.error")  # the request lines, and uvicorn's WebSocket lines


class HiddenQueries(logging.Filter):
    """Cuts the query string from every path uvicorn logs: a client may put a secret there (``?token=``; the
    guard reads the token from the Authorization header only), and a log is read by more people than the
    server's clients."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_without_query(arg) for arg in record.args)
        return True


def _without_query(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("/") and "?" in value:
        return value.split("?", 1)[0] + QUERY_HIDDEN
    return value


def hide_query_strings() -> None:
    """Install ``HiddenQueries`` on uvicorn's loggers (once; after ``uvicorn.Config``, which configures them)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(known, HiddenQueries) for known in logger.filters):
            logger.addFilter(HiddenQueries())


def connection_cap(limits: ServeLimits) -> int:
    """``max_connections``, or fewer where the open-file limit leaves less room (each connection is a file)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        open_now = len(os.listdir("/proc/self/fd"))
    except OSError:
        open_now = FD_RESERVE
    room = limits.max_connections if soft == resource.RLIM_INFINITY else soft - open_now - FD_RESERVE
    return max(4, min(limits.max_connections, room))


def http_protocol(limits: ServeLimits, cap: int) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol class with the header deadline and the connection cap (module docstring)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    sending_headers: dict[Any, None] = {}  # connections whose request headers are not all in, oldest first

    class BoundedH11(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > cap:
                if not sending_headers:
                    transport.write(REFUSED)
                    transport.close()
                    return
                next(iter(sending_headers))._expire()
            self._await_headers()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:  # a request's headers are in (or the connection ended)
                self._headers_in()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self._await_headers()  # the next request on this keep-alive connection

        def connection_lost(self, exc: Exception | None) -> None:
            self._headers_in()
            super().connection_lost(exc)

        def _await_headers(self) -> None:
            self._headers_in()
            sending_headers[self] = None
            self._deadline = self.loop.call_later(limits.header_timeout_s, self._expire)

        def _headers_in(self) -> None:
            sending_headers.pop(self, None)
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            self._headers_in()
            if not self.transport.is_closing():
                self.transport.close()

    return BoundedH11


BACKLOG_CHECK_S = 0.25  # how often a WebSocket connection's unsent bytes are looked at


def ws_protocol(limits: ServeLimits) -> type[asyncio.Protocol]:
    """uvicorn's WebSocket protocol (the ``websockets`` one) whose unsent bytes are bounded in size and time.

    Whatever is written to a client (data messages, and the pongs the library answers every ping with) waits in
    the transport until the client reads it. A client that never reads kept its slot for ever (the app's send
    waits on a buffer that never drains; a graceful close waits on it too) and a ping flood grew the server by
    every pong. So, per connection: more than ``max_backlog_bytes`` unsent, or unsent bytes that have not all
    gone out within ``session_timeout_s``, aborts the connection (no closing handshake: it would wait on the
    same buffer). The app's session then ends as on a disconnect and OpenEnv frees its slot.
    """
    from uvicorn.protocols.websockets.websockets_impl import WebSocketProtocol

    class BoundedWebSocket(WebSocketProtocol):
        _backlog_watch: asyncio.TimerHandle | None = None
        _unsent_since: float | None = None

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._backlog_watch = self.loop.call_later(BACKLOG_CHECK_S, self._check_backlog)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._backlog_watch is not None:
                self._backlog_watch.cancel()
            super().connection_lost(exc)

        def _check_backlog(self) -> None:
            if self.transport.is_closing() and self.transport.get_write_buffer_size() == 0:
                return
            unsent, now = self.transport.get_write_buffer_size(), self.loop.time()
            self._unsent_since = None if unsent == 0 else (self._unsent_since or now)
            stuck = self._unsent_since is not None and now - self._unsent_since > limits.session_timeout_s
            if unsent > limits.max_backlog_bytes or stuck:
                self.transport.abort()  # connection_lost follows: the session ends, its slot is freed
                return
            self._backlog_watch = self.loop.call_later(BACKLOG_CHECK_S, self._check_backlog)

    return BoundedWebSocket
