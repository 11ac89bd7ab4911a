"""Record/replay cache for online tool backends (``vtb_env.kv_cache``: one SQLite file).

Modes: ``off`` (always go online), ``record`` (go online, store every answer), ``replay`` (answer
only from the cache: an offline run reproduces a recorded one), ``auto`` (cache first, online on a
miss, then store), ``prefer`` (cache first, the backend on a miss, nothing stored: how an offline run
replays a recorded online one and falls back to the bundled data). Keys are the tool's normalized
arguments, so equal calls hit the same entry.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from vtb_env.kv_cache import KVCache

MODES = ("off", "record", "replay", "auto", "prefer")


class CacheMiss(LookupError):
    """Replay mode and nothing recorded for this call."""


class ReplayCache(KVCache):
    """Record/replay of tool results, so online tools give the same answers on every run (``MODES``)."""

    def __init__(self, path: str, mode: str = "auto"):
        if mode not in MODES:
            raise ValueError(f"cache mode must be one of {MODES}, got {mode!r}")
        super().__init__(path, "tool_answers")
        self.mode = mode

    def through(self, kind: str, key: Any, fetch: Callable[[], Any]) -> Any:
        """The answer for ``key`` according to the mode; ``fetch`` goes online."""
        if self.mode in ("replay", "auto", "prefer"):
            hit = self.get(record_key(kind, key))
            if hit is not None:
                return hit
            if self.mode == "replay":
                raise CacheMiss(f"no recorded {kind} answer for {key} (cache {self.path}, replay mode)")
        value = fetch()
        if self.mode in ("record", "auto"):
            self.put(record_key(kind, key), value)
        return value


def record_key(kind: str, key: Any) -> str:
    """The entry of a tool's (normalized) arguments: equal calls hit the same entry."""
    return json.dumps([kind, key], sort_keys=True, ensure_ascii=False)
