"""The actors of one Ray run (``ray_executor``): one ``EpisodeWorker`` per alive CPU node, replaced while
their node lives, each with as many slots as items it may have in flight."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vtb_app.evaluation.ray_worker import EpisodeWorker, RunSpec
from vtb_env.ray_cluster import alive_cpu_nodes

READY_TIMEOUT_S = 120.0  # an actor that cannot be placed by then (its node is full) is given up


@dataclass
class Actor:
    """One started ``EpisodeWorker``: its node, its handle, and how many of its slots hold an item."""

    node_id: str
    handle: Any
    slots: int
    busy: int = 0


class Fleet:
    """The run's actors: one per alive CPU node, replaced while their node lives."""

    def __init__(self, ray: Any, spec: RunSpec, tasks_ref: Any, run_dir: Path, node_token: str, concurrency: int):
        self.ray, self.spec, self.tasks_ref, self.run_dir, self.node_token = ray, spec, tasks_ref, run_dir, node_token
        self.concurrency = concurrency
        self.actor_class = ray.remote(EpisodeWorker)
        self.workers: list[Actor] = []
        self.short_handed = True  # at start, and after losing a worker

    def fill(self) -> None:
        """Start an actor on every alive CPU node that has none, and wait until they are placed."""
        self.short_handed = False
        nodes = alive_cpu_nodes(self.ray)
        total_cpus = sum(cpus for _, cpus in nodes)
        in_flight_total = max(self.concurrency, total_cpus)
        staffed = {worker.node_id for worker in self.workers}
        starting = []
        for node_id, cpus in nodes:
            if node_id in staffed:
                continue
            slots = max(1, math.ceil(in_flight_total * cpus / total_cpus))
            handle = self.actor_class.options(
                num_cpus=1,
                max_concurrency=slots,
                max_restarts=0,
                max_task_retries=0,
                scheduling_strategy=self._on_node(node_id),
            ).remote(self.spec, self.tasks_ref, cpus, str(self.run_dir), self.node_token)
            starting.append(Actor(node_id, handle, slots))
        if not starting:
            return
        ready_refs = {worker.handle.ready.remote(): worker for worker in starting}
        done, late = self.ray.wait(list(ready_refs), num_returns=len(ready_refs), timeout=READY_TIMEOUT_S)
        for ref in done:
            try:
                self.ray.get(ref)
            except self.ray.exceptions.RayError:
                continue  # its node died while it started
            self.workers.append(ready_refs[ref])
        for ref in late:
            self.ray.kill(ready_refs[ref].handle)

    def _on_node(self, node_id: str) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return NodeAffinitySchedulingStrategy(node_id, soft=False)

    def free(self) -> list[Actor]:
        return [worker for worker in self.workers if worker.busy < worker.slots]

    def lose(self, worker: Actor) -> None:
        if worker in self.workers:
            self.workers.remove(worker)
            self.ray.kill(worker.handle)
            self.short_handed = True

    def close(self, graceful: bool) -> None:
        """Stop the actors: after a finished run let them close their envs first; after an error or Ctrl-C kill them."""
        if graceful:
            closing = [worker.handle.close.remote() for worker in self.workers]
            self.ray.wait(closing, num_returns=len(closing), timeout=30)
        for worker in self.workers:
            self.ray.kill(worker.handle)
        self.workers.clear()
