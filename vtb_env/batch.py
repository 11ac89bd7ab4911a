"""Step many episodes at once for LLM rollouts: the tool calls of all episodes run concurrently.

``EnvPool`` holds N environments. ``step(actions)`` parses each action and runs its tool calls
in a thread pool (one task per episode: an episode's calls stay in order, so image names are
deterministic; parsing happens in the worker too, so a long action never holds up the others'
submission) and returns when all are done -- the batch takes
as long as its slowest episode, not the sum. ``submit(i, action)`` returns a Future instead, so
a loop can re-query the policy for fast episodes while a slow tool call is still running::

    pool = EnvPool.make(8, tasks="demo")
    observations = [obs for obs, _ in pool.reset(seed=0)]
    futures = {pool.submit(i, policy(obs)): i for i, obs in enumerate(observations)}
    while futures:
        done = next(as_completed(futures))
        i = futures.pop(done)
        result = done.result()
        if not (result.terminated or result.truncated):
            futures[pool.submit(i, policy(result.observation))] = i
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from vtb_env.env import EpisodeOverError, VisualToolBenchEnv


class StepResult(NamedTuple):
    observation: dict[str, Any]
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


ResetRequest = tuple[int, int | None, Mapping[str, Any] | None]  # environment index, seed, reset options


class EnvPoolBase:
    """What ``EnvPool`` and ``RayEnvPool`` share: ``step`` over ``submit``, and at most one step in
    flight per environment (``_in_flight``: environment index -> the Future of its step)."""

    _in_flight: dict[int, Future[StepResult]]

    def __len__(self) -> int:
        raise NotImplementedError

    def submit(self, index: int, action: str | Mapping[str, Any]) -> Future[StepResult]:
        raise NotImplementedError

    def step(self, actions: Sequence[str | Mapping[str, Any] | None]) -> list[StepResult | None]:
        """One action per environment (None: leave that one alone); waits for all of them."""
        if len(actions) != len(self):
            raise ValueError(f"expected {len(self)} actions, got {len(actions)}")
        futures = [None if action is None else self.submit(i, action) for i, action in enumerate(actions)]
        return [None if future is None else future.result() for future in futures]

    def reset(
        self,
        seed: int | None = None,
        options: Sequence[Mapping[str, Any] | None] | None = None,
        indices: Sequence[int] | None = None,
    ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """Reset the environments ``indices`` (default: all); environment i gets ``seed + i``."""
        indices = list(range(len(self))) if indices is None else list(indices)
        self._require_idle(indices)
        return self._reset_each(
            (i, None if seed is None else seed + i, None if options is None else options[position])
            for position, i in enumerate(indices)
        )

    def _reset_each(self, requests: Iterable[ResetRequest]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """``reset`` of each ``(index, seed, options)``, in order."""
        raise NotImplementedError

    def _require_idle(self, indices: Sequence[int]) -> None:
        for i in indices:
            future = self._in_flight.get(i)
            if future is not None and not future.done():
                raise RuntimeError(f"environment {i} still has a step in flight")


class EnvPool(EnvPoolBase):
    """N ``VisualToolBenchEnv`` stepped together; at most one step in flight per environment."""

    def __init__(self, envs: Sequence[VisualToolBenchEnv], max_workers: int | None = None):
        if not envs:
            raise ValueError("EnvPool needs at least one environment")
        self.envs = list(envs)
        self._executor = ThreadPoolExecutor(max_workers=max_workers or len(self.envs), thread_name_prefix="vtb-tools")
        self._in_flight: dict[int, Future[StepResult]] = {}

    @classmethod
    def make(cls, n: int, max_workers: int | None = None, **env_kwargs: Any) -> "EnvPool":
        """``n`` environments built with the same keyword arguments (tasks, tools, reward, config)."""
        return cls([VisualToolBenchEnv(**env_kwargs) for _ in range(n)], max_workers=max_workers)

    def __len__(self) -> int:
        return len(self.envs)

    def _reset_each(self, requests: Iterable[ResetRequest]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        return [self.envs[i].reset(seed=seed, options=options) for i, seed, options in requests]

    def submit(self, index: int, action: str | Mapping[str, Any]) -> Future[StepResult]:
        """Parse ``action`` and run its tool calls in the pool; the Future gives the step's result."""
        self._require_idle([index])
        env = self.envs[index]
        if env.episode_over:
            raise EpisodeOverError(f"environment {index}: its episode has ended; reset it before stepping it again")
        future = self._executor.submit(lambda: StepResult(*env.end_step(env.execute(env.begin_step(action)))))
        self._in_flight[index] = future
        return future

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        for env in self.envs:
            env.close()
