"""The one persistent key-value store of the project's caches (judge verdicts, recorded tool answers).

JSON values by text key in one SQLite file (WAL journal; the folder made), one connection shared
by threads under a lock; each cache has its own ``space`` of keys; ``":memory:"`` is a throwaway store.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


class CacheFileError(ValueError):
    """The cache file exists but is not a readable SQLite store (damaged, truncated, another format)."""


class KVCache:
    """``get`` / ``put`` of JSON values under text keys of one ``space`` in the SQLite file ``path``."""

    def __init__(self, path: str | Path, space: str):
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path, self.space, self._lock = str(path), space, threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        try:
            with self._named(), self._lock, self._db:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("CREATE TABLE IF NOT EXISTS kv (space, key, value, PRIMARY KEY (space, key))")
        except CacheFileError:
            self._db.close()
            raise

    @contextmanager
    def _named(self) -> Iterator[None]:
        """SQLite's errors say what is wrong but not with which file: a damaged cache names itself."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise CacheFileError(
                f"{self.path}: cannot be read as a cache ({exc}); move it aside to start with an empty cache"
            ) from exc

    def get(self, key: str) -> Any | None:
        with self._named(), self._lock:
            row = self._db.execute("SELECT value FROM kv WHERE space = ? AND key = ?", (self.space, key)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, value: Any) -> None:
        with self._named(), self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO kv VALUES (?, ?, ?)", (self.space, key, json.dumps(value)))

    def __len__(self) -> int:
        with self._named(), self._lock:
            return self._db.execute("SELECT COUNT(*) FROM kv WHERE space = ?", (self.space,)).fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
