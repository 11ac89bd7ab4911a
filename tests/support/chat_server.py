"""A real HTTP server on 127.0.0.1 speaking the OpenAI chat-completions API, for tests.

Clients talk to it over real sockets exactly as to vLLM or a hosted API. What it answers is
decided by ``respond(request_json) -> dict`` supplied by the test (sent as server-sent events when the
request asks for ``stream``): return an assistant message
(``{"content": ...}`` or ``{"tool_calls": [...]}``), or ``{"status": 500, "body": ...}`` to
simulate a server error (``"headers"``: extra response headers, e.g. ``Retry-After``). ``latency_s``
adds a realistic delay per request; ``peak_in_flight`` is the most requests the server held at once
(how busy a client keeps it).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Responder = Callable[[dict[str, Any]], dict[str, Any]]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default backlog of 5 refuses bursts of concurrent judge calls


class ChatServer:
    """Context manager: ``with ChatServer(respond) as server: server.base_url``."""

    def __init__(self, respond: Responder, *, latency_s: float = 0.0, model: str = "test-model"):
        self.respond = respond
        self.latency_s = latency_s
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.in_flight = self.peak_in_flight = 0
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> "ChatServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _completion(self, request: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        with self._lock:
            self.requests.append(request)
        answer = self.respond(request)
        if "status" in answer:
            body = answer.get("body", {"error": {"message": "simulated failure"}})
            return int(answer["status"]), body, answer.get("headers", {})
        message = {"role": "assistant", "content": answer.get("content")}
        for field in ("reasoning_content", "reasoning"):  # reasoning models' thinking, beside the content
            if field in answer:
                message[field] = answer[field]
        if answer.get("tool_calls"):
            message["tool_calls"] = answer["tool_calls"]
        completion = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", self.model),
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if answer.get("tool_calls") else "stop"}
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        return 200, completion, {}

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                payload = json.dumps(body).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})
                elif self.path == "/health":
                    self._send(200, {})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                length = int(self.headers.get("Content-Length", 0))
                try:
                    request = json.loads(self.rfile.read(length))
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "body is not JSON"}})
                    return
                with server._lock:
                    server.in_flight += 1
                    server.peak_in_flight = max(server.peak_in_flight, server.in_flight)
                try:
                    if server.latency_s:
                        time.sleep(server.latency_s)
                    reply = server._completion(request)
                finally:
                    with server._lock:
                        server.in_flight -= 1
                if request.get("stream") and reply[0] == 200:
                    self._stream(reply[1])
                else:
                    self._send(*reply)

            def _stream(self, completion: dict[str, Any]) -> None:
                """The completion as server-sent events: one delta chunk, the finish chunk, usage, [DONE]."""
                choice = completion["choices"][0]
                delta = {"role": "assistant", "content": choice["message"]["content"]}
                if choice["message"].get("tool_calls"):
                    delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(choice["message"]["tool_calls"])]
                head = {k: completion[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
                chunks = [
                    head | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                    head | {"choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
                    head | {"choices": [], "usage": completion["usage"]},
                ]
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for chunk in chunks:
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        return Handler
