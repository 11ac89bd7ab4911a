"""The environment over OpenEnv's protocol, on openenv-core's own server (``create_app``).

    vtb serve --tasks synth:256:0 --port 8000          # or: app = make_app("synth:256:0")

One ``VisualToolBenchEnv`` per WebSocket session (``/ws``), every session sharing one tool
registry (one sandbox pool). Actions are ``{"text": raw model text}`` or ``{"message": OpenAI
assistant message}``; an observation carries the dialogue in OpenAI format (``messages``, images
as data URLs), the tools offered, ``reward`` and ``done``, and the reward components as typed
fields (OpenEnv drops ``Observation.metadata`` on the wire). Clients: openenv's
``GenericEnvClient`` (TRL's OpenEnv path, SkyRL, verifiers' OpenEnv taskset all speak it).

Bounds (``ServeLimits``): at most ``max_sessions`` sessions (more are refused with OpenEnv's
CAPACITY_REACHED), an idle session closed with its socket after ``session_timeout_s``, request bodies
and WebSocket messages at most ``max_request_bytes`` and ``max_json_items`` values, action text at most
``MAX_ACTION_CHARS``; reset parameters are a closed set (``ResetParams``). The guard in front of OpenEnv
(``vtb_app.serve_guard``) enforces the routes, the token, the bodies, the messages and the idle close;
uvicorn's HTTP protocol (``vtb_app.serve_socket``) the header deadline and the connection cap. A
malformed action or message is answered with an error and the session goes on. A session whose
client leaves is closed by OpenEnv: its tool calls not yet started are refused (``SessionTools``) and
its env is closed.

Trust: whoever can open a session runs Python in the shared sandbox pool. The server binds 127.0.0.1
unless told otherwise, and anywhere else it needs a token (``serve(..., token)``; docs/training.md).
"""

from __future__ import annotations

import asyncio
import socket
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import ConcurrencyConfig
from pydantic import ValidationError

from vtb_app.serve_guard import CONNECTION, Guard
from vtb_app.serve_limits import ServeLimits
from vtb_app.serve_models import MAX_ACTION_CHARS, ResetParams, VTBAction, VTBObservation, VTBState
from vtb_app.serve_socket import (
    bind,
    connection_cap,
    hide_query_strings,
    http_protocol,
    require_token_off_loopback,
    ws_protocol,
)
from vtb_app.serve_token import check_token
from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv
from vtb_env.loaders import load_tasks
from vtb_env.reward import RewardFn
from vtb_env.tasks import Task
from vtb_env.tools.base import Tool, ToolContext, ToolRegistry, ToolResult


class SessionClosedError(RuntimeError):
    """A tool call, a reset or a step of a session that was closed (its client left or idled out)."""


class _SessionTool(Tool):
    """A shared tool seen through one session: refuses to start once the session is closed."""

    def __init__(self, tool: Tool, closed: threading.Event):
        self.name, self.schema, self._tool, self._closed = tool.name, tool.schema, tool, closed

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        if self._closed.is_set():
            return ToolResult.failure("the session was closed: call not executed", kind="session_closed")
        return self._tool.run(arguments, context)

    def schema_for(self, context: ToolContext) -> dict[str, Any]:
        return self._tool.schema_for(context)


class SessionTools:
    """The shared registry as one session uses it; ``close()`` stops the session's calls not yet started."""

    def __init__(self, shared: ToolRegistry):
        self._closed = threading.Event()
        self.registry = ToolRegistry(_SessionTool(shared[name], self._closed) for name in shared.names)

    def close(self) -> None:
        self._closed.set()


class NoEpisodeError(RuntimeError):
    """step() before reset(): over OpenEnv's stateless HTTP /step every request is a fresh environment."""


@dataclass
class ServeState:
    """What one app serves, and its live sessions (``app.state.vtb``)."""

    tasks: tuple[Task, ...]
    tools: ToolRegistry
    config: EnvConfig
    reward: RewardFn | None = None
    task_ids: frozenset[str] = field(init=False)
    open_sessions: int = 0
    closed_sessions: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.task_ids = frozenset(task.id for task in self.tasks)

    def opened(self) -> None:
        with self._lock:
            self.open_sessions += 1

    def closed(self) -> None:
        with self._lock:
            self.open_sessions -= 1
            self.closed_sessions += 1


class VTBOpenEnv(Environment[VTBAction, VTBObservation, VTBState]):
    """``VisualToolBenchEnv`` as an OpenEnv ``Environment`` (one per session)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, serve: ServeState):
        super().__init__()
        self._serve, self._tools = serve, SessionTools(serve.tools)
        self.env = VisualToolBenchEnv(
            tasks=serve.tasks, tools=self._tools.registry, reward=serve.reward, config=serve.config
        )
        self._state = VTBState()
        self._closed = self._watched = False
        serve.opened()

    def reset(self, **params: Any) -> VTBObservation:
        """Start a task: ``task_id`` or ``index`` picks it, else the env draws one (``seed`` makes it repeatable).

        ``params`` are ``ResetParams``' fields (anything else raises pydantic's ValidationError naming it).
        """
        self._refuse_if_closed()
        checked = ResetParams.model_validate(params, context={"task_ids": self._serve.task_ids})
        options = checked.model_dump(include={"task_id", "index"}, exclude_none=True)  # the env prefers task_id
        observation, info = self.env.reset(seed=checked.seed, options=options)
        self._state = VTBState(episode_id=checked.episode_id, task_id=info["task"]["id"], turn=0)
        return self._observation(observation, info, 0.0, False, False)

    def step(self, action: VTBAction, timeout_s: float | None = None, **_: Any) -> VTBObservation:
        self._refuse_if_closed()
        if self._state.task_id is None:
            raise NoEpisodeError(
                "no episode: call reset first (over HTTP each request is a fresh environment; "
                "play an episode over the WebSocket session /ws, e.g. with openenv's GenericEnvClient)"
            )
        if self._state.done:
            raise NoEpisodeError("the episode has ended: call reset for the next one")
        observation, reward, terminated, truncated, info = self.env.step(action.env_action())
        self._state.step_count += 1
        return self._observation(observation, info, reward, terminated, truncated)

    async def reset_async(self, **params: Any) -> VTBObservation:
        """OpenEnv awaits this in the client's connection: the session's calls stop when the client leaves."""
        self._watch_connection()
        return await asyncio.to_thread(lambda: self.reset(**params))

    async def step_async(self, action: VTBAction, timeout_s: float | None = None, **kwargs: Any) -> VTBObservation:
        self._watch_connection()
        return await asyncio.to_thread(self.step, action, timeout_s, **kwargs)

    def _refuse_if_closed(self) -> None:
        if self._closed:
            raise SessionClosedError("the session was closed (its client left or it idled out): open a new one")

    def _watch_connection(self) -> None:
        connection = CONNECTION.get()
        if connection is not None and not self._watched:
            self._watched = True
            connection.on_gone(self._tools.close)

    @property
    def state(self) -> VTBState:
        return self._state

    def close(self) -> None:
        """End the session: calls not yet started are refused, the env is closed (the shared tools stay up)."""
        if self._closed:
            return
        self._closed = True
        self._tools.close()
        self.env.close()
        self._serve.closed()

    def _observation(
        self, observation: dict[str, Any], info: dict[str, Any], reward: float, terminated: bool, truncated: bool
    ) -> VTBObservation:
        done = terminated or truncated
        self._state.turn, self._state.done = int(info["turn"]), done
        return VTBObservation(
            messages=observation["messages"],
            image_names=list(observation["image_names"]),
            tools=observation["tools"],
            task_id=info["task"]["id"],
            turn=int(info["turn"]),
            terminated=terminated,
            truncated=truncated,
            done=done,
            reward=float(reward) if done else 0.0,
            reward_components={k: float(v) for k, v in (info.get("reward_components") or {}).items()},
            reward_error=info.get("reward_error"),
            parse_errors=list(info.get("parse_errors") or []),
        )


def make_app(
    tasks: Sequence[Task] | str = "demo",
    tools: ToolRegistry | str | None = None,
    config: EnvConfig | None = None,
    reward: RewardFn | None = None,
    limits: ServeLimits = ServeLimits(),
    token: str | None = None,
) -> FastAPI:
    """The FastAPI app (openenv-core's ``create_app``) serving ``tasks`` (a list or any ``load_tasks`` source).

    ``tools``: a registry, a comma list of tool names, or None for the six defaults. ``config``
    must send images inline (``image_parts="data_url"``, the default preset's). ``token``: every
    request but ``/health`` and every WebSocket handshake must carry ``Authorization: Bearer <token>``.
    The WebSocket message bound is the server's: run the app with ``serve`` (or ``uvicorn_server``).
    """
    from vtb_env.tools import default_tools

    if token:  # now, not when Starlette first builds its middleware (the guard checks it too)
        check_token(token, "the server token")
    task_list = tuple(load_tasks(tasks) if isinstance(tasks, str) else tasks)
    if not task_list:
        raise ValueError(f"no tasks to serve in {tasks!r}")
    owned = not isinstance(tools, ToolRegistry)
    registry = default_tools().select(tools) if owned else tools
    config = config or EnvConfig.preset("default")
    if config.image_parts != "data_url":
        raise ValueError("a remote client needs the images inline: EnvConfig(image_parts='data_url')")
    serve_state = ServeState(task_list, registry, config, reward)
    app = create_app(
        lambda: VTBOpenEnv(serve_state),
        VTBAction,
        VTBObservation,
        env_name="vtb-gym",
        # No OpenEnv reaper: it frees an idle session's slot and leaves its socket answering. The guard
        # closes an idle session's socket instead, and OpenEnv then frees the slot (serve_guard).
        concurrency_config=ConcurrencyConfig(max_concurrent_envs=limits.max_sessions, session_timeout=None),
    )
    app.state.vtb, app.state.vtb_limits, app.state.vtb_has_token = serve_state, limits, bool(token)

    @app.exception_handler(NoEpisodeError)
    async def _no_episode(_request: Any, exc: NoEpisodeError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=409)

    @app.exception_handler(ValidationError)
    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Any, exc: ValidationError | RequestValidationError) -> JSONResponse:
        if isinstance(exc, ValidationError) and exc.title != ResetParams.__name__:
            raise exc  # a model of ours that failed is a bug (500), not the client's mistake
        # without the inputs: a seed of 1e400 is infinity, which JSON cannot carry (FastAPI's own reply failed: 500)
        return JSONResponse({"detail": _errors(exc)}, status_code=422)

    app.add_middleware(Guard, limits=limits, token=token)
    if owned:
        app.router.on_shutdown.append(registry.close)
    return app


def _errors(exc: ValidationError | RequestValidationError) -> list[dict[str, Any]]:
    """pydantic's errors as JSON can carry them: where, what, the message; no input, no context."""
    errors = exc.errors(include_url=False) if isinstance(exc, ValidationError) else exc.errors()
    return [
        {"loc": [str(part) for part in error["loc"]], "type": error["type"], "msg": error["msg"]} for error in errors
    ]


def uvicorn_server(app: FastAPI, sock: socket.socket, log_level: str = "info") -> Any:
    """The ``uvicorn.Server`` that serves ``app`` on the listening ``sock`` (``server.run(sockets=[sock])``),
    with the bounds of ``app.state.vtb_limits``: WebSocket messages, the header deadline, the connection cap."""
    import uvicorn

    limits: ServeLimits = app.state.vtb_limits
    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=http_protocol(limits, connection_cap(limits)),
        ws=ws_protocol(limits),  # unsent bytes bounded in size and time (a client that never reads)
        ws_max_size=limits.max_request_bytes,  # a bigger message closes the connection (1009)
        ws_max_queue=2,  # messages buffered per connection beyond the guard's read-ahead: memory stays bounded
        log_level=log_level,
    )
    hide_query_strings()  # after the Config: it configures uvicorn's loggers
    return uvicorn.Server(config)


def serve(app: FastAPI, host: str = "127.0.0.1", port: int = 8000, sock: socket.socket | None = None) -> None:
    """Run ``make_app``'s app with uvicorn (blocking) on ``sock`` or a new socket on ``host``:``port``.

    Refuses (``TokenRequiredError``) to listen beyond loopback without a token: whoever reaches the
    server runs Python in the sandbox pool.
    """
    sock = sock or bind(host, port)
    try:
        require_token_off_loopback(sock, app.state.vtb_has_token)
        uvicorn_server(app, sock).run(sockets=[sock])
    finally:
        sock.close()


__all__ = [
    "MAX_ACTION_CHARS",
    "NoEpisodeError",
    "ResetParams",
    "ServeState",
    "SessionTools",
    "VTBAction",
    "VTBObservation",
    "VTBOpenEnv",
    "VTBState",
    "make_app",
    "serve",
    "uvicorn_server",
]
