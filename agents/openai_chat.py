"""OpenAIChatAgent: a policy served behind any OpenAI-compatible chat-completions endpoint.

A local vLLM server first of all, hosted APIs too. Two modes:

- ``native``: the tool schemas go in ``tools=``; the server parses the model's calls and the
  action is the assistant message dict (``content`` + ``tool_calls``).
- ``text``: the server must not parse. Tools are still sent (so the model's chat template
  renders them, exactly as in RL training) with ``tool_choice="none"``; the action is the raw
  text and the env's parsers read the calls from it.

Transient failures (connection errors, timeouts, 408/409/429/5xx) are retried with
exponential backoff (``Retry-After`` honoured); a request whose image the server rejects as too
large is resent with the images downscaled. A server that accepts fewer images per prompt than
the dialogue holds (vLLM's "At most N image(s) may be provided in one prompt", set by
``--limit-mm-per-prompt``) fails at once with ``TooManyImagesError``: shrinking cannot help; raise
the server's limit or keep fewer images in the dialogue (env option ``max_dialogue_images``).
Each call is logged as a ``CallRecord``.

Seeds: ``set_episode_seed`` gives the calling thread's episode its own request seed (the
evaluator sets one per (task, sample)); without it ``Sampling.seed`` applies (None: none sent).
"""

from __future__ import annotations

import random
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Mapping, NoReturn, Sequence

import httpx

from vtb_agents.base import Action, BaseAgent, CallRecord, Observation
from vtb_agents.images import EncodedImages, ImagePolicy
from vtb_agents.messages import to_chat_messages

TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
MAX_BACKOFF_S = 30.0


class AgentCallError(RuntimeError):
    """A model call failed for good (non-transient error, or retries exhausted)."""


class TooManyImagesError(AgentCallError):
    """The server takes at most ``limit`` images per prompt and the dialogue holds more."""

    def __init__(self, message: str, limit: int | None):
        super().__init__(message)
        self.limit = limit


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters sent with every request (None = the server's default)."""

    temperature: float | None = 0.0
    top_p: float | None = None
    max_tokens: int | None = 2048
    seed: int | None = None
    stop: tuple[str, ...] = ()
    extra_body: Mapping[str, Any] = field(default_factory=dict)  # e.g. {"chat_template_kwargs": {...}}

    def to_request(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            key: value
            for key, value in (
                ("temperature", self.temperature),
                ("top_p", self.top_p),
                ("max_tokens", self.max_tokens),
                ("seed", self.seed),
            )
            if value is not None
        }
        if self.stop:
            body["stop"] = list(self.stop)
        body.update(self.extra_body)
        return body


class OpenAIChatAgent(BaseAgent):
    """Chat-completions client; see the module docstring for modes and failure handling."""

    def __init__(
        self,
        model: str,
        base_url: str = "http://127.0.0.1:8000/v1",
        *,
        api_key: str | None = None,
        tool_mode: Literal["native", "text"] = "native",
        sampling: Sampling | None = None,
        image_policy: ImagePolicy | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 4,
        backoff_s: float = 1.0,
        concurrency: int = 8,
        max_connections: int = 256,
        image_cache_bytes: int = 512 << 20,
    ):
        super().__init__()
        if tool_mode not in ("native", "text"):
            raise ValueError(f"tool_mode must be 'native' or 'text', got {tool_mode!r}")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.tool_mode = tool_mode
        self.sampling = sampling or Sampling()
        self.image_policy = image_policy or ImagePolicy()
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.concurrency = max(1, concurrency)
        self.name = f"openai:{model}"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.images = EncodedImages(image_cache_bytes)  # each image encoded once while in a dialogue
        # Enough pooled keep-alive connections for every episode in flight (httpx keeps 20 by default).
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout_s, limits=limits)

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "model": self.model,
            "base_url": self.base_url,
            "tool_mode": self.tool_mode,
            "sampling": self.sampling.to_request(),
            "image_policy": asdict(self.image_policy),
        }

    def set_episode_seed(self, seed: int | None) -> None:
        """The request seed for this thread's episode (None: no seed is sent)."""
        self._local.seed = seed

    def _sampling(self) -> dict[str, Any]:
        body = self.sampling.to_request()
        if hasattr(self._local, "seed"):
            body.pop("seed", None)
            if self._local.seed is not None:
                body["seed"] = self._local.seed
        return body

    def act(self, observation: Observation) -> Action:
        action, call = self._complete(observation)
        self.record(call)
        return action

    def act_batch(self, observations: Sequence[Observation]) -> list[Action]:
        """Requests in parallel (HTTP servers batch them); call records land in the caller's thread."""
        with ThreadPoolExecutor(max_workers=min(self.concurrency, max(1, len(observations)))) as pool:
            results = list(pool.map(self._complete, observations))
        for _, call in results:
            self.record(call)
        return [action for action, _ in results]

    def close(self) -> None:
        self._client.close()

    # -- one completion, with retries -------------------------------------------------------

    def _request_body(self, observation: Observation, policy: ImagePolicy) -> tuple[dict[str, Any], int]:
        messages, largest_side = to_chat_messages(observation, policy, self.images)
        body: dict[str, Any] = {"model": self.model, "messages": messages, **self._sampling()}
        tools = list(observation.get("tools") or [])
        if tools:
            body["tools"] = tools
            if self.tool_mode == "text":
                body["tool_choice"] = "none"
        return body, largest_side

    def _complete(self, observation: Observation) -> tuple[Action, CallRecord]:
        policy = self.image_policy
        body, largest_side = self._request_body(observation, policy)
        start = time.perf_counter()
        attempts = 0
        image_shrinks = 0
        while True:
            attempts += 1
            try:
                response = self._client.post("/chat/completions", json=body)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                problem, retry_after = f"{type(exc).__name__}: {exc}", None
            else:
                if response.status_code == 200:
                    return self._parse(response, start, attempts, image_shrinks)
                problem = f"HTTP {response.status_code}: {_error_text(response)}"
                retry_after = _retry_after(response)
                limit = _image_count_limit(response)
                if limit is not None:
                    self.record(CallRecord(latency_s=time.perf_counter() - start, attempts=attempts, error=problem))
                    raise TooManyImagesError(
                        f"{self.name}: the server accepts at most {limit or '?'} image(s) per prompt "
                        "and this dialogue has "
                        f"{len(observation.get('images') or ())}; raise vLLM's --limit-mm-per-prompt or set the env's "
                        f"max_dialogue_images (server said: {problem})",
                        limit or None,
                    )
                if _rejects_image(response) and largest_side:
                    smaller = policy.shrunk(largest_side)
                    if smaller is None:
                        self._fail(problem, start, attempts)
                    policy, image_shrinks = smaller, image_shrinks + 1
                    body, largest_side = self._request_body(observation, policy)
                    continue
                if response.status_code not in TRANSIENT_STATUS:
                    self._fail(problem, start, attempts)
            if attempts > self.max_retries:
                self._fail(f"{problem} (after {attempts} attempts)", start, attempts)
            delay = retry_after if retry_after is not None else self.backoff_s * 2 ** (attempts - 1)
            time.sleep(min(MAX_BACKOFF_S, delay) * (1 + 0.1 * random.random()))

    def _fail(self, problem: str, start: float, attempts: int) -> NoReturn:
        self.record(CallRecord(latency_s=time.perf_counter() - start, attempts=attempts, error=problem))
        raise AgentCallError(f"{self.name}: {problem}")

    def _parse(
        self, response: httpx.Response, start: float, attempts: int, image_shrinks: int
    ) -> tuple[Action, CallRecord]:
        latency = time.perf_counter() - start
        try:
            payload = response.json()
            message = payload["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            self._fail(f"malformed completion ({exc}): {response.text[:300]}", start, attempts)
        usage = payload.get("usage") or {}
        call = CallRecord(
            latency_s=latency,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            attempts=attempts,
            meta={"finish_reason": payload["choices"][0].get("finish_reason"), "image_shrinks": image_shrinks},
        )
        content = message.get("content") or ""
        if self.tool_mode == "text":
            return content, call
        action: dict[str, Any] = {"role": "assistant", "content": content}
        if message.get("tool_calls"):
            action["tool_calls"] = message["tool_calls"]
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if reasoning:
            action["reasoning_content"] = reasoning
        return action, call


def _error_text(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
        if isinstance(error, Mapping):
            return str(error.get("message", error))[:500]
        if error:
            return str(error)[:500]
    except ValueError:
        pass
    return response.text[:500]


_IMAGE_COUNT = re.compile(r"at most (\d+) image|limit[-_]mm[-_]per[-_]prompt|too many images", re.IGNORECASE)


def _image_count_limit(response: httpx.Response) -> int | None:
    """The server's images-per-prompt limit when this response refuses the image count (0: limit
    not stated), else None. vLLM: "At most 4 image(s) may be provided in one prompt"."""
    if response.status_code not in (400, 413, 422):
        return None
    match = _IMAGE_COUNT.search(_error_text(response))
    if match is None:
        return None
    return int(match.group(1)) if match.group(1) else 0


def _rejects_image(response: httpx.Response) -> bool:
    """Is this a refusal of an image (too large, too many pixels)? 413 always is; 400 when it says so."""
    if response.status_code == 413:
        return True
    return response.status_code == 400 and "image" in _error_text(response).lower()


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
