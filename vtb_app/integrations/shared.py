"""Tasks and tools shared by every episode of a process, for the adapters whose framework builds one env
per episode from plain config (verifiers' ``VTBEnv``, SkyRL's ``skyrl_gym.make``)."""

from __future__ import annotations

import threading

from vtb_env.loaders import load_tasks
from vtb_env.tasks import Task
from vtb_env.tools.base import ToolRegistry

_lock = threading.Lock()
_tasks: dict[str, tuple[Task, ...]] = {}
_tools: dict[str | None, ToolRegistry] = {}


def shared_tasks(source: str) -> tuple[Task, ...]:
    """The tasks of ``source`` (any ``load_tasks`` source), loaded once per process."""
    with _lock:
        if source not in _tasks:
            tasks = tuple(load_tasks(source))
            if not tasks:
                raise ValueError(f"no tasks in {source!r}")
            _tasks[source] = tasks
        return _tasks[source]


def shared_tools(names: str | None) -> ToolRegistry:
    """One registry (one sandbox pool) per tool selection (a comma list; None: the six defaults) per process."""
    with _lock:
        if names not in _tools:
            from vtb_env.tools import default_tools

            _tools[names] = default_tools().select(names)
        return _tools[names]
