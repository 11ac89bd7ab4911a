"""Judge backends: something that turns prompts into reply texts.

A backend has a ``judge_id`` (the cache key's model part) and ``complete_many(prompts)``, which
returns, per prompt, the reply text or a ``BackendError``; it never raises for one bad call.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, Mapping, Protocol, Sequence


class BackendError(Exception):
    """A judge call failed (transport, server error, timeout, model error)."""


class JudgeBackend(Protocol):
    judge_id: str

    def complete_many(
        self, prompts: Sequence[str], schema: Mapping[str, Any] | None = None
    ) -> list[str | BackendError]:
        """One reply per prompt; ``schema`` (``{"name", "schema"}``) asks for structured output where supported."""
        ...


class OpenAIChatBackend:
    """Any OpenAI-compatible chat-completions endpoint (vLLM, a hosted API).

    Up to ``max_concurrency`` requests in flight; each has ``timeout_s`` and up to ``retries``
    retries by the openai SDK's own policy (as for the agents, ``vtb_agents.openai_chat``): exponential
    backoff with jitter on transport errors, timeouts, 408/409/429 and 5xx, ``Retry-After`` honoured.

    Reasoning models (o4-mini, GPT-5 class) reject ``temperature`` and ``max_tokens``:
    ``temperature=None`` / ``max_tokens=None`` leave them out, and ``token_field`` names the field
    the bound goes in (``max_completion_tokens`` for those models). ``structured``: "json_schema"
    sends the reply's JSON schema as ``response_format``; "auto" does too until the server refuses
    it (a 400/422 naming ``response_format``/``json_schema``), then sends plain prompts; "off" never.
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str = "EMPTY",
        *,
        max_concurrency: int = 8,
        timeout_s: float = 60.0,
        retries: int = 3,
        temperature: float | None = 0.0,
        max_tokens: int | None = 512,
        token_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
        structured: Literal["auto", "json_schema", "off"] = "auto",
    ):
        import openai

        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.model = model
        if token_field not in ("max_tokens", "max_completion_tokens") or structured not in (
            "auto",
            "json_schema",
            "off",
        ):
            raise ValueError(f"bad judge request options: token_field={token_field!r}, structured={structured!r}")
        self.judge_id = f"openai:{model}@t={temperature}"
        self.max_concurrency = max_concurrency
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.token_field = token_field
        self.structured = structured
        self._openai = openai
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=retries)

    def request(self, prompt: str, schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The keyword arguments of one chat-completions call (what the server receives)."""
        kwargs: dict[str, Any] = {"model": self.model, "messages": [{"role": "user", "content": prompt}]}
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.max_tokens is not None:
            kwargs[self.token_field] = self.max_tokens
        if schema is not None and self.structured != "off":
            kwargs["response_format"] = {"type": "json_schema", "json_schema": {**schema, "strict": True}}
        return kwargs

    def _refuses_schema(self, exc: Exception) -> bool:
        if (
            self.structured != "auto"
            or not isinstance(exc, self._openai.APIStatusError)
            or exc.status_code not in (400, 422)
        ):
            return False
        text = str(exc).lower()
        return "response_format" in text or "json_schema" in text or "structured" in text

    def complete(self, prompt: str, schema: Mapping[str, Any] | None = None) -> str | BackendError:
        try:
            return _content(self._client.chat.completions.create(**self.request(prompt, schema)))
        except Exception as exc:  # openai raises many types (after its retries); never propagate
            if schema is not None and self._refuses_schema(exc):
                self.structured = "off"  # this server has no structured output: plain prompts from now on
                return self.complete(prompt, None)
            return BackendError(f"{type(exc).__name__}: {exc}"[:300])

    def complete_many(
        self, prompts: Sequence[str], schema: Mapping[str, Any] | None = None
    ) -> list[str | BackendError]:
        if len(prompts) <= 1:
            return [self.complete(prompt, schema) for prompt in prompts]
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(prompts))) as pool:
            return list(pool.map(lambda prompt: self.complete(prompt, schema), prompts))


def _content(response: Any) -> str | BackendError:
    """The reply's ``content`` only: a reasoning model's ``reasoning_content`` / ``reasoning`` field
    is its thinking, never its verdict (a reply with only reasoning ran out of tokens)."""
    message = response.choices[0].message if response.choices else None
    content = getattr(message, "content", None)
    if content:
        return content
    extra = getattr(message, "model_extra", None) or {}
    if any(extra.get(field) for field in ("reasoning_content", "reasoning")):
        return BackendError("reply has reasoning but no content (the judge ran out of tokens while thinking?)")
    return content if content is not None else BackendError("reply has no content")


class TransformersBackend:
    """A local causal LM through ``transformers`` (greedy decoding = temperature 0)."""

    def __init__(self, model: Any, tokenizer: Any, *, max_new_tokens: int = 256, judge_id: str | None = None):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        name = judge_id or getattr(model.config, "_name_or_path", "") or type(model).__name__
        self.judge_id = f"hf:{name}"
        self._lock = threading.Lock()  # one generate() at a time on a shared model

    @classmethod
    def from_pretrained(cls, path: str | Path, **kwargs: Any) -> "TransformersBackend":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(path))
        model = AutoModelForCausalLM.from_pretrained(str(path))
        return cls(model, tokenizer, judge_id=kwargs.pop("judge_id", str(path)), **kwargs)

    def _encode(self, prompt: str) -> Any:
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], add_generation_prompt=True, return_tensors="pt", return_dict=True
            )["input_ids"]
        return self.tokenizer(prompt, return_tensors="pt")["input_ids"]

    def complete(self, prompt: str) -> str | BackendError:
        import torch

        try:
            with self._lock, torch.no_grad():
                input_ids = self._encode(prompt)
                output = self.model.generate(
                    input_ids,
                    attention_mask=torch.ones_like(input_ids),
                    max_new_tokens=self.max_new_tokens,
                    do_sample=False,
                    pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
                )
            return self.tokenizer.decode(output[0, input_ids.shape[1] :], skip_special_tokens=True)
        except Exception as exc:  # a model failure is one rubric's judge_error, not a crash
            return BackendError(f"{type(exc).__name__}: {exc}"[:300])

    def complete_many(
        self, prompts: Sequence[str], schema: Mapping[str, Any] | None = None
    ) -> list[str | BackendError]:
        """Replies in order; ``schema`` is not enforced (the prompt states the format)."""
        return [self.complete(prompt) for prompt in prompts]
