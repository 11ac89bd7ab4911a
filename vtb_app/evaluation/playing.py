"""Playing one episode of a task through the env to its end, and storing the images the model saw or made.

``play_episode`` is the loop every evaluation executor runs (threads in ``runner``, Ray actors in
``ray_worker``): reset the env on the task, let the agent act until the episode ends, keep the env's
reward with the record.
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from vtb_agents.base import Agent
from vtb_env.tasks import Task
from vtb_env.trajectory import EpisodeRecord

MAX_STEPS_PER_TURN = 64  # a policy that never answers and never hits the cap cannot hang a run


class ImageStore:
    """Images the model saw or made, stored once per content hash under ``run_dir/images``."""

    def __init__(self, run_dir: Path):
        self.dir = run_dir / "images"
        self.dir.mkdir(parents=True, exist_ok=True)

    def save(self, observation: Mapping[str, Any], hashes: Mapping[str, str], files: dict[str, str]) -> None:
        for name, image in zip(observation.get("image_names") or (), observation.get("images") or (), strict=False):
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
    reward: float  # the env's composed per-episode reward (vtb_rewards.compose)
    reward_components: dict[str, float] | None  # info["reward_components"]; None when the reward failed
    reward_error: str | None
    reward_details: dict[str, Any] | None = None  # info["reward_details"]: the reward's verdicts and task score


def play_episode(
    env: Any, agent: Agent, task: Task, store: ImageStore | None = None, seed: int | None = None
) -> PlayedEpisode:
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
    return PlayedEpisode(
        info["record"],
        files,
        bool(truncated),
        float(reward),
        info.get("reward_components"),
        info.get("reward_error"),
        info.get("reward_details"),
    )


def run_episode(
    env: Any, agent: Agent, task: Task, store: ImageStore | None = None, seed: int | None = None
) -> tuple[EpisodeRecord, dict[str, str], bool]:
    """One episode: (the record, image name -> stored file, truncated); ``play_episode`` has the reward too."""
    played = play_episode(env, agent, task, store, seed)
    return played.record, played.image_files, played.truncated
