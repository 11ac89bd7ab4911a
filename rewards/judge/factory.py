"""Build a judge from arguments or environment variables (what the env and `vtb` use by default).

``VTB_JUDGE_BASE_URL`` (e.g. ``http://127.0.0.1:8000/v1``) and ``VTB_JUDGE_MODEL`` select an
OpenAI-compatible judge; ``VTB_JUDGE_API_KEY`` (else ``OPENAI_API_KEY``) its key;
``VTB_JUDGE_CACHE`` the SQLite verdict cache (default ``~/.cache/vtb-gym/verdicts.sqlite``);
``VTB_JUDGE_CONCURRENCY`` the request bound (default 8). Without a base URL the judge decides
only rubrics with exact checks; the others become ``judge_error`` (never a silent Not Met).

The request options are those of ``vtb eval --judge-*`` (``JudgeRequest``): ``VTB_JUDGE_TEMPERATURE``
(default 0; ``none`` sends none), ``VTB_JUDGE_MAX_TOKENS`` (default 512; ``none`` sends none),
``VTB_JUDGE_TOKEN_FIELD`` (``max_tokens`` or ``max_completion_tokens``, which reasoning models
take) and ``VTB_JUDGE_STRUCTURED`` (``auto``, ``json_schema``, ``off``). Options given in code
(``EnvConfig(judge_options=...)``, ``gymnasium.make(..., judge_options=...)``, the TRL reward
function's and verl ``compute_score``'s ``judge_options``) override the variables, field by field.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Mapping

from vtb_rewards.judge.backends import OpenAIChatBackend
from vtb_rewards.judge.cache import VerdictCache
from vtb_rewards.judge.judge import Judge

DEFAULT_CACHE = Path.home() / ".cache" / "vtb-gym" / "verdicts.sqlite"
TOKEN_FIELDS = ("max_tokens", "max_completion_tokens")
STRUCTURED = ("auto", "json_schema", "off")


@dataclass(frozen=True)
class JudgeRequest:
    """What each judge request sends: None leaves a field out (reasoning models reject ``temperature``
    and ``max_tokens``); ``token_field`` names the field the reply bound goes in."""

    temperature: float | None = 0.0
    max_tokens: int | None = 512
    token_field: str = "max_tokens"
    structured: str = "auto"

    def __post_init__(self) -> None:
        bad = []
        if self.temperature is not None and not isinstance(self.temperature, (int, float)):
            bad.append(f"temperature={self.temperature!r} (a number or None)")
        if self.max_tokens is not None and (not isinstance(self.max_tokens, int) or self.max_tokens < 1):
            bad.append(f"max_tokens={self.max_tokens!r} (a positive integer or None)")
        if self.token_field not in TOKEN_FIELDS:
            bad.append(f"token_field={self.token_field!r} (one of {TOKEN_FIELDS})")
        if self.structured not in STRUCTURED:
            bad.append(f"structured={self.structured!r} (one of {STRUCTURED})")
        if bad:
            raise ValueError("invalid judge request options: " + ", ".join(bad))

    @classmethod
    def from_env(cls, overrides: Mapping[str, Any] | None = None) -> "JudgeRequest":
        """The ``VTB_JUDGE_*`` request options, then ``overrides`` (field names; "none" or None leaves one out)."""
        env = os.environ
        request = cls(
            temperature=_optional(env.get("VTB_JUDGE_TEMPERATURE", "0"), float, "VTB_JUDGE_TEMPERATURE"),
            max_tokens=_optional(env.get("VTB_JUDGE_MAX_TOKENS", "512"), int, "VTB_JUDGE_MAX_TOKENS"),
            token_field=env.get("VTB_JUDGE_TOKEN_FIELD", "max_tokens"),
            structured=env.get("VTB_JUDGE_STRUCTURED", "auto"),
        )
        return request.updated(overrides or {})

    def updated(self, overrides: Mapping[str, Any]) -> "JudgeRequest":
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(f"unknown judge options {unknown}; known: {sorted(known)}")
        values = {
            name: None if isinstance(v, str) and v.strip().lower() == "none" else v for name, v in overrides.items()
        }
        return replace(self, **values)


def _optional(text: str, kind: type, name: str) -> Any:
    if text.strip().lower() == "none":
        return None
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: expected a {kind.__name__} or 'none'") from None


def make_judge(
    base_url: str | None = None,
    model: str | None = None,
    *,
    api_key: str | None = None,
    cache_path: str | Path | None = DEFAULT_CACHE,
    max_concurrency: int = 8,
    votes: int = 1,
    request: JudgeRequest = JudgeRequest(),
) -> Judge:
    """An OpenAI-compatible judge with a persistent cache, or an exact-checks-only judge without ``base_url``."""
    if not base_url:
        return Judge(backend=None)
    if not model:
        raise ValueError("a judge base URL needs a judge model name (VTB_JUDGE_MODEL)")
    backend = OpenAIChatBackend(
        model,
        base_url,
        api_key or "EMPTY",
        max_concurrency=max_concurrency,
        temperature=request.temperature,
        max_tokens=request.max_tokens,
        token_field=request.token_field,  # type: ignore[arg-type]
        structured=request.structured,  # type: ignore[arg-type]
    )
    cache = VerdictCache(cache_path) if cache_path else None
    return Judge(backend, cache=cache, votes=votes)


def judge_from_env(options: Mapping[str, Any] | None = None) -> Judge:
    """The judge the ``VTB_JUDGE_*`` variables describe; ``options`` override its request options."""
    env = os.environ
    return make_judge(
        env.get("VTB_JUDGE_BASE_URL"),
        env.get("VTB_JUDGE_MODEL"),
        api_key=env.get("VTB_JUDGE_API_KEY") or env.get("OPENAI_API_KEY"),
        cache_path=env.get("VTB_JUDGE_CACHE") or DEFAULT_CACHE,
        max_concurrency=int(env.get("VTB_JUDGE_CONCURRENCY", "8")),
        request=JudgeRequest.from_env(options),
    )
