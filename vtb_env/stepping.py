"""One env, one stepping thread: a second concurrent step()/reset() raises instead of interleaving.

An episode is a sequence; two threads stepping one env at once would interleave its dialogue and
record silently (call ids out of order, tool messages under the wrong call). ``StepGuard`` makes
that a clear ``ConcurrentStepError``. A step holds the env from ``begin_step`` to ``end_step`` (or
until ``execute`` fails), so the three-part API that ``EnvPool`` uses is covered as well as
``step()``. To step many episodes at once, use one env per episode (``EnvPool``).
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class ConcurrentStepError(RuntimeError):
    """A thread called step()/reset() on an env that another thread is stepping."""


class StepGuard:
    """Who holds the env now (never blocks: contention is a bug in the caller, reported at once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder = ""

    def take(self, what: str) -> None:
        if not self._lock.acquire(blocking=False):
            raise ConcurrentStepError(
                f"{what}() called while {self._holder}: one env is stepped by one thread at a time "
                "(use one env per episode, e.g. EnvPool, to step episodes concurrently)"
            )
        self._holder = f"thread {threading.current_thread().name!r} is in {what}()"

    def give(self) -> None:
        if self._lock.locked():
            self._holder = ""
            self._lock.release()


def holds(what: str) -> Callable[[F], F]:
    """The method takes the env's guard for its whole run (reset, truncate)."""

    def decorate(method: F) -> F:
        @functools.wraps(method)
        def held(self: Any, *args: Any, **kwargs: Any) -> Any:
            self._guard.take(what)
            try:
                return method(self, *args, **kwargs)
            finally:
                self._guard.give()

        return held  # type: ignore[return-value]

    return decorate


def takes(method: F) -> F:
    """``begin_step``: takes the guard until ``end_step``; gives it back if it fails itself."""

    @functools.wraps(method)
    def taking(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._guard.take("step")
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            self._guard.give()
            raise

    return taking  # type: ignore[return-value]


def gives(on_error_only: bool = False) -> Callable[[F], F]:
    """``end_step`` gives the guard back when it returns or raises; ``execute`` only when it raises
    (the step is then abandoned)."""

    def decorate(method: F) -> F:
        @functools.wraps(method)
        def giving(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                result = method(self, *args, **kwargs)
            except BaseException:
                self._guard.give()
                raise
            if not on_error_only:
                self._guard.give()
            return result

        return giving  # type: ignore[return-value]

    return decorate
