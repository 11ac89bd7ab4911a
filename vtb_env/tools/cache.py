"""Record/replay cache for online tool backends (SQLite, one file).

Modes: ``off`` (always go online), ``record`` (go online, store every answer), ``replay`` (answer
only from the cache: an offline run reproduces a recorded one), ``auto`` (cache first, online on a
miss, then store), ``prefer`` (cache first, the backend on a miss, nothing stored: how an offline run
replays a recorded online one and falls back to the bundled data). Keys are the tool's normalized
arguments, so equal calls hit the same entry.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from typing import Any, Callable

MODES = ("off", "record", "replay", "auto", "prefer")


class CacheMiss(LookupError):
    """Replay mode and nothing recorded for this call."""


class ReplayCache:
    """Record/replay of tool results in SQLite, so online tools give the same answers on every run (``MODES``)."""

    def __init__(self, path: str, mode: str = "auto"):
        if mode not in MODES:
            raise ValueError(f"cache mode must be one of {MODES}, got {mode!r}")
        self.path, self.mode = path, mode
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS entries (kind TEXT, key TEXT, value TEXT, created REAL, "
            "PRIMARY KEY (kind, key))"
        )
        self._db.commit()

    def get(self, kind: str, key: Any) -> Any | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM entries WHERE kind = ? AND key = ?", (kind, _key(key))).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, kind: str, key: Any, value: Any) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?)", (kind, _key(key), json.dumps(value), time.time())
            )
            self._db.commit()

    def through(self, kind: str, key: Any, fetch: Callable[[], Any]) -> Any:
        """The answer for ``key`` according to the mode; ``fetch`` goes online."""
        if self.mode in ("replay", "auto", "prefer"):
            hit = self.get(kind, key)
            if hit is not None:
                return hit
            if self.mode == "replay":
                raise CacheMiss(f"no recorded {kind} answer for {_key(key)} (cache {self.path}, replay mode)")
        value = fetch()
        if self.mode in ("record", "auto"):
            self.put(kind, key, value)
        return value

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _key(key: Any) -> str:
    return json.dumps(key, sort_keys=True, ensure_ascii=False)
