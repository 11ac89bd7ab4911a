"""A persistent verdict cache (SQLite), so re-scoring the same answers costs no judge calls.

The key is a hash of (judge id, template hash, question, golden answer, criterion, answer).
Only real verdicts ("Met" / "Not Met") are stored: a ``judge_error`` is retried next time.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path

from vtb_rewards.judge.verdict import JUDGE_ERROR, Verdict


def cache_key(judge_id: str, template_hash: str, question: str, golden_answer: str, criterion: str, answer: str) -> str:
    payload = json.dumps([judge_id, template_hash, question, golden_answer, criterion, answer], ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


class VerdictCache:
    """Thread-safe key -> verdict store; ``path=":memory:"`` for a throwaway cache."""

    def __init__(self, path: str | Path = ":memory:"):
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        with self._lock, self._db:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, status TEXT NOT NULL, explanation TEXT)"
            )

    def get(self, key: str) -> Verdict | None:
        with self._lock:
            row = self._db.execute("SELECT status, explanation FROM verdicts WHERE key = ?", (key,)).fetchone()
        return Verdict(row[0], explanation=row[1] or "", source="cache") if row else None

    def put(self, key: str, verdict: Verdict) -> None:
        if verdict.status == JUDGE_ERROR:
            return
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO verdicts (key, status, explanation) VALUES (?, ?, ?)",
                (key, verdict.status, verdict.explanation),
            )

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
