"""The bounds of ``vtb serve`` (no server imports here: ``vtb --help`` reads the defaults)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServeLimits:
    """How much one server takes: sessions, idle time, request size."""

    max_sessions: int = 16  # concurrent WebSocket sessions; more are refused (OpenEnv's CAPACITY_REACHED)
    session_timeout_s: float | None = 600.0  # idle sessions are closed after this (None: never)
    max_request_bytes: int = 4 * 1024 * 1024  # an HTTP body or WebSocket message (actions carry no images)

    def __post_init__(self) -> None:
        if self.max_sessions < 1 or self.max_request_bytes < 1024:
            raise ValueError("max_sessions must be >= 1 and max_request_bytes >= 1024")
        if self.session_timeout_s is not None and self.session_timeout_s <= 0:
            raise ValueError("session_timeout_s must be positive (or None)")
