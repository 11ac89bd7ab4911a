"""A persistent verdict cache (``vtb_env.kv_cache``), so re-scoring the same answers costs no judge calls.

The key is a hash of (judge id, template hash, question, golden answer, criterion, answer).
Only real verdicts ("Met" / "Not Met") are stored: a ``judge_error`` is retried next time.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from vtb_env.kv_cache import KVCache
from vtb_rewards.judge.verdict import JUDGE_ERROR, Verdict


def cache_key(judge_id: str, template_hash: str, question: str, golden_answer: str, criterion: str, answer: str) -> str:
    payload = json.dumps([judge_id, template_hash, question, golden_answer, criterion, answer], ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


class VerdictCache(KVCache):
    """Thread-safe key -> verdict store; ``path=":memory:"`` for a throwaway cache."""

    def __init__(self, path: str | Path = ":memory:"):
        super().__init__(path, "judge_verdicts")

    def get(self, key: str) -> Verdict | None:
        row = super().get(key)
        return Verdict(row["status"], explanation=row["explanation"], source="cache") if row else None

    def put(self, key: str, verdict: Verdict) -> None:
        if verdict.status != JUDGE_ERROR:
            super().put(key, {"status": verdict.status, "explanation": verdict.explanation or ""})
