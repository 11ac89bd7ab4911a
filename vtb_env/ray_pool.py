"""``RayEnvPool``: the ``EnvPool`` API (``reset``, ``submit``, ``step``, ``close``) over Ray actors.

A trainer's rollout loop (TRL's rollout path, a verl agent loop) keeps generating on its GPUs
while the environments, their parsing and their sandboxed tool calls run in actors on CPU nodes::

    pool = RayEnvPool.make(256, address="auto", tasks="demo")
    observations = [obs for obs, _ in pool.reset(seed=0)]
    results = pool.step([policy(obs) for obs in observations])

The N environments are split over ``actors`` actors (default: one per CPU of the cluster, at
most N) placed with Ray's ``SPREAD`` strategy; each actor steps its environments in parallel
threads and has one sandbox slot per environment it holds (a step runs its tool calls in order,
so an environment never needs two).

Images cross the wire once each: an actor puts every new image of an episode into Ray's
object store (``ray.put``) and sends references; the pool fetches each reference once and
rebuilds the observation (PIL images and data URLs) from its cache, so a step ships the text of
the dialogue and the new images only. ``env_kwargs`` are pickled to the actors: pass tasks as a
spec string or a list (the list travels once, through the object store), and a picklable reward.
"""

from __future__ import annotations

import math
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Iterable, Mapping

from vtb_env.batch import EnvPoolBase, ResetRequest, StepResult
from vtb_env.observation import image_parts
from vtb_env.ray_cluster import alive_cpu_nodes, connect


class EnvHost:
    """A Ray actor holding some of the pool's environments; returns observations with image references."""

    def __init__(self, count: int, env_kwargs: Mapping[str, Any], tasks: Any = None):
        from vtb_env.env import VisualToolBenchEnv
        from vtb_env.sandbox.shared import PROFILES, shared_sandbox

        for profile in PROFILES:  # one slot per environment held: each runs at most one call at a time
            shared_sandbox(profile, slots=count)
        kwargs = dict(env_kwargs)
        if tasks is not None:
            kwargs["tasks"] = tasks
        self.envs = [VisualToolBenchEnv(**kwargs) for _ in range(count)]
        self.sent: list[dict[str, Any]] = [{} for _ in range(count)]  # per env: image name -> its ObjectRef

    def reset(
        self, local: int, seed: int | None, options: Mapping[str, Any] | None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        self.sent[local] = {}
        observation, info = self.envs[local].reset(seed=seed, options=options)
        return self._wire(local, observation), info

    def step(self, local: int, action: Any) -> StepResult:
        observation, reward, terminated, truncated, info = self.envs[local].step(action)
        return StepResult(self._wire(local, observation), reward, terminated, truncated, info)

    def close(self) -> None:
        for env in self.envs:
            env.close()

    def _wire(self, local: int, observation: dict[str, Any]) -> dict[str, Any]:
        """The observation with each image (and its data URL) replaced by an object-store reference, put once."""
        import ray

        sent = self.sent[local]
        parts = image_parts(observation["messages"])
        refs = []
        for part, image, name in zip(parts, observation["images"], observation["image_names"], strict=False):
            if name not in sent:
                url = part["image_url"]["url"] if part["type"] == "image_url" else None
                sent[name] = ray.put((image, url))
            refs.append(sent[name])
            if part["type"] == "image_url":
                part["image_url"] = {"url": None}  # observation() made fresh containers: safe to edit
        return {**observation, "images": refs}


class RayEnvPool(EnvPoolBase):
    """N ``VisualToolBenchEnv`` in Ray actors, stepped together; at most one step in flight per environment."""

    def __init__(
        self,
        n: int,
        env_kwargs: Mapping[str, Any] | None = None,
        *,
        actors: int | None = None,
        address: str | None = None,
        temp_dir: str | None = None,
    ):
        if n < 1:
            raise ValueError("RayEnvPool needs at least one environment")
        ray = connect(address, temp_dir=temp_dir)
        self._ray = ray
        kwargs = dict(env_kwargs or {})
        tasks = kwargs.pop("tasks", None)
        tasks_arg = ray.put(list(tasks)) if isinstance(tasks, (list, tuple)) else tasks  # one copy for all actors
        cluster_cpus = sum(cpus for _, cpus in alive_cpu_nodes(ray)) or 1
        actors = max(1, min(n, actors or cluster_cpus))
        per_actor = math.ceil(n / actors)
        counts = [min(per_actor, n - start) for start in range(0, n, per_actor)]
        host = ray.remote(EnvHost)
        self._hosts = [
            host.options(num_cpus=1, max_concurrency=count, scheduling_strategy="SPREAD").remote(
                count, kwargs, tasks_arg
            )
            for count in counts
        ]
        self._where = [
            (h, local) for h, count in enumerate(counts) for local in range(count)
        ]  # env index -> (actor, its env)
        self._images: list[dict[Any, tuple[Any, str | None]]] = [{} for _ in range(n)]  # per env: ref -> (PIL, url)
        self._executor = ThreadPoolExecutor(max_workers=n, thread_name_prefix="vtb-ray-pool")
        self._in_flight: dict[int, Future[StepResult]] = {}
        self.images_fetched = 0  # image payloads pulled from the object store (each image once)

    @classmethod
    def make(
        cls,
        n: int,
        *,
        actors: int | None = None,
        address: str | None = None,
        temp_dir: str | None = None,
        **env_kwargs: Any,
    ) -> "RayEnvPool":
        """``n`` environments built with the same keyword arguments (tasks, tools, reward, config)."""
        return cls(n, env_kwargs, actors=actors, address=address, temp_dir=temp_dir)

    def __len__(self) -> int:
        return len(self._where)

    def _reset_each(self, requests: Iterable[ResetRequest]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        indices, refs = [], []
        for i, seed, options in requests:
            self._images[i] = {}
            h, local = self._where[i]
            refs.append(self._hosts[h].reset.remote(local, seed, options))
            indices.append(i)
        return [
            (self._resolve(i, observation), info)
            for i, (observation, info) in zip(indices, self._ray.get(refs), strict=True)
        ]

    def submit(self, index: int, action: str | Mapping[str, Any]) -> Future[StepResult]:
        """Send ``action`` to its environment's actor; the Future gives the step's result."""
        self._require_idle([index])
        h, local = self._where[index]
        ref = self._hosts[h].step.remote(local, action)
        future = self._executor.submit(self._finish, index, ref)
        self._in_flight[index] = future
        return future

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        closing = [host.close.remote() for host in self._hosts]
        self._ray.wait(closing, num_returns=len(closing), timeout=30)  # a lost actor has nothing left to close
        for host in self._hosts:
            self._ray.kill(host)
        self._hosts = []

    def _finish(self, index: int, ref: Any) -> StepResult:
        result = StepResult(*self._ray.get(ref))
        return result._replace(observation=self._resolve(index, result.observation))

    def _resolve(self, index: int, observation: dict[str, Any]) -> dict[str, Any]:
        """Put the images (and data URLs) back from the references, fetching only the new ones."""
        cache = self._images[index]
        new = [ref for ref in observation["images"] if ref not in cache]
        if new:
            cache.update(zip(new, self._ray.get(new), strict=True))
            self.images_fetched += len(new)
        payloads = [cache[ref] for ref in observation["images"]]
        for part, (_, url) in zip(image_parts(observation["messages"]), payloads, strict=False):
            if part["type"] == "image_url":
                part["image_url"] = {"url": url}
        return {**observation, "images": [image for image, _ in payloads]}
