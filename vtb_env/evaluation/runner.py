"""``evaluate``: run an agent on tasks through the env, judge each episode, append one record each.

Work items are (task, sample) pairs. Worker threads each own one env (its tools and sandbox)
and share the agent and the judge. A finished item is judged and appended to
``records.jsonl`` at once (see ``records``), so a crash loses at most the items in flight;
``resume=True`` skips the keys that already have an ``ok`` record and retries the errors.
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import threading
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TextIO

from agents.base import Agent, summarize_calls
from rewards.compose import EpisodeReward, RewardConfig
from rewards.judge.judge import Judge, judge_task
from rewards.scoring import score_task
from vtb_env.evaluation.metrics import episode_calls
from vtb_env.evaluation.records import RECORDS_FILE, RunConflictError, RunLog, done_keys, record_key
from vtb_env.tasks import Task
from vtb_env.trajectory import EpisodeRecord

EnvFactory = Callable[[Sequence[Task]], Any]  # tasks -> a VisualToolBenchEnv
MAX_STEPS_PER_TURN = 64  # a policy that never answers and never hits the cap cannot hang a run


@dataclass(frozen=True)
class Scoring:
    """How verdicts become a task score: the critical rule and the multi-turn mode (rewards.scoring)."""

    critical_rule: str = "weight>=4"
    multi_turn: str = "pooled"


def episode_reward(judge: Judge, scoring: Scoring, mode_labels: Mapping[str, str] | None = None) -> EpisodeReward:
    """The env's reward for an evaluation: default weights, this run's judge, critical rule and labels."""
    config = RewardConfig(critical_rule=scoring.critical_rule, multi_turn=scoring.multi_turn)  # type: ignore[arg-type]
    return EpisodeReward(config, judge, mode_labels)  # type: ignore[arg-type]


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


def judge_episode(task: Task, answers: Sequence[str | None], judge: Judge, scoring: Scoring) -> dict[str, Any]:
    """Verdicts (per turn, with rubric text and weight, for reports) and the task score."""
    verdicts = judge_task(judge, task, list(answers))
    score = score_task(task, verdicts, scoring.critical_rule, scoring.multi_turn)  # type: ignore[arg-type]
    return {
        "verdicts": [
            [
                {
                    "rubric_id": rubric.id,
                    "description": rubric.description,
                    "weight": rubric.weight,
                    "critical": rubric.is_critical(scoring.critical_rule),  # type: ignore[arg-type]
                    "status": turn_verdicts[rubric.id].status,
                    "explanation": turn_verdicts[rubric.id].explanation,
                    "source": turn_verdicts[rubric.id].source,
                    "error": turn_verdicts[rubric.id].error,
                }
                for rubric in turn.rubrics
            ]
            for turn, turn_verdicts in zip(task.turns, verdicts)
        ],
        "score": {"score": score.score, "passed": score.passed, "complete": score.complete, "n_judge_errors": score.n_judge_errors},
        "judge": judge.judge_id,
    }


def task_summary(task: Task) -> dict[str, Any]:
    """What reports need of a task (prompts, golden answers, and image names as the env shows them: image_<k>.png)."""
    first = [sum(len(t.images) for t in task.turns[:i]) + 1 for i in range(len(task.turns))]
    return {
        "id": task.id,
        "turncase": task.turncase,
        "domain": task.domain,
        "eval_focus": task.eval_focus,
        "mode_label": task.mode_label,
        "turns": [
            {"prompt": turn.prompt, "golden_answer": turn.golden_answer, "images": [f"image_{first[i] + j}.png" for j in range(len(turn.images))]}
            for i, turn in enumerate(task.turns)
        ],
    }


class _ImageStore:
    """Images the model saw or made, stored once per content hash under ``run_dir/images``."""

    def __init__(self, run_dir: Path):
        self.dir = run_dir / "images"
        self.dir.mkdir(parents=True, exist_ok=True)

    def save(self, observation: Mapping[str, Any], hashes: Mapping[str, str], files: dict[str, str]) -> None:
        for name, image in zip(observation.get("image_names") or (), observation.get("images") or ()):
            if name in files:
                continue
            digest = hashes.get(name) or hashlib.sha256(name.encode()).hexdigest()
            relpath = f"images/{digest[:32]}.png"
            target = self.dir.parent / relpath
            if not target.exists():
                buffer = io.BytesIO()
                image.save(buffer, format="PNG")
                tmp = target.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")  # Ray workers write here too
                tmp.write_bytes(buffer.getvalue())
                tmp.replace(target)
            files[name] = relpath


def _image_hashes(record: EpisodeRecord) -> dict[str, str]:
    hashes = {image["name"]: image["sha256"] for image in record.metadata.get("images", [])}
    for call in record.tool_calls:
        hashes.update({image["name"]: image["sha256"] for image in call.images})
    return hashes


@dataclass
class PlayedEpisode:
    """One finished episode: its record, the stored image files, and what the env returned at the end."""

    record: EpisodeRecord
    image_files: dict[str, str]  # image name -> file under the run dir
    truncated: bool
    reward: float  # the env's composed per-episode reward (rewards.compose)
    reward_components: dict[str, float] | None  # info["reward_components"]; None when the reward failed
    reward_error: str | None


def play_episode(env: Any, agent: Agent, task: Task, store: _ImageStore | None = None, seed: int | None = None) -> PlayedEpisode:
    """Run one episode of ``task`` with ``agent`` through ``env`` to its end."""
    observation, info = env.reset(seed=seed, options={"task_id": task.id})
    files: dict[str, str] = {}
    steps = 0
    while True:
        if store is not None:
            store.save(observation, _image_hashes(info["record"]), files)
        action = agent.act(observation)
        observation, reward, terminated, truncated, info = env.step(action)
        steps += 1
        if terminated or truncated:
            break
        if steps >= MAX_STEPS_PER_TURN * len(task.turns):
            raise RuntimeError(f"episode exceeded {steps} steps without ending")
    if store is not None:
        store.save(observation, _image_hashes(info["record"]), files)
    return PlayedEpisode(info["record"], files, bool(truncated), float(reward), info.get("reward_components"), info.get("reward_error"))


def run_episode(env: Any, agent: Agent, task: Task, store: _ImageStore | None = None, seed: int | None = None) -> tuple[EpisodeRecord, dict[str, str], bool]:
    """One episode: (the record, image name -> stored file, truncated); ``play_episode`` has the reward too."""
    played = play_episode(env, agent, task, store, seed)
    return played.record, played.image_files, played.truncated


class Progress:
    """A one-line progress bar: done/total, rate, ETA, live pass rate, errors."""

    def __init__(self, total: int, stream: TextIO | None = None, enabled: bool = True):
        self.total, self.done, self.passed, self.errors = total, 0, 0, 0
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.start = time.perf_counter()
        self._lock = threading.Lock()
        self._interactive = bool(getattr(self.stream, "isatty", lambda: False)())

    def update(self, record: Mapping[str, Any]) -> None:
        with self._lock:
            self.done += 1
            if record.get("status") == "ok":
                self.passed += bool(record["score"]["passed"])
            else:
                self.errors += 1
            self._draw()

    def _draw(self) -> None:
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.start
        eta = elapsed / self.done * (self.total - self.done) if self.done else 0.0
        judged = self.done - self.errors
        pass_rate = f"{100 * self.passed / judged:.1f}%" if judged else "n/a"
        width = 24
        filled = int(width * self.done / max(1, self.total))
        line = (
            f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
            f"{elapsed:.0f}s ETA {eta:.0f}s pass {pass_rate} errors {self.errors}"
        )
        if self._interactive:
            self.stream.write(line + ("\n" if self.done >= self.total else ""))
        elif self.done >= self.total or self.done % max(1, self.total // 10) == 0:
            # Logs (CI, pipes) get a plain line about every 10% instead of hundreds of carriage returns.
            self.stream.write(line.lstrip("\r") + "\n")
        self.stream.flush()


def evaluate_item(
    get_env: Callable[[], Any],
    agent: Agent,
    judge: Judge,
    task: Task,
    sample: int,
    *,
    seed: int,
    scoring: Scoring,
    store: _ImageStore | None,
    config_hash: str,
    identity: Mapping[str, Any] | None,
    mode_labels: Mapping[str, str],
) -> dict[str, Any]:
    """One (task, sample): play, judge, and the record to append (``ok``, or ``error`` with its message).

    Shared by the thread executor below and the Ray actors (``ray_executor``); ``get_env`` is
    called inside the try, so an env that cannot be built is recorded as an error too.
    """
    key = record_key(task.id, sample)
    base = {"key": key, "task_id": task.id, "sample": sample, "config_hash": config_hash, **(identity or {}), "task": task_summary(task)}
    start = time.time()
    agent.drain_records()
    try:
        played = play_episode(get_env(), agent, task, store, seed=seed + sample)
        episode, episode_s = played.record, time.time() - start
        judged = judge_episode(task, episode.final_answers, judge, scoring)
    except Exception as exc:  # recorded and retried on resume; never counted as done
        return {
            **base,
            "status": "error",
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(limit=8),
            "usage": summarize_calls(agent.drain_records()),
            "timings": {"wall_s": time.time() - start},
        }
    timings = {"wall_s": time.time() - start, "episode_s": episode_s, "judge_s": time.time() - start - episode_s}
    return {**base, **ok_record(played, judged, mode_labels.get(task.id)), "usage": summarize_calls(agent.drain_records()),
            "timings": timings, "started_at": start}


def pending_items(tasks: Sequence[Task], samples: int, path: Path, resume: bool) -> tuple[list[tuple[Task, int]], set[str]]:
    """The (task, sample) pairs still to run and the keys already done; records without ``resume`` are a conflict."""
    if path.exists() and path.stat().st_size and not resume:
        raise RunConflictError(f"{path} already has records: pass --resume to continue that run, or choose another --out")
    finished = done_keys(path) if resume else set()
    return [(task, sample) for task in tasks for sample in range(samples) if record_key(task.id, sample) not in finished], finished


@dataclass
class EvalResult:
    run_dir: Path
    attempted: int
    succeeded: int
    failed: int
    skipped: int


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
    seed: int = 0,
    resume: bool = False,
    scoring: Scoring = Scoring(),
    save_images: bool = True,
    progress: bool = True,
    identity: Mapping[str, Any] | None = None,
    mode_labels: Mapping[str, str] | None = None,
) -> EvalResult:
    """Run every (task, sample) not yet done and append its record; see the module docstring.

    ``mode_labels`` (task id -> label, from ``vtb label-modes``) are stored in the records of
    the tasks they cover; give the env's reward the same labels.
    """
    mode_labels = dict(mode_labels or {})
    run_dir = Path(run_dir)
    path = run_dir / RECORDS_FILE
    items, finished = pending_items(tasks, samples, path, resume)
    store = _ImageStore(run_dir) if save_images else None
    local = threading.local()
    envs: list[Any] = []
    envs_lock = threading.Lock()

    def env_for_thread() -> Any:
        if not hasattr(local, "env"):
            local.env = make_env(tasks)
            with envs_lock:
                envs.append(local.env)
        return local.env

    def run_item(task: Task, sample: int) -> dict[str, Any]:
        return evaluate_item(env_for_thread, agent, judge, task, sample, seed=seed, scoring=scoring, store=store,
                             config_hash=config_hash, identity=identity, mode_labels=mode_labels)

    bar = Progress(len(items), enabled=progress)
    succeeded = failed = 0
    pool = ThreadPoolExecutor(max_workers=max(1, concurrency))
    pending: set[Future] = set()  # submitted and not yet taken from as_completed
    with RunLog(path) as log:

        def keep(future: Future) -> None:
            nonlocal succeeded, failed
            record = future.result()
            log.append(record)
            bar.update(record)
            succeeded += record["status"] == "ok"
            failed += record["status"] != "ok"

        try:
            pending.update(pool.submit(run_item, task, sample) for task, sample in items)
            for future in as_completed(set(pending)):
                pending.discard(future)
                keep(future)
        except KeyboardInterrupt:
            # Ctrl-C: queued items are dropped (they rerun on resume); items in flight finish and are kept.
            pool.shutdown(wait=True, cancel_futures=True)
            for future in pending:
                if not future.cancelled():
                    keep(future)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            for env in envs:
                env.close()
    return EvalResult(run_dir, len(items), succeeded, failed, len(finished))

