"""``vtb serve``: the environment over OpenEnv's protocol (``vtb_app.openenv_server``)."""

from __future__ import annotations

import argparse

from vtb_app.serve_limits import ServeLimits


def register(subparsers: argparse._SubParsersAction) -> None:
    limits = ServeLimits()
    parser = subparsers.add_parser(
        "serve",
        help="serve the environment over OpenEnv's HTTP/WebSocket protocol (one env per session)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--tasks", default="demo", help="demo, synth:N:SEED, or any vtb_env.loaders source")
    parser.add_argument("--tools", default=None, help="comma-separated tool names to offer (default: all six)")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (0.0.0.0 exposes the sandboxed tools)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-tool-calls", type=int, default=None, help="the env's tool-call cap (default: preset's)")
    parser.add_argument("--max-sessions", type=int, default=limits.max_sessions, help="concurrent sessions")
    parser.add_argument(
        "--session-timeout", type=float, default=limits.session_timeout_s, help="idle seconds before a session closes"
    )
    parser.add_argument(
        "--max-request-bytes", type=int, default=limits.max_request_bytes, help="an HTTP body or WebSocket message"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # errors (a missing openenv-core, a bad --tasks spec) go to the CLI's one-line handler (vtb_app/errors.py)
    from vtb_app.openenv_server import make_app, serve
    from vtb_env.config import EnvConfig

    overrides = {} if args.max_tool_calls is None else {"max_tool_calls": args.max_tool_calls}
    limits = ServeLimits(args.max_sessions, args.session_timeout, args.max_request_bytes)
    app = make_app(args.tasks, args.tools, EnvConfig.preset("default", **overrides), limits=limits)
    serve(app, args.host, args.port)
    return 0
