"""The environment over OpenEnv's protocol, on openenv-core's own server (``create_app``).

    vtb serve --tasks synth:256:0 --port 8000          # or: app = make_app("synth:256:0")

One ``VisualToolBenchEnv`` per WebSocket session (``/ws``), every session sharing one tool
registry (one sandbox pool). Actions are ``{"text": raw model text}`` or ``{"message": OpenAI
assistant message}``; an observation carries the dialogue in OpenAI format (``messages``, images
as data URLs), the tools offered, ``reward`` and ``done``, and the reward components as typed
fields (OpenEnv drops ``Observation.metadata`` on the wire). Clients: openenv's
``GenericEnvClient`` (TRL's OpenEnv path, SkyRL, verifiers' OpenEnv taskset all speak it).

Bounds: at most ``max_sessions`` sessions (more are refused with OpenEnv's CAPACITY_REACHED), idle
sessions closed after ``session_timeout_s``, request bodies and WebSocket messages at most
``max_request_bytes``, action text at most ``MAX_ACTION_CHARS``. A malformed action is answered
with an error and the session goes on. A session whose client leaves is closed by OpenEnv: its
tool calls not yet started are refused (``SessionTools``) and its env is closed.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, ConcurrencyConfig, Observation, State
from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from vtb_app.serve_limits import ServeLimits
from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv
from vtb_env.loaders import load_tasks
from vtb_env.reward import RewardFn
from vtb_env.tasks import Task
from vtb_env.tools.base import Tool, ToolContext, ToolRegistry, ToolResult

MAX_ACTION_CHARS = 200_000  # one assistant reply; longer ones are refused, not truncated


class VTBAction(Action):
    """The policy's reply: raw text (any tool-call format the env parses) or an OpenAI assistant message."""

    text: str | None = Field(default=None, max_length=MAX_ACTION_CHARS, description="raw model text")
    message: dict[str, Any] | None = Field(default=None, description="OpenAI assistant message (content, tool_calls)")

    @model_validator(mode="after")
    def _exactly_one(self) -> "VTBAction":
        # PydanticCustomError, not ValueError: openenv 0.3 serialises e.errors() into its error reply, and a
        # ValueError in the error's context fails that serialisation and ends the session.
        if (self.text is None) == (self.message is None):
            raise PydanticCustomError("vtb_action", 'an action is {"text": "..."} or {"message": {...}}, exactly one')
        if self.message is not None and len(json.dumps(self.message, default=str)) > MAX_ACTION_CHARS:
            raise PydanticCustomError("vtb_action", f"the message is longer than {MAX_ACTION_CHARS} characters")
        return self

    def env_action(self) -> str | dict[str, Any]:
        """What ``VisualToolBenchEnv.step`` takes."""
        return self.text if self.text is not None else {**(self.message or {}), "role": "assistant"}


class VTBObservation(Observation):
    """One step's view: the whole dialogue so far (OpenAI format) and, at the end, the reward and its components."""

    messages: list[dict[str, Any]] = Field(default_factory=list, description="the dialogue, images as data URLs")
    image_names: list[str] = Field(default_factory=list, description="the images' file names, in part order")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="function schemas offered now")
    task_id: str = ""
    turn: int = Field(default=0, description="index of the task turn in progress")
    terminated: bool = False
    truncated: bool = False
    reward_components: dict[str, float] = Field(default_factory=dict, description="set at the episode's end")
    reward_error: str | None = Field(default=None, description="why the reward could not be computed, if so")
    parse_errors: list[str] = Field(default_factory=list, description="tool-call parse errors of this step")


class VTBState(State):
    """The session's episode: task, turn, whether it ended."""

    task_id: str | None = None
    turn: int = 0
    done: bool = False


class SessionClosedError(RuntimeError):
    """A tool call of a session whose client has gone."""


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
    open_sessions: int = 0
    closed_sessions: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

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

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        index: int | None = None,
        **_: Any,
    ) -> VTBObservation:
        """Start a task: ``task_id`` or ``index`` picks it, else the env draws one (``seed`` makes it repeatable)."""
        options = {"task_id": task_id} if task_id is not None else {"index": index} if index is not None else {}
        observation, info = self.env.reset(seed=seed, options=options)
        self._state = VTBState(episode_id=episode_id, task_id=info["task"]["id"], turn=0)
        return self._observation(observation, info, 0.0, False, False)

    def step(self, action: VTBAction, timeout_s: float | None = None, **_: Any) -> VTBObservation:
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

    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> VTBObservation:
        """OpenEnv awaits this in the client's connection: the session's calls stop when the client leaves."""
        self._watch_connection()
        return await asyncio.to_thread(self.reset, seed, episode_id, **kwargs)

    async def step_async(self, action: VTBAction, timeout_s: float | None = None, **kwargs: Any) -> VTBObservation:
        self._watch_connection()
        return await asyncio.to_thread(self.step, action, timeout_s, **kwargs)

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


class Connection:
    """One WebSocket client, seen by the ASGI guard: ``on_gone`` callbacks run when it disconnects."""

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


class _Guard:
    """ASGI middleware. HTTP: bodies over ``limit`` bytes get 413 (declared or streamed). WebSocket: the
    client's messages are read as they come (a few ahead), so a disconnect is seen while a step is
    running, not only after it; the session's env registered on the ``CONNECTION`` then stops."""

    def __init__(self, app: Any, limit: int, read_ahead: int = 4):
        self.app, self.limit, self.read_ahead = app, limit, read_ahead

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            return await self._http(scope, receive, send)
        if scope["type"] != "websocket":
            return await self.app(scope, receive, send)
        connection, inbox = Connection(), asyncio.Queue(self.read_ahead)

        async def pump() -> None:
            while True:
                message = await receive()
                if message["type"] == "websocket.disconnect":
                    connection.disconnected()
                await inbox.put(message)
                if message["type"] == "websocket.disconnect":
                    return

        reader = asyncio.create_task(pump())
        token = CONNECTION.set(connection)
        try:
            await self.app(scope, inbox.get, send)
        finally:
            CONNECTION.reset(token)
            reader.cancel()

    async def _http(self, scope: dict, receive: Any, send: Any) -> None:
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await self._too_large(scope, receive, send)
        seen = 0

        async def counted() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _TooLarge()
            return message

        try:
            await self.app(scope, counted, send)
        except _TooLarge:
            await self._too_large(scope, receive, send)

    async def _too_large(self, scope: dict, receive: Any, send: Any) -> None:
        response = JSONResponse({"detail": f"request body larger than {self.limit} bytes"}, status_code=413)
        await response(scope, receive, send)


class _TooLarge(Exception):
    pass


def make_app(
    tasks: Sequence[Task] | str = "demo",
    tools: ToolRegistry | str | None = None,
    config: EnvConfig | None = None,
    reward: RewardFn | None = None,
    limits: ServeLimits = ServeLimits(),
) -> FastAPI:
    """The FastAPI app (openenv-core's ``create_app``) serving ``tasks`` (a list or any ``load_tasks`` source).

    ``tools``: a registry, a comma list of tool names, or None for the six defaults. ``config``
    must send images inline (``image_parts="data_url"``, the default preset's). The WebSocket
    message bound is the server's: ``serve`` passes ``limits.max_request_bytes`` to uvicorn.
    """
    from vtb_env.tools import default_tools

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
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=limits.max_sessions, session_timeout=limits.session_timeout_s
        ),
    )
    app.state.vtb, app.state.vtb_limits = serve_state, limits

    @app.exception_handler(NoEpisodeError)
    async def _no_episode(_request: Any, exc: NoEpisodeError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=409)

    app.add_middleware(_Guard, limit=limits.max_request_bytes)
    if owned:
        app.router.on_shutdown.append(registry.close)
    return app


def serve(app: FastAPI, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run ``make_app``'s app with uvicorn (blocking); a WebSocket message over the limit closes the connection."""
    import uvicorn

    uvicorn.run(app, host=host, port=port, ws_max_size=app.state.vtb_limits.max_request_bytes, log_level="info")


__all__ = [
    "MAX_ACTION_CHARS",
    "NoEpisodeError",
    "ServeState",
    "SessionTools",
    "VTBAction",
    "VTBObservation",
    "VTBOpenEnv",
    "VTBState",
    "make_app",
    "serve",
]
