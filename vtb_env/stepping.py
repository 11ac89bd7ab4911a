"""One env, one stepping thread: a second concurrent step()/reset() raises instead of interleaving.

An episode is a sequence; two threads stepping one env at once would interleave its dialogue and
record silently (call ids out of order, tool messages under the wrong call). ``StepGuard`` makes
that a clear ``ConcurrentStepError``. A step holds the env from ``begin_step`` to ``end_step`` (or
until ``execute`` fails), so the three-part API that ``EnvPool`` uses is covered as well as
``step()``. To step many episodes at once, use one env per episode (``EnvPool``).

A ``PendingStep`` is single-use: the guard knows the one step in progress, ``execute`` runs it at
most once and ``end_step`` applies it once; any other ``PendingStep`` (applied already, abandoned by
a failed ``execute``, made by another env or before a ``reset``) gets ``StaleStepError`` and
changes nothing, the guard included.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class ConcurrentStepError(RuntimeError):
    """A thread called step()/reset() on an env that another thread is stepping."""


class StaleStepError(RuntimeError):
    """``execute``/``end_step`` with a ``PendingStep`` that is not the env's step in progress."""


class StepGuard:
    """Who holds the env now (never blocks: contention is a bug in the caller, reported at once), and the
    ``PendingStep`` its holder is working on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder = ""
        self._stage_lock = threading.Lock()  # claims are atomic: two end_step() of one step cannot both pass
        self._pending: object | None = None
        self._stage = ""  # "planned" -> ("executing" -> "executed") -> "applying"

    def take(self, what: str) -> None:
        if not self._lock.acquire(blocking=False):
            raise ConcurrentStepError(
                f"{what}() called while {self._holder}: one env is stepped by one thread at a time "
                "(use one env per episode, e.g. EnvPool, to step episodes concurrently)"
            )
        self._holder = f"thread {threading.current_thread().name!r} is in {what}()"

    def give(self) -> None:
        if self._lock.locked():
            self._holder, self._pending, self._stage = "", None, ""
            self._lock.release()

    def issue(self, pending: object) -> None:
        """``begin_step`` made ``pending``: it is the step in progress until applied or abandoned."""
        self._pending, self._stage = pending, "planned"

    def claim(self, pending: object, what: str) -> None:
        """``execute`` (once, before ``end_step``) or ``end_step`` (once) may work on ``pending``; else
        ``StaleStepError``, with nothing changed."""
        allowed = ("planned",) if what == "execute" else ("planned", "executed")
        with self._stage_lock:
            if pending is None or pending is not self._pending:
                raise StaleStepError(
                    f"{what}() got a PendingStep that is not this env's step in progress (applied already, "
                    "abandoned by a failed execute, or made by another env or before a reset): "
                    "each one is executed at most once and applied once, by the env that made it"
                )
            if self._stage not in allowed:
                raise StaleStepError(f"{what}() on a PendingStep that is {self._stage} already")
            self._stage = "executing" if what == "execute" else "applying"

    def executed(self) -> None:
        self._stage = "executed"


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
    """``begin_step``: takes the guard until ``end_step`` and issues the ``PendingStep`` it returns; gives the
    guard back if it fails itself."""

    @functools.wraps(method)
    def taking(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._guard.take("step")
        try:
            pending = method(self, *args, **kwargs)
        except BaseException:
            self._guard.give()
            raise
        self._guard.issue(pending)
        return pending

    return taking  # type: ignore[return-value]


def executes(method: F) -> F:
    """``execute(pending)``: claims ``pending`` once (``StepGuard.claim``); gives the guard back only when it
    raises (the step is then abandoned)."""
    return _claiming(method, "execute")


def applies(method: F) -> F:
    """``end_step(pending)``: claims ``pending`` once; gives the guard back when it returns or raises."""
    return _claiming(method, "end_step")


def _claiming(method: F, what: str) -> F:
    # A stale ``pending`` raises StaleStepError before the try: the guard stays with whoever holds it.
    @functools.wraps(method)
    def claiming(self: Any, pending: Any) -> Any:
        self._guard.claim(pending, what)
        try:
            result = method(self, pending)
        except BaseException:
            self._guard.give()
            raise
        if what == "execute":
            self._guard.executed()
        else:
            self._guard.give()
        return result

    return claiming  # type: ignore[return-value]
