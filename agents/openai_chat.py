"""OpenAIChatAgent: a policy served behind any OpenAI-compatible chat-completions endpoint.

A local vLLM server first of all, hosted APIs too. Two modes:

- ``native``: the tool schemas go in ``tools=``; the server parses the model's calls and the
  action is the assistant message dict (``content`` + ``tool_calls``).
- ``text``: the server must not parse. Tools are still sent (so the model's chat template
  renders them, exactly as in RL training) with ``tool_choice="none"``; the action is the raw
  text and the env's parsers read the calls from it.

Requests go through the openai SDK, whose own retry policy handles transient failures
(connection errors, timeouts, 408/409/429/5xx: exponential backoff with jitter, ``Retry-After``
honoured), as for the judges (``vtb_rewards.judge.backends``); a request whose image the server
rejects as too large is resent with the images downscaled. A server that accepts fewer images per prompt than
the dialogue holds (vLLM's "At most N image(s) may be provided in one prompt", set by
``--limit-mm-per-prompt``) fails at once with ``TooManyImagesError``: shrinking cannot help; raise
the server's limit or keep fewer images in the dialogue (env option ``max_dialogue_images``).
Each call is logged as a ``CallRecord``.

Seeds: ``set_episode_seed`` gives the calling thread's episode its own request seed (the
evaluator sets one per (task, sample)); without it ``Sampling.seed`` applies (None: none sent).
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Mapping, NoReturn, Sequence

import httpx
import openai

from vtb_agents.base import Action, BaseAgent, CallRecord, Observation
from vtb_agents.images import EncodedImages, ImagePolicy
from vtb_agents.messages import to_chat_messages


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


SDK_SAMPLING = frozenset({"temperature", "top_p", "max_tokens", "seed", "stop"})  # the rest go in extra_body


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
        self.concurrency = max(1, concurrency)
        self.name = f"openai:{model}"
        self.images = EncodedImages(image_cache_bytes)  # each image encoded once while in a dialogue
        # Enough pooled keep-alive connections for every episode in flight (httpx keeps 20 by default);
        # the hook counts this thread's HTTP attempts (the SDK's retries included) for the call record.
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        http = openai.DefaultHttpxClient(limits=limits, event_hooks={"request": [self._count_attempt]})
        self._http = http  # the transport under the SDK (its request hooks see every attempt)
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=api_key or "EMPTY",
            timeout=timeout_s,
            max_retries=max_retries,
            http_client=http,
        )

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

    # -- one completion ---------------------------------------------------------------------

    def _count_attempt(self, request: httpx.Request) -> None:
        self._local.attempts = getattr(self._local, "attempts", 0) + 1

    def _request(self, observation: Observation, policy: ImagePolicy) -> tuple[dict[str, Any], int]:
        """The keyword arguments of one ``chat.completions.create`` call, and the largest image side sent."""
        messages, largest_side = to_chat_messages(observation, policy, self.images)
        sampling = self._sampling()
        extra_body = {key: sampling.pop(key) for key in list(sampling) if key not in SDK_SAMPLING}
        request: dict[str, Any] = {"model": self.model, "messages": messages, **sampling, "extra_body": extra_body}
        tools = list(observation.get("tools") or [])
        if tools:
            request["tools"] = tools
            if self.tool_mode == "text":
                request["tool_choice"] = "none"
        return request, largest_side

    def _complete(self, observation: Observation) -> tuple[Action, CallRecord]:
        policy, image_shrinks = self.image_policy, 0
        start, self._local.attempts = time.perf_counter(), 0
        while True:
            request, largest_side = self._request(observation, policy)
            try:
                return self._parse(self._client.chat.completions.create(**request), start, image_shrinks)
            except openai.APIStatusError as exc:
                problem = f"HTTP {exc.status_code}: {_error_text(exc)}"
                limit = _image_count_limit(exc)
                if limit is not None:
                    self.record(CallRecord(time.perf_counter() - start, attempts=self._local.attempts, error=problem))
                    raise TooManyImagesError(
                        f"{self.name}: the server accepts at most {limit or '?'} image(s) per prompt "
                        "and this dialogue has "
                        f"{len(observation.get('images') or ())}; raise vLLM's --limit-mm-per-prompt or set the env's "
                        f"max_dialogue_images (server said: {problem})",
                        limit or None,
                    ) from None
                smaller = policy.shrunk(largest_side) if _rejects_image(exc) and largest_side else None
                if smaller is None:
                    self._fail(problem, start)
                policy, image_shrinks = smaller, image_shrinks + 1
            except openai.APIError as exc:  # transport errors and timeouts (after the SDK's retries), bad replies
                # the SDK's "Connection error." wraps what went wrong (httpx's ConnectError: ... refused)
                cause = exc.__cause__ if isinstance(exc, openai.APIConnectionError) and exc.__cause__ else exc
                self._fail(f"{type(cause).__name__}: {cause}", start)

    def _fail(self, problem: str, start: float) -> NoReturn:
        attempts = self._local.attempts
        problem += f" (after {attempts} attempts)" if attempts > 1 else ""
        self.record(CallRecord(latency_s=time.perf_counter() - start, attempts=attempts, error=problem))
        raise AgentCallError(f"{self.name}: {problem}")

    def _parse(self, completion: Any, start: float, image_shrinks: int) -> tuple[Action, CallRecord]:
        if not completion.choices:
            self._fail(f"malformed completion (no choices): {str(completion)[:300]}", start)
        choice, usage = completion.choices[0], completion.usage
        call = CallRecord(
            latency_s=time.perf_counter() - start,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            attempts=self._local.attempts,
            meta={"finish_reason": choice.finish_reason, "image_shrinks": image_shrinks},
        )
        message = choice.message.model_dump(exclude_none=True)  # vLLM's extra fields (reasoning_content) kept
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


def _error_text(exc: openai.APIStatusError) -> str:
    """The server's error message (the SDK hands over the body's ``error`` object)."""
    body = exc.body
    message = body.get("message", body) if isinstance(body, Mapping) else body or exc.response.text
    return str(message)[:500]


_IMAGE_COUNT = re.compile(r"at most (\d+) image|limit[-_]mm[-_]per[-_]prompt|too many images", re.IGNORECASE)


def _image_count_limit(exc: openai.APIStatusError) -> int | None:
    """The server's images-per-prompt limit when this response refuses the image count (0: limit
    not stated), else None. vLLM: "At most 4 image(s) may be provided in one prompt"."""
    if exc.status_code not in (400, 413, 422):
        return None
    match = _IMAGE_COUNT.search(_error_text(exc))
    if match is None:
        return None
    return int(match.group(1)) if match.group(1) else 0


def _rejects_image(exc: openai.APIStatusError) -> bool:
    """Is this a refusal of an image (too large, too many pixels)? 413 always is; 400 when it says so."""
    return exc.status_code == 413 or (exc.status_code == 400 and "image" in _error_text(exc).lower())
