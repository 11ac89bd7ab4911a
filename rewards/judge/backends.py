"""Judge backends: something that turns prompts into reply texts.

A backend has a ``judge_id`` (the cache key's model part) and ``complete_many(prompts)``, which
returns, per prompt, the reply text or a ``BackendError``; it never raises for one bad call.
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, Sequence


class BackendError(Exception):
    """A judge call failed (transport, server error, timeout, model error)."""


class JudgeBackend(Protocol):
    judge_id: str

    def complete_many(self, prompts: Sequence[str]) -> list[str | BackendError]: ...


class OpenAIChatBackend:
    """Any OpenAI-compatible chat-completions endpoint (vLLM, a hosted API).

    Up to ``max_concurrency`` requests in flight; each has ``timeout_s`` and up to ``retries``
    retries with exponential backoff and jitter on transport errors, timeouts, 408/409/429 and 5xx.
    """

    RETRYABLE_STATUS = frozenset({408, 409, 429})

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str = "EMPTY",
        *,
        max_concurrency: int = 8,
        timeout_s: float = 60.0,
        retries: int = 3,
        backoff_s: float = 1.0,
        temperature: float = 0.0,
        max_tokens: int = 512,
    ):
        import openai

        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.model = model
        self.judge_id = f"openai:{model}@t={temperature}"
        self.max_concurrency = max_concurrency
        self.retries = retries
        self.backoff_s = backoff_s
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._openai = openai
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0)

    def _retryable(self, exc: Exception) -> bool:
        openai = self._openai
        if isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError)):
            return True
        if isinstance(exc, openai.APIStatusError):
            return exc.status_code >= 500 or exc.status_code in self.RETRYABLE_STATUS
        return False

    def complete(self, prompt: str) -> str | BackendError:
        for attempt in range(self.retries + 1):
            try:
                response = self._client.chat.completions.create(
                    model=self.model,
                    messages=[{"role": "user", "content": prompt}],
                    temperature=self.temperature,
                    max_tokens=self.max_tokens,
                )
                content = response.choices[0].message.content if response.choices else None
                return content if content is not None else BackendError("reply has no content")
            except Exception as exc:  # openai raises many types; classify, never propagate
                if attempt < self.retries and self._retryable(exc):
                    time.sleep(self.backoff_s * 2**attempt * (0.5 + random.random()))
                    continue
                return BackendError(f"{type(exc).__name__}: {exc}"[:300])
        raise AssertionError("unreachable")

    def complete_many(self, prompts: Sequence[str]) -> list[str | BackendError]:
        if len(prompts) <= 1:
            return [self.complete(prompt) for prompt in prompts]
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(prompts))) as pool:
            return list(pool.map(self.complete, prompts))


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

    def complete_many(self, prompts: Sequence[str]) -> list[str | BackendError]:
        return [self.complete(prompt) for prompt in prompts]
