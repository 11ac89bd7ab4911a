"""A completion's tool calls judged as the env judges them: what each revealed of what the task hides.

A record read from completion text (``vtb_env.completion``: TRL's reward function, verl's ``compute_score``) has
its calls' code and results but none of their images, so the env's judgement (``vtb_env.reveal``,
``ToolCallRecord.revealed``) is made here, by construction the same way:

- a lookup call is judged from the result its text holds, by the function the env uses (``lookup_revealed``);
- vision calls are replayed: the completion's answered vision calls run again, in order and step by step, in a
  fresh episode of ``VisualToolBenchEnv`` on the task (the earlier turns answered with their golden answers, so
  the dialogue shows the images the prompt showed), whose sandbox reproduces the images and whose judge reads
  them; each replayed call's ``revealed`` is copied onto the text record's call, matched in order.

Replay runs only where it can change the reward: a task with key facts, a reader installed
(``vtb_env.ocr.is_available``; without one the calls stay unjudged, ``None``: the "did visual work" rule, as in
the env), and an answered vision call that did visual work by its own result (``image_work_done``; one that did
none reveals nothing, ``[]``, as the env judges it). A call the replay could not run (a sandbox error, a timeout,
images the task cannot load) is judged to reveal nothing (``[]``: no mode credit); the first such failure of a
process is logged as a warning.
"""

from __future__ import annotations

import atexit
import json
import logging
import threading
from typing import Any, Sequence

from vtb_env import ocr
from vtb_env.config import EnvConfig
from vtb_env.reveal import lookup_revealed
from vtb_env.tasks import Task
from vtb_env.tools.base import ToolRegistry
from vtb_env.toolsets import LOOKUP_TOOLS, VISION_TOOL
from vtb_env.trajectory import EpisodeRecord, ToolCallRecord, image_work_done

logger = logging.getLogger(__name__)

UNREPLAYABLE_KINDS = ("parse_error", "invalid_call")  # no tool ran such a call: nothing to replay


class Replayer:
    """Replays vision calls in one env at a time (the vision tool alone, on the process's sandbox; thread-safe, one
    replay at a time). ``close()`` releases the env and the tools it built."""

    def __init__(self, tools: ToolRegistry | None = None, config: EnvConfig | None = None) -> None:
        self._tools, self._owns_tools = tools, tools is None
        self._config = config  # None: the env's default preset
        self._env: Any = None
        self._lock = threading.Lock()

    def replay(self, task: Task, turn_index: int, rounds: Sequence[Sequence[ToolCallRecord]]) -> list[ToolCallRecord]:
        """The env's records of ``rounds`` (each a step's calls) replayed on turn ``turn_index`` of ``task``, in
        order; calls the episode did not reach (it ended at the tool cap) are missing from the end."""
        with self._lock:
            env = self._env_for(task)
            _, info = env.reset(options={"task_id": task.id})
            for turn in task.turns[:turn_index]:
                *_, info = env.step(turn.golden_answer)
            for calls in rounds:
                if env.episode_over:
                    break
                *_, info = env.step(_action(calls))
            return list(info["record"].turns[turn_index].tool_calls)

    def _env_for(self, task: Task) -> Any:
        """An env on ``task`` alone (the last one while the task is the same: a GRPO group shares its task)."""
        from vtb_env.env import VisualToolBenchEnv  # the env and its tools load only once a replay is needed
        from vtb_env.tools.factory import default_tools

        if self._env is not None and self._env.tasks == (task,):
            return self._env
        if self._tools is None:
            self._tools = default_tools({"tools": (VISION_TOOL,)})
        self._env = VisualToolBenchEnv(tasks=[task], tools=self._tools, reward=_unscored, config=self._config)
        return self._env

    def close(self) -> None:
        """Release the env and the tools this replayer built (its sandbox)."""
        with self._lock:
            self._env = None
            if self._owns_tools and self._tools is not None:
                self._tools.close()
                self._tools = None


def _unscored(task: Task, record: EpisodeRecord) -> tuple[float, dict[str, float]]:
    """A replay never finishes its episode; this stands in for the env's reward so that none is built."""
    return 0.0, {}


def _action(calls: Sequence[ToolCallRecord]) -> dict[str, Any]:
    """One assistant message making ``calls`` (OpenAI format: what every parser of the env reads)."""
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in calls
        ],
    }


_shared: Replayer | None = None
_shared_lock = threading.Lock()
_warned = threading.Event()


def shared_replayer() -> Replayer:
    """The process-wide replayer (one env and sandbox per process), closed when the process exits."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Replayer()
            atexit.register(_shared.close)
        return _shared


def judge_record(
    task: Task, record: EpisodeRecord, turn_index: int = 0, replayer: Replayer | None = None
) -> EpisodeRecord:
    """``record`` (one turn read from a completion: ``vtb_env.completion``) with its answered calls judged as the
    env judges them (module doc), on turn ``turn_index`` of ``task`` (the whole task, as the prompt showed it).
    Fills ``call.revealed`` in place and returns ``record``; ``replayer``: default ``shared_replayer()``."""
    if not task.metadata.get("key_facts"):
        return record
    answered = [call for call in record.tool_calls if call.answered]
    for call in answered:
        if call.name in LOOKUP_TOOLS:
            call.revealed = lookup_revealed(task, turn_index, call)
    vision = [c for c in answered if c.name == VISION_TOOL and c.error_kind not in UNREPLAYABLE_KINDS]
    for call in vision:
        if not image_work_done(call.image_work):
            call.revealed = []  # as the env judges a call that did no visual work (its own result says so)
    if all(call.revealed == [] for call in vision) or not ocr.is_available():
        return record
    replayable = {id(call) for call in vision}
    rounds = [[c for c in step.tool_calls if id(c) in replayable] for turn in record.turns for step in turn.steps]
    try:
        replayed = (replayer or shared_replayer()).replay(task, turn_index, [r for r in rounds if r])
    except Exception as exc:  # a failed replay costs the calls their credit, never the reward
        _warn_once("replaying the vision calls of task %s failed (%s): they earn no mode credit", task.id, exc)
        replayed = []
    for position, call in enumerate(vision):
        again = replayed[position] if position < len(replayed) else None
        if again is None or (again.error is not None and call.ok):  # the replay did not do what the rollout did
            reason = "not reached" if again is None else again.error
            _warn_once(
                "replayed call %s of task %s failed (%s): it earns no mode credit", call.call_id, task.id, reason
            )
        unjudged = again is None or (again.revealed is None and again.error is not None)
        call.revealed = [] if unjudged else again.revealed
    return record


def _warn_once(message: str, *args: Any) -> None:
    """The first replay failure of the process as a warning, the rest at debug level (a reward runs per sample)."""
    if _warned.is_set():
        logger.debug(message, *args)
    else:
        _warned.set()
        logger.warning(message, *args)
