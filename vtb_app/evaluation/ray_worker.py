"""The Ray actor of ``vtb eval --executor ray`` (``ray_executor``) and the plain spec it is built from."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from vtb_app.evaluation.judging import JudgePasses, rejudge_item
from vtb_app.evaluation.playing import ImageStore
from vtb_app.evaluation.records import encode_record
from vtb_app.evaluation.runner import evaluate_item
from vtb_app.evaluation.specs import JudgeOptions, SpecError
from vtb_env.config import EnvConfig
from vtb_env.tasks import Task
from vtb_rewards.compose import RewardConfig

NODE_CHECK = ".ray-node-check"  # in images/: a worker that reads the driver's token shares its filesystem


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
        from vtb_env.sandbox.shared import PROFILES, shared_sandbox
        from vtb_env.tools import default_tools

        for profile in PROFILES:  # sized to the node before any tool creates them with the default size
            shared_sandbox(profile, slots=cpus)
        self.spec = spec
        self.tasks = {task.id: task for task in tasks}
        run_path = Path(run_dir)
        self.shared_fs = _reads_token(run_path / "images" / NODE_CHECK, node_token)
        self.scratch = None if self.shared_fs else Path(tempfile.mkdtemp(prefix="vtb-ray-episodes-"))
        home = run_path if self.shared_fs else self.scratch
        self.store = ImageStore(home) if spec.save_images else None
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
