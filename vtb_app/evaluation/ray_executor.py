"""``vtb eval --executor ray``: the episodes of a run in Ray actors, the records written by the driver.

One ``EpisodeWorker`` actor per alive node with CPUs. It owns its environments (one per
episode in flight), its agent and judge, one tool registry and this process's sandbox pools
sized to the node's CPUs; it builds all of them from a ``RunSpec`` (strings and plain
dataclasses), so nothing live crosses the wire. The tasks travel once, through the object store
(``ray.put``). Records come back as their JSON line (``records.encode_record``), which every
record leaving a work item is known to encode to; pickling, Ray's wire format, gives up on
nesting far shallower (a model's 600-level tool arguments).

The work is the threads executor's, planned by ``runner.plan_run`` and done by the same work
items (``runner.evaluate_item`` plays and judges one (task, sample) with its own seed;
``judging.rejudge_item`` judges an incompletely judged record of a resumed run again), so the
records are the same. The driver alone appends them to ``records.jsonl`` through
``runner.RecordKeeper``, one per item, so the run file keeps its format and its resume rules:

- a driver killed mid-run loses the episodes in flight (they were never recorded) and its
  actors die with it; ``--resume`` runs those again;
- a worker that dies mid-episode (process killed, node lost) never returned a record: its
  episodes go back to the queue and run on another actor (a fresh one is started on that node
  while it is alive). An episode whose worker died ``MAX_ATTEMPTS`` times is recorded as an
  ``error`` (retried on resume), so a poison episode cannot loop forever;
- each record is appended once, when its result reaches the driver: nothing is duplicated.

Agents and judges must be shareable by every actor: HTTP endpoints (``openai:``,
``openai-text:``), the ``exact`` judge, and the OCR baseline (stateless and deterministic; each
actor builds its own). ``hf:`` checkpoints hold model weights in the driver's process and are
refused: serve the model over HTTP (vLLM) instead.

Images go straight into the run directory when the worker's node sees it (a shared filesystem,
or the driver's own node); otherwise the worker sends the episode's PNGs with its record and the
driver writes them.

Here the driver (``evaluate_on_ray``: the queue, retries, the records); the actor and its ``RunSpec`` in
``ray_worker``; starting, replacing and stopping the actors in ``ray_fleet``.
"""

from __future__ import annotations

import json
import os
import secrets
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from vtb_app.evaluation.progress import Progress
from vtb_app.evaluation.ray_fleet import Actor, Fleet
from vtb_app.evaluation.ray_worker import NODE_CHECK, EpisodeWorker, RunSpec, check_shareable
from vtb_app.evaluation.records import RECORDS_FILE, RunLog, encode_record, error_record, record_key
from vtb_app.evaluation.runner import EvalResult, RecordKeeper, plan_run, sample_seed, task_summary
from vtb_env.ray_cluster import connect, import_ray
from vtb_env.tasks import Task

__all__ = ["MAX_ATTEMPTS", "EpisodeWorker", "RunSpec", "check_shareable", "evaluate_on_ray"]

MAX_ATTEMPTS = 3  # workers lost by one episode before it is recorded as an error


def evaluate_on_ray(
    tasks: Sequence[Task],
    spec: RunSpec,
    run_dir: str | Path,
    *,
    samples: int = 1,
    concurrency: int = 1,
    resume: bool = False,
    progress: bool = True,
    address: str | None = None,
    temp_dir: str | Path | None = None,
    log_to_driver: bool = False,
) -> EvalResult:
    """``runner.evaluate`` with the work items in Ray actors (see the module docstring).

    At least one item per CPU of the cluster is in flight, or ``concurrency`` if larger,
    split over the nodes by their CPUs.
    """
    check_shareable(spec.agent, spec.judge)
    run_dir = Path(run_dir).resolve()
    path = run_dir / RECORDS_FILE
    plan = plan_run(tasks, samples, path, resume)
    if not plan.size:
        return EvalResult(run_dir, 0, 0, 0, len(plan.finished))
    ray = import_ray()
    owns_ray = not ray.is_initialized()
    connect(address, temp_dir=temp_dir, log_to_driver=log_to_driver)
    node_token = secrets.token_hex(16)
    images = run_dir / "images"
    images.mkdir(parents=True, exist_ok=True)
    (images / NODE_CHECK).write_text(node_token)
    jobs = [_Job(task.id, sample) for task, sample in plan.items] + [
        _Job(r["task_id"], r["sample"], r) for r in plan.rejudge
    ]
    fleet = Fleet(ray, spec, ray.put(list(tasks)), run_dir, node_token, concurrency)
    finished_run = False
    try:
        with RunLog(path) as log:
            keep = RecordKeeper(log, Progress(plan.size, enabled=progress))
            _drive(ray, fleet, jobs, {task.id: task for task in tasks}, spec, run_dir, keep)
        finished_run = True
    finally:  # items still in flight on Ctrl-C or an error were never recorded: --resume runs them
        fleet.close(graceful=finished_run)
        (images / NODE_CHECK).unlink(missing_ok=True)
        if owns_ray:
            ray.shutdown()
    return EvalResult(run_dir, len(plan.items), keep.ok, keep.errors, len(plan.finished), len(plan.rejudge))


@dataclass
class _Job:
    """One work item on its way through the fleet: an episode to play, or ``saved`` to judge again."""

    task_id: str
    sample: int
    saved: dict[str, Any] | None = None
    attempts: int = 0  # workers it has lost

    def submit(self, worker: Actor) -> Any:
        return (
            worker.handle.rejudge.remote(encode_record(self.saved))
            if self.saved is not None
            else worker.handle.play.remote(self.task_id, self.sample)
        )

    def failed(self, task: Task, spec: RunSpec, error: str) -> dict[str, Any]:
        """The error record of a job whose result never came (as the work items record their own failures)."""
        if self.saved is not None:
            return error_record(self.saved, f"re-judging failed: {error}")
        base = {
            "key": record_key(task.id, self.sample),
            "task_id": task.id,
            "sample": self.sample,
            "seed": sample_seed(spec.seed, task.id, self.sample),
            "config_hash": spec.config_hash,
            **spec.identity,
            "task": task_summary(task),
        }
        return error_record(base, error)


def _drive(
    ray: Any,
    fleet: Fleet,
    jobs: Sequence[_Job],
    tasks: Mapping[str, Task],
    spec: RunSpec,
    run_dir: Path,
    keep: RecordKeeper,
) -> None:
    """Keep every worker's slots busy and hand each result to ``keep`` as it comes."""
    queue: deque[_Job] = deque(jobs)
    in_flight: dict[Any, tuple[Actor, _Job]] = {}
    while queue or in_flight:
        if fleet.short_handed:
            fleet.fill()
        if not fleet.workers and not in_flight:
            raise RuntimeError("no Ray node with a free CPU could start an episode worker")
        for worker in fleet.free():
            while queue and worker.busy < worker.slots:
                job = queue.popleft()
                in_flight[job.submit(worker)] = (worker, job)
                worker.busy += 1
        ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=5.0)
        for ref in ready:
            worker, job = in_flight.pop(ref)
            worker.busy -= 1
            try:
                line, pngs = ray.get(ref)
            except ray.exceptions.RayTaskError as exc:  # a bug outside the work item's own error handling
                keep(job.failed(tasks[job.task_id], spec, f"RayTaskError: {exc}"))
                continue
            except ray.exceptions.RayError as exc:  # the worker or its node died: this item never finished
                fleet.lose(worker)
                job.attempts += 1
                if job.attempts < MAX_ATTEMPTS:
                    queue.appendleft(job)
                else:
                    keep(
                        job.failed(tasks[job.task_id], spec, f"{type(exc).__name__}: worker lost {MAX_ATTEMPTS} times")
                    )
                continue
            try:
                record = json.loads(line)
                _write_images(run_dir, pngs)
            except Exception as exc:  # a result that cannot be stored is this item's error, never the run's
                record = job.failed(
                    tasks[job.task_id], spec, f"result could not be stored: {type(exc).__name__}: {exc}"
                )
            keep(record)


def _write_images(run_dir: Path, pngs: Mapping[str, bytes]) -> None:
    """The PNGs a worker without the run dir sent (relative paths ``images/<hash>.png``), each written once."""
    for relpath, data in pngs.items():
        target = (run_dir / relpath).resolve()
        if target.parent != (run_dir / "images").resolve():
            raise ValueError(f"worker sent an image path outside images/: {relpath!r}")
        if not target.exists():
            tmp = target.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            tmp.replace(target)
