"""``evaluate``: run an agent on tasks through the env, judge each episode, append one record each.

Work items are (task, sample) pairs. Worker threads each own one env (its tools and sandbox)
and share the agent and the judge. A finished item is judged and appended to
``records.jsonl`` at once (see ``records``), so a crash loses at most the items in flight;
``resume=True`` skips the keys that already have a completely judged ``ok`` record, judges
incompletely judged ones again, and retries the errors. Any failure while playing, judging,
building or writing one item becomes that item's ``error`` record; it never stops the run.
One episode's loop through the env is ``playing.play_episode``.
"""

from __future__ import annotations

import functools
import hashlib
import threading
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from vtb_agents.base import Agent, summarize_calls
from vtb_app.evaluation.judging import JudgePasses, judge_record, rejudge_item, reward_judged
from vtb_app.evaluation.playing import ImageStore, PlayedEpisode, play_episode
from vtb_app.evaluation.progress import Progress
from vtb_app.evaluation.records import (
    RECORDS_FILE,
    RunConflictError,
    RunLog,
    done_keys,
    encode_record,
    error_record,
    record_key,
    rejudge_records,
)
from vtb_env.image_names import turn_image_names
from vtb_env.tasks import ModeLabel, Task
from vtb_rewards.compose import RewardConfig
from vtb_rewards.judge.judge import Judge
from vtb_rewards.mode import needs_lookup, reference_tools

EnvFactory = Callable[[Sequence[Task]], Any]  # tasks -> a VisualToolBenchEnv


def ok_record(played: PlayedEpisode, judged: Mapping[str, Any], mode_label: str | None = None) -> dict[str, Any]:
    """The body of an ``ok`` record: the episode, answers, verdicts and score, reward, tool use.

    ``mode_label``: the label from a label store that this run used for the task (none: the
    task's own label, if any, applies).
    """
    episode = played.record
    return {
        "status": "ok",
        "error": None,
        "episode": episode.to_dict(),
        "answers": episode.final_answers,
        "truncated": played.truncated,
        **judged,
        "reward": played.reward,
        "reward_components": played.reward_components,
        "reward_error": played.reward_error,
        "mode_label": mode_label,
        "tool_use": {
            "calls": len(episode.tool_calls),
            "failed_calls": sum(1 for call in episode.tool_calls if not call.ok),
            "used_tools": episode.used_tools,
        },
        "image_files": played.image_files,
    }


def task_summary(task: Task) -> dict[str, Any]:
    """What reports need of a task (prompts, golden answers, and image names as the env shows them: image_<k>.png)."""
    return {
        "id": task.id,
        "turncase": task.turncase,
        "domain": task.domain,
        "eval_focus": task.eval_focus,
        "mode_label": task.mode_label,
        "turns": [
            {"prompt": turn.prompt, "golden_answer": turn.golden_answer, "images": turn_image_names(task, i)}
            for i, turn in enumerate(task.turns)
        ],
        "reference_tools": reference_tools(task),
        "needs_lookup": needs_lookup(task),
    }


@dataclass
class EvalResult:
    run_dir: Path
    attempted: int
    succeeded: int
    failed: int
    skipped: int
    rejudged: int = 0


def sample_seed(seed: int | None, task_id: str, sample: int) -> int | None:
    """The seed of one (task, sample): distinct per sample and task, stable across runs; None: no seed."""
    if seed is None:
        return None
    digest = hashlib.sha256(f"{seed}:{task_id}:{sample}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def evaluate_item(
    get_env: Callable[[], Any],
    agent: Agent,
    judge: Judge,
    task: Task,
    sample: int,
    *,
    seed: int | None,
    scoring: RewardConfig,
    passes: JudgePasses,
    store: ImageStore | None,
    config_hash: str,
    identity: Mapping[str, Any] | None,
    mode_labels: Mapping[str, ModeLabel],
) -> dict[str, Any]:
    """One (task, sample): play, judge, and the record to append (``ok``, or ``error`` with its message).

    The work item of every executor (threads here, Ray actors in ``ray_executor``). ``seed`` is
    the run's base seed (``sample_seed``); ``get_env`` is called inside the try, so an env that
    cannot be built is this item's error too, as is a record that cannot be encoded.
    """
    key, item_seed = record_key(task.id, sample), sample_seed(seed, task.id, sample)
    base = {
        "key": key,
        "task_id": task.id,
        "sample": sample,
        "seed": item_seed,
        "config_hash": config_hash,
        **(identity or {}),
        "task": task_summary(task),
    }
    start = time.time()
    agent.drain_records()
    set_seed = getattr(agent, "set_episode_seed", None)
    if set_seed is not None:
        set_seed(item_seed)
    try:
        played = play_episode(get_env(), agent, task, store, seed=item_seed)
        episode, episode_s = played.record, time.time() - start
        judged = judge_record(
            task,
            episode,
            judge,
            scoring,
            passes,
            mode_labels.get(task.id),
            with_reward=False,
            verdicts=reward_judged(played.reward_details, judge, scoring),
        )
        timings = {"wall_s": time.time() - start, "episode_s": episode_s, "judge_s": time.time() - start - episode_s}
        record = {
            **base,
            **ok_record(played, judged, mode_labels.get(task.id)),
            "usage": summarize_calls(agent.drain_records()),
            "timings": timings,
            "started_at": start,
        }
        encode_record(record)  # a record that cannot be written fails here, as this task's error
        return record
    except Exception as exc:  # recorded and retried on resume; never counted as done
        return {
            **error_record(base, f"{type(exc).__name__}: {exc}"),
            "traceback": traceback.format_exc(limit=8)[-4000:],
            "usage": summarize_calls(agent.drain_records()),
            "timings": {"wall_s": time.time() - start},
        }


@dataclass
class RunPlan:
    """What a run (or its resume) has to do: episodes to play, records to judge again, keys done."""

    items: list[tuple[Task, int]]  # (task, sample) pairs to play
    rejudge: list[dict[str, Any]]  # saved ``ok`` records whose judging is incomplete
    finished: set[str]

    @property
    def size(self) -> int:
        return len(self.items) + len(self.rejudge)


def plan_run(tasks: Sequence[Task], samples: int, path: Path, resume: bool) -> RunPlan:
    """The run's work from its records file; records there without ``resume`` are a conflict."""
    if path.exists() and path.stat().st_size and not resume:
        raise RunConflictError(
            f"{path} already has records: pass --resume to continue that run, or choose another --out"
        )
    finished = done_keys(path) if resume else set()
    to_rejudge = rejudge_records(path) if resume else {}
    ids = {task.id for task in tasks}
    items = [
        (task, sample)
        for task in tasks
        for sample in range(samples)
        if record_key(task.id, sample) not in finished and record_key(task.id, sample) not in to_rejudge
    ]
    return RunPlan(items, [r for r in to_rejudge.values() if r["task_id"] in ids], finished)


class RecordKeeper:
    """Appends each finished item's record to the run log once, counts it and draws progress.

    A record that cannot be written becomes its error record: the run never stops over one.
    """

    def __init__(self, log: RunLog, bar: Progress):
        self.log, self.bar = log, bar
        self.ok = self.errors = 0

    def __call__(self, record: dict[str, Any]) -> None:
        try:
            self.log.append(record)
        except Exception as exc:  # never lose the run over one record: write its error instead
            record = error_record(record, f"record could not be written: {type(exc).__name__}: {exc}")
            self.log.append(record)
        self.bar.update(record)
        if record["status"] == "ok":
            self.ok += 1
        else:
            self.errors += 1


WorkItem = Callable[[], dict[str, Any]]


def run_work(items: Sequence[WorkItem], concurrency: int, keep: Callable[[dict[str, Any]], None]) -> None:
    """Run ``items`` on ``concurrency`` threads and hand each record to ``keep`` as it finishes.

    The one place episodes execute: another executor (processes, a cluster) can replace it as
    long as it calls ``keep`` once per item. Ctrl-C drops the queued items (they rerun on
    resume) and keeps those in flight.
    """
    pool = ThreadPoolExecutor(max_workers=max(1, concurrency))
    pending: set[Future] = set()
    try:
        pending.update(pool.submit(item) for item in items)
        for future in as_completed(set(pending)):
            pending.discard(future)
            keep(future.result())
    except KeyboardInterrupt:
        pool.shutdown(wait=True, cancel_futures=True)
        for future in pending:
            if not future.cancelled():
                keep(future.result())
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def evaluate(
    tasks: Sequence[Task],
    agent: Agent,
    make_env: EnvFactory,
    judge: Judge,
    run_dir: str | Path,
    *,
    config_hash: str = "",
    samples: int = 1,
    concurrency: int = 1,
    seed: int | None = 0,
    resume: bool = False,
    scoring: RewardConfig = RewardConfig(),
    passes: JudgePasses = JudgePasses(),
    save_images: bool = True,
    progress: bool = True,
    identity: Mapping[str, Any] | None = None,
    mode_labels: Mapping[str, str] | None = None,
) -> EvalResult:
    """Run every (task, sample) not yet done and append its record; see the module docstring.

    Each (task, sample) gets its own seed (``sample_seed``; None: no seed is sent), used for the
    env's reset and the agent's requests and stored in the record. On resume, ``ok`` records
    whose judging is incomplete are judged again from their saved answers (no episode rerun).
    ``mode_labels`` (task id -> label, from ``vtb label-modes``) are stored in the records of
    the tasks they cover; give the env's reward the same labels.
    """
    mode_labels = dict(mode_labels or {})
    run_dir = Path(run_dir)
    path = run_dir / RECORDS_FILE
    plan = plan_run(tasks, samples, path, resume)
    by_id = {task.id: task for task in tasks}
    store = ImageStore(run_dir) if save_images else None
    local = threading.local()
    envs: list[Any] = []
    envs_lock = threading.Lock()

    def env_for_thread() -> Any:
        if not hasattr(local, "env"):
            local.env = make_env(tasks)
            with envs_lock:
                envs.append(local.env)
        return local.env

    play = functools.partial(
        evaluate_item,
        env_for_thread,
        agent,
        judge,
        seed=seed,
        scoring=scoring,
        passes=passes,
        store=store,
        config_hash=config_hash,
        identity=identity,
        mode_labels=mode_labels,
    )
    work: list[WorkItem] = [functools.partial(play, task, sample) for task, sample in plan.items]
    work += [
        functools.partial(rejudge_item, r, by_id[r["task_id"]], judge, scoring, passes, config_hash)
        for r in plan.rejudge
    ]
    with RunLog(path) as log:
        keep = RecordKeeper(log, Progress(plan.size, enabled=progress))
        try:
            run_work(work, concurrency, keep)
        finally:
            for env in envs:
                env.close()
    return EvalResult(run_dir, len(plan.items), keep.ok, keep.errors, len(plan.finished), len(plan.rejudge))
