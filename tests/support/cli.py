"""Command lines of the ``vtb`` CLI that many tests run."""

from __future__ import annotations

from typing import Any


def eval_args(data: Any, agent: str, out: Any, *options: Any) -> list[str]:
    """``vtb eval`` of the tasks ``data`` with ``agent`` (e.g. ``f"openai:m@{server.base_url}"``),
    writing ``out``, without the progress bar, then ``options``: every argument as a string."""
    return [str(arg) for arg in ("eval", "--data", data, "--agent", agent, "--out", out, "--no-progress", *options)]
