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
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
import tempfile
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from vtb_app.evaluation.judging import JudgePasses, rejudge_item
from vtb_app.evaluation.progress import Progress
from vtb_app.evaluation.records import RECORDS_FILE, RunLog, encode_record, error_record, record_key
from vtb_app.evaluation.runner import (
    EvalResult,
    RecordKeeper,
    _ImageStore,
    evaluate_item,
    plan_run,
    sample_seed,
    task_summary,
)
from vtb_app.evaluation.specs import JudgeOptions, SpecError
from vtb_env.config import EnvConfig
from vtb_env.ray_cluster import alive_cpu_nodes, connect, import_ray
from vtb_env.tasks import Task
from vtb_rewards.compose import RewardConfig

MAX_ATTEMPTS = 3  # workers lost by one episode before it is recorded as an error
READY_TIMEOUT_S = 120.0  # an actor that cannot be placed by then (its node is full) is given up
_NODE_CHECK = ".ray-node-check"  # in images/: a worker that reads the driver's token shares its filesystem


@dataclass(frozen=True)
class RunSpec:
    """What an actor needs to rebuild the driver's agent, judge, env and scoring: plain values only."""

    agent: str
    judge: str
    env_config: EnvConfig
    ablation: str = "strong"
    agent_options: Mapping[str, Any] = field(default_factory=dict)  # make_agent keywords: seed, temperature, ...
    judge_options: JudgeOptions = JudgeOptions()
    scoring: RewardConfig = field(default_factory=RewardConfig)
    passes: JudgePasses = JudgePasses()
    mode_labels: Mapping[str, str] = field(default_factory=dict)
    seed: int | None = 0  # the run's base seed (runner.sample_seed); None: no seed
    config_hash: str = ""
    identity: Mapping[str, Any] = field(default_factory=dict)
    save_images: bool = True


def check_shareable(agent: str, judge: str) -> None:
    """Refuse agents and judges that live in this process (model weights) with what to do instead."""
    for role, spec in (("agent", agent), ("judge", judge)):
        if spec.startswith("hf:"):
            raise SpecError(
                f"--executor ray cannot share the {role} {spec!r}: "
                "an hf: checkpoint holds its weights in this process. "
                f"Serve it over HTTP (e.g. scripts/vllm_server.sh) and pass openai:MODEL@URL, or use --executor threads"
            )


class EpisodeWorker:
    """A Ray actor (threaded: one item per thread) that does the work items of one run.

    Like the threads executor it shares one agent, one judge and one tool registry (one sandbox
    pool per profile, sized to the node's CPUs) between its threads, each with its own env.
    """

    def __init__(self, spec: RunSpec, tasks: Sequence[Task], cpus: int, run_dir: str, node_token: str):
        from vtb_agents.ablations import ablate_agent
        from vtb_app.evaluation.judging import episode_reward
        from vtb_app.evaluation.specs import judge_from_spec, make_agent
        from vtb_env.sandbox.pool import PROFILES, shared_sandbox
        from vtb_env.tools import default_tools

        for profile in PROFILES:  # sized to the node before any tool creates them with the default size
            shared_sandbox(profile, slots=cpus)
        self.spec = spec
        self.tasks = {task.id: task for task in tasks}
        run_path = Path(run_dir)
        self.shared_fs = _reads_token(run_path / "images" / _NODE_CHECK, node_token)
        self.scratch = None if self.shared_fs else Path(tempfile.mkdtemp(prefix="vtb-ray-episodes-"))
        home = run_path if self.shared_fs else self.scratch
        self.store = _ImageStore(home) if spec.save_images else None
        cache_path = home / "judge_cache.sqlite" if spec.judge != "exact" else None
        self.judge = judge_from_spec(spec.judge, cache_path=cache_path, options=spec.judge_options)
        self.agent = ablate_agent(make_agent(spec.agent, **spec.agent_options), spec.ablation)
        self.reward = episode_reward(self.judge, spec.scoring, spec.mode_labels)
        self.tools = default_tools()
        self._local = threading.local()
        self._envs: list[Any] = []
        self._envs_lock = threading.Lock()

    def ready(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "shared_fs": self.shared_fs}

    def play(self, task_id: str, sample: int) -> tuple[bytes, dict[str, bytes]]:
        """One (task, sample)'s record (its JSON line), and the PNGs the driver must write (none on a shared
        filesystem)."""
        spec = self.spec
        record = evaluate_item(
            self._thread_env,
            self.agent,
            self.judge,
            self.tasks[task_id],
            sample,
            seed=spec.seed,
            scoring=spec.scoring,
            passes=spec.passes,
            store=self.store,
            config_hash=spec.config_hash,
            identity=spec.identity,
            mode_labels=spec.mode_labels,
        )
        if self.scratch is None:
            return encode_record(record), {}
        return encode_record(record), {
            relpath: (self.scratch / relpath).read_bytes() for relpath in record.get("image_files", {}).values()
        }

    def rejudge(self, saved: bytes) -> tuple[bytes, dict[str, bytes]]:
        """A saved record (its JSON line) judged again; no images to send, its episode is not played."""
        record, spec = json.loads(saved), self.spec
        return encode_record(
            rejudge_item(record, self.tasks[record["task_id"]], self.judge, spec.scoring, spec.passes, spec.config_hash)
        ), {}

    def close(self) -> None:
        with self._envs_lock:
            for env in self._envs:
                env.close()
            self._envs.clear()
        self.tools.close()
        if hasattr(self.agent, "close"):
            self.agent.close()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def _thread_env(self) -> Any:
        if not hasattr(self._local, "env"):
            from vtb_env.env import VisualToolBenchEnv

            self._local.env = VisualToolBenchEnv(
                list(self.tasks.values()), tools=self.tools, reward=self.reward, config=self.spec.env_config
            )
            with self._envs_lock:
                self._envs.append(self._local.env)
        return self._local.env


def _reads_token(path: Path, token: str) -> bool:
    try:
        return path.read_text() == token
    except OSError:
        return False


@dataclass
class _Worker:
    node_id: str
    handle: Any
    slots: int
    busy: int = 0


class _Fleet:
    """The run's actors: one per alive CPU node, replaced while their node lives."""

    def __init__(self, ray: Any, spec: RunSpec, tasks_ref: Any, run_dir: Path, node_token: str, concurrency: int):
        self.ray, self.spec, self.tasks_ref, self.run_dir, self.node_token = ray, spec, tasks_ref, run_dir, node_token
        self.concurrency = concurrency
        self.actor_class = ray.remote(EpisodeWorker)
        self.workers: list[_Worker] = []
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
            starting.append(_Worker(node_id, handle, slots))
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

    def free(self) -> list[_Worker]:
        return [worker for worker in self.workers if worker.busy < worker.slots]

    def lose(self, worker: _Worker) -> None:
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
    (images / _NODE_CHECK).write_text(node_token)
    jobs = [_Job(task.id, sample) for task, sample in plan.items] + [
        _Job(r["task_id"], r["sample"], r) for r in plan.rejudge
    ]
    fleet = _Fleet(ray, spec, ray.put(list(tasks)), run_dir, node_token, concurrency)
    finished_run = False
    try:
        with RunLog(path) as log:
            keep = RecordKeeper(log, Progress(plan.size, enabled=progress))
            _drive(ray, fleet, jobs, {task.id: task for task in tasks}, spec, run_dir, keep)
        finished_run = True
    finally:  # items still in flight on Ctrl-C or an error were never recorded: --resume runs them
        fleet.close(graceful=finished_run)
        (images / _NODE_CHECK).unlink(missing_ok=True)
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

    def submit(self, worker: _Worker) -> Any:
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
    fleet: _Fleet,
    jobs: Sequence[_Job],
    tasks: Mapping[str, Task],
    spec: RunSpec,
    run_dir: Path,
    keep: RecordKeeper,
) -> None:
    """Keep every worker's slots busy and hand each result to ``keep`` as it comes."""
    queue: deque[_Job] = deque(jobs)
    in_flight: dict[Any, tuple[_Worker, _Job]] = {}
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
