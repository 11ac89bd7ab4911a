"""Command-line specs for data, agents and judges.

- data: ``demo``, an official parquet file/dir, a toolkit dir, a project ``tasks.jsonl``/dir
  or ``synth:N:SEED`` / ``synth-v1:N:SEED`` (generated tasks): everything ``vtb_env.loaders.load_tasks`` reads;
- agent: ``ocr-baseline``, ``openai:MODEL@BASE_URL`` (native tool calls; ``openai-text:`` for
  raw text parsed by the env), ``hf:PATH`` (a local checkpoint);
- judge: ``exact`` (programmatic rubric checks only), ``openai:MODEL@BASE_URL``, ``hf:PATH``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from vtb_agents.base import Agent
from vtb_rewards.judge.judge import Judge


class SpecError(ValueError):
    """A spec string could not be understood; the message says what is accepted."""


def _model_at_url(spec: str, prefix: str) -> tuple[str, str]:
    rest = spec[len(prefix) :]
    if "@" not in rest:
        raise SpecError(f"{spec!r}: expected {prefix}MODEL@BASE_URL, e.g. {prefix}my-model@http://127.0.0.1:8000/v1")
    model, url = rest.rsplit("@", 1)
    if not model or not url.startswith(("http://", "https://")):
        raise SpecError(f"{spec!r}: expected {prefix}MODEL@http(s)://HOST:PORT/v1")
    return model, url


def make_agent(
    spec: str,
    *,
    seed: int | None = None,
    temperature: float = 0.0,
    max_tokens: int = 2048,
    extra_body: Mapping[str, Any] | None = None,
) -> Agent:
    """The agent of ``spec``; ``extra_body`` (OpenAI agents only) is merged into every request, e.g.
    ``{"chat_template_kwargs": {"tools_in_user_message": false}}`` for Llama 4 on vLLM."""
    if extra_body and not spec.startswith(("openai:", "openai-text:")):
        raise SpecError(f"extra request fields apply to openai:/openai-text: agents only, not {spec!r}")
    if spec == "ocr-baseline":
        from vtb_agents.ocr_baseline import OcrBaselineAgent

        return OcrBaselineAgent()
    for prefix, mode in (("openai:", "native"), ("openai-text:", "text")):
        if spec.startswith(prefix):
            from vtb_agents.openai_chat import OpenAIChatAgent, Sampling

            model, url = _model_at_url(spec, prefix)
            sampling = Sampling(
                temperature=temperature, seed=seed, max_tokens=max_tokens, extra_body=dict(extra_body or {})
            )
            return OpenAIChatAgent(
                model, url, api_key=os.environ.get("OPENAI_API_KEY"), tool_mode=mode, sampling=sampling
            )  # type: ignore[arg-type]
    if spec.startswith("hf:"):
        from vtb_agents.transformers_agent import TransformersAgent

        return TransformersAgent(spec[3:], seed=seed, temperature=temperature, max_new_tokens=max_tokens)
    raise SpecError(f"unknown agent {spec!r}; use ocr-baseline, openai:MODEL@URL, openai-text:MODEL@URL or hf:PATH")


@dataclass(frozen=True)
class JudgeOptions:
    """Request options of an ``openai:`` judge (``vtb_rewards.judge.backends.OpenAIChatBackend``);
    None omits a field (reasoning models reject ``temperature`` and ``max_tokens``)."""

    temperature: float | None = 0.0
    max_tokens: int | None = 512
    token_field: str = "max_tokens"
    structured: str = "auto"


def judge_from_spec(spec: str, cache_path: str | Path | None = None, options: JudgeOptions = JudgeOptions()) -> Judge:
    from vtb_rewards.judge.cache import VerdictCache

    if spec == "exact":
        return Judge(backend=None)
    cache = VerdictCache(cache_path) if cache_path else None
    if spec.startswith("openai:"):
        from vtb_rewards.judge.backends import OpenAIChatBackend

        model, url = _model_at_url(spec, "openai:")
        key = os.environ.get("VTB_JUDGE_API_KEY") or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        backend = OpenAIChatBackend(
            model,
            url,
            key,
            temperature=options.temperature,
            max_tokens=options.max_tokens,
            token_field=options.token_field,
            structured=options.structured,
        )  # type: ignore[arg-type]
        return Judge(backend, cache=cache)
    if spec.startswith("hf:"):
        from vtb_rewards.judge.backends import TransformersBackend

        return Judge(TransformersBackend.from_pretrained(spec[3:]), cache=cache)
    raise SpecError(f"unknown judge {spec!r}; use exact, openai:MODEL@URL or hf:PATH")
