"""The bounds of ``vtb serve`` (no server imports here: ``vtb --help`` reads the defaults).

Each bound is a closed range (``RANGES``): the CLI's argument types and ``ServeLimits`` itself refuse
anything outside it, NaN and infinities included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

MiB = 1024 * 1024


@dataclass(frozen=True)
class ServeLimits:
    """How much one server takes: sessions, connections, time and request size."""

    max_sessions: int = 16  # concurrent WebSocket sessions; more are refused (OpenEnv's CAPACITY_REACHED)
    session_timeout_s: float = 600.0  # a session idle this long is closed, its socket too
    max_request_bytes: int = 4 * MiB  # an HTTP body or WebSocket message (actions carry no images)
    max_connections: int = 256  # open connections of any kind (also bounded by the open-file limit)
    header_timeout_s: float = 10.0  # a request's headers must arrive within this (slowloris)
    body_timeout_s: float = 30.0  # and its body within this
    max_json_items: int = 10_000  # values in one message (a step is tens): parsing stays a few ms
    max_json_depth: int = 64  # nesting of one message (a step is under ten)
    max_backlog_bytes: int = 64 * MiB  # unsent bytes to one WebSocket client (replies, pongs) before it is cut

    def __post_init__(self) -> None:
        for spec in fields(self):
            low, high = RANGES[spec.name]
            value = getattr(self, spec.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"ServeLimits.{spec.name} must be a number, got {value!r}")
            if not (math.isfinite(value) and low <= value <= high):
                raise ValueError(f"ServeLimits.{spec.name} must be in [{low}, {high}], got {value!r}")


# (lowest, highest) allowed for each field.
RANGES: dict[str, tuple[float, float]] = {
    "max_sessions": (1, 4096),
    "session_timeout_s": (0.1, 7 * 24 * 3600),
    "max_request_bytes": (1024, 256 * MiB),
    "max_connections": (4, 65536),
    "header_timeout_s": (0.1, 3600),
    "body_timeout_s": (0.1, 3600),
    "max_json_items": (16, 10_000_000),
    "max_json_depth": (8, 10_000),
    "max_backlog_bytes": (1 * MiB, 4096 * MiB),
}
