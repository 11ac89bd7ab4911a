"""``vtb serve``: the environment over OpenEnv's protocol (``vtb_app.openenv_server``).

Every mistake is caught before the slow part: the arguments by their types (``ServeLimits.RANGES``),
then the socket is bound (a bad host or a busy port) and the token rule checked, and only then are the
tasks loaded or generated (``synth:256:0`` takes minutes: a progress line says how far it is).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from typing import Any, Callable

from vtb_app.arg_types import PORT, integer, number
from vtb_app.serve_limits import RANGES, ServeLimits
from vtb_app.serve_token import GENERATED, MIN_TOKEN_BITS, TOKEN_VARIABLE

PROGRESS_EVERY_S = 5.0


def _limit(name: str) -> Callable[[str], Any]:
    low, high = RANGES[name]
    return integer(int(low), int(high)) if isinstance(getattr(ServeLimits(), name), int) else number(low, high)


def register(subparsers: argparse._SubParsersAction) -> None:
    limits = ServeLimits()
    parser = subparsers.add_parser(
        "serve",
        help="serve the environment over OpenEnv's HTTP/WebSocket protocol (one env per session)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--tasks", default="demo", help="demo, synth:N:SEED, or any vtb_env.loaders source")
    parser.add_argument("--tools", default=None, help="comma-separated tool names to offer (default: all six)")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="bind address; anything but loopback needs --token (whoever connects runs code in the sandbox pool)",
    )
    parser.add_argument("--port", type=PORT, default=8000, help="0: any free port")
    parser.add_argument(
        "--token-file",
        default=None,
        metavar="PATH",
        help="clients must send 'Authorization: Bearer <the file's token>'; a PATH that does not exist gets a new "
        f"random token (mode 600). Or set ${TOKEN_VARIABLE}. A token is required off loopback and must carry "
        f"{MIN_TOKEN_BITS} bits (16 random bytes)",
    )
    parser.add_argument(
        "--token",
        default=None,
        help="the token itself: visible to every local user in the process list; "
        f"prefer --token-file or ${TOKEN_VARIABLE}",
    )
    parser.add_argument(
        "--max-tool-calls", type=integer(1, 1000), default=None, help="the env's tool-call cap (default: preset's)"
    )
    parser.add_argument(
        "--max-sessions", type=_limit("max_sessions"), default=limits.max_sessions, help="concurrent sessions"
    )
    parser.add_argument(
        "--session-timeout",
        type=_limit("session_timeout_s"),
        default=limits.session_timeout_s,
        help="idle seconds before a session and its socket are closed",
    )
    parser.add_argument(
        "--max-request-bytes",
        type=_limit("max_request_bytes"),
        default=limits.max_request_bytes,
        help="an HTTP body or WebSocket message",
    )
    parser.add_argument(
        "--max-connections",
        type=_limit("max_connections"),
        default=limits.max_connections,
        help="open connections (fewer if the open-file limit leaves less room)",
    )
    parser.set_defaults(func=run)


SERVER_MODULES = ("fastapi", "openenv", "uvicorn")  # the `serve` extra (vtb_app/errors.py names it)


def run(args: argparse.Namespace) -> int:
    from vtb_app.serve_socket import BindError, TokenRequiredError, bind, connection_cap, require_token_off_loopback
    from vtb_app.serve_token import TokenError, resolve_token

    try:  # first: a weak or doubly given token is a usage error, whatever the address or the venv
        token, token_source = resolve_token(args.token_file, args.token, os.environ)
    except TokenError as exc:
        raise SystemExit(f"vtb serve: {exc}") from None
    if token_source.startswith(GENERATED):  # said at once, as Jupyter does: the user needs it to connect
        print(f"vtb serve: {token_source}", file=sys.stderr, flush=True)
    for module in SERVER_MODULES:  # at once, not after binding and loading (a missing extra exits 3)
        if importlib.util.find_spec(module) is None:
            raise ModuleNotFoundError(f"No module named {module!r}", name=module)
    limits = ServeLimits(
        max_sessions=args.max_sessions,
        session_timeout_s=args.session_timeout,
        max_request_bytes=args.max_request_bytes,
        max_connections=args.max_connections,
    )
    try:  # before binding: a weak or doubly given token is a usage error, whatever the address
        token, token_source = resolve_token(args.token_file, args.token, os.environ)
    except TokenError as exc:
        raise SystemExit(f"vtb serve: {exc}") from None
    if token_source.startswith(GENERATED):  # said at once, as Jupyter does: the user needs it to connect
        print(f"vtb serve: {token_source}", file=sys.stderr, flush=True)
    try:
        sock = bind(args.host, args.port)  # before the tasks: a busy port fails in a second, not after minutes
        require_token_off_loopback(sock, token is not None)
    except (BindError, TokenRequiredError) as exc:
        raise SystemExit(f"vtb serve: {exc}") from None
    try:
        tasks = _load(args.tasks)
        from vtb_app.openenv_server import make_app, serve
        from vtb_env.config import EnvConfig

        overrides = {} if args.max_tool_calls is None else {"max_tool_calls": args.max_tool_calls}
        config = EnvConfig.preset("default", **overrides)
        app = make_app(tasks, args.tools, config, limits=limits, token=token)
        host, port = sock.getsockname()[:2]
        print(
            f"vtb serve: {len(tasks)} tasks on http://{host}:{port} (WebSocket /ws); at most {limits.max_sessions} "
            f"sessions, {connection_cap(limits)} connections" + (f"; {token_source}" if token else ""),
            file=sys.stderr,
            flush=True,
        )
    except BaseException:
        sock.close()
        raise
    serve(app, sock=sock)
    return 0


def _load(spec: str) -> list[Any]:
    """The tasks of ``spec``, with a line on stderr every few seconds while they load; an empty set is a
    usage error."""
    from vtb_env.loaders import iter_tasks
    from vtb_env.loaders.synth import is_synth_spec, parse_synth_spec

    total = f"/{parse_synth_spec(spec)[0]}" if is_synth_spec(spec) else ""
    verb = "generating" if is_synth_spec(spec) else "loading"
    start = last = time.monotonic()
    tasks = []
    for task in iter_tasks(spec):
        tasks.append(task)
        now = time.monotonic()
        if now - last >= PROGRESS_EVERY_S:
            print(
                f"vtb serve: {verb} {spec}: {len(tasks)}{total} tasks, {now - start:.0f} s", file=sys.stderr, flush=True
            )
            last = now
    if not tasks:
        raise SystemExit(f"vtb serve: --tasks {spec!r} holds no task")
    return tasks
