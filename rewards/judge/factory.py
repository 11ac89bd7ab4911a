"""Build a judge from arguments or environment variables (what the env and `vtb` use by default).

``VTB_JUDGE_BASE_URL`` (e.g. ``http://127.0.0.1:8000/v1``) and ``VTB_JUDGE_MODEL`` select an
OpenAI-compatible judge; ``VTB_JUDGE_API_KEY`` (else ``OPENAI_API_KEY``) its key;
``VTB_JUDGE_CACHE`` the SQLite verdict cache (default ``~/.cache/vtb-gym/verdicts.sqlite``);
``VTB_JUDGE_CONCURRENCY`` the request bound (default 8). Without a base URL the judge decides
only rubrics with exact checks; the others become ``judge_error`` (never a silent Not Met).
"""

from __future__ import annotations

import os
from pathlib import Path

from vtb_rewards.judge.backends import OpenAIChatBackend
from vtb_rewards.judge.cache import VerdictCache
from vtb_rewards.judge.judge import Judge

DEFAULT_CACHE = Path.home() / ".cache" / "vtb-gym" / "verdicts.sqlite"


def make_judge(
    base_url: str | None = None,
    model: str | None = None,
    *,
    api_key: str | None = None,
    cache_path: str | Path | None = DEFAULT_CACHE,
    max_concurrency: int = 8,
    votes: int = 1,
    temperature: float = 0.0,
) -> Judge:
    """An OpenAI-compatible judge with a persistent cache, or an exact-checks-only judge without ``base_url``."""
    if not base_url:
        return Judge(backend=None)
    if not model:
        raise ValueError("a judge base URL needs a judge model name (VTB_JUDGE_MODEL)")
    backend = OpenAIChatBackend(
        model, base_url, api_key or "EMPTY", max_concurrency=max_concurrency, temperature=temperature
    )
    cache = VerdictCache(cache_path) if cache_path else None
    return Judge(backend, cache=cache, votes=votes)


def judge_from_env() -> Judge:
    env = os.environ
    return make_judge(
        env.get("VTB_JUDGE_BASE_URL"),
        env.get("VTB_JUDGE_MODEL"),
        api_key=env.get("VTB_JUDGE_API_KEY") or env.get("OPENAI_API_KEY"),
        cache_path=env.get("VTB_JUDGE_CACHE") or DEFAULT_CACHE,
        max_concurrency=int(env.get("VTB_JUDGE_CONCURRENCY", "8")),
    )
