"""``vtb serve``'s app under the real server, for tests: ``uvicorn_server`` (uvicorn with the bounded h11
protocol) on a socket bound by ``serve_socket.bind`` on 127.0.0.1, run in a thread."""

from __future__ import annotations

import threading
import time

from vtb_app.openenv_server import uvicorn_server
from vtb_app.serve_socket import bind


class Server:
    """``app`` (``make_app``'s) served on a free 127.0.0.1 port; stops on exit."""

    def __init__(self, app, log_level: str = "warning"):
        self.sock = bind("127.0.0.1", 0)
        self.port = self.sock.getsockname()[1]
        self.app = app
        self.server = uvicorn_server(app, self.sock, log_level=log_level)
        self.thread = threading.Thread(target=lambda: self.server.run(sockets=[self.sock]), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def __enter__(self) -> "Server":
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()
