"""``VisualToolBenchEnv``: VisualToolBench tasks as a gymnasium environment (``VisualToolBench-v0``)."""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import gymnasium as gym

from vtb_env.config import CAP_PLACEHOLDER_ANSWER, EnvConfig, resolve_config
from vtb_env.episode import EpisodeOverError, EpisodeState, PendingStep, resolve_tasks, task_info
from vtb_env.observation import ImageAsset, user_message
from vtb_env.parsers import ParsedAction, ParsedCall, action_text, parse_action
from vtb_env.prompts import resolve_system_prompt, with_answer_format
from vtb_env.render import render_ansi, render_html
from vtb_env.reveal import episode_judge
from vtb_env.reward import RewardFn, default_reward, score_episode
from vtb_env.safe_text import clean_action, clean_parsed_action
from vtb_env.spaces import AssistantActionSpace, DialogueObservationSpace
from vtb_env.stepping import StepGuard, applies, executes, holds, takes
from vtb_env.task_images import TaskImageCache
from vtb_env.tasks import Task
from vtb_env.tool_round import blocked_reason, cap_message, cap_used, round_messages, run_calls
from vtb_env.tools import default_tools
from vtb_env.tools.base import ToolContext, ToolRegistry
from vtb_env.toolsets import ablate
from vtb_env.trajectory import EpisodeRecord, StepRecord, ToolCallRecord, TurnRecord

logger = logging.getLogger(__name__)


class VisualToolBenchEnv(gym.Env):
    """VisualToolBench ("think with images"): answer multi-turn visual questions with tools.

    ## Description
    An episode is one task of 1-5 turns. Each turn brings a user prompt and images; the policy
    calls tools (``python_image_processing``, ``python_interpreter``, ``web_search``,
    ``browser_get_page_text``, ``historical_weather``, ``calculator``, or an ablation subset)
    and ends the turn with a final answer, which rubrics grade when the episode ends.

    ## Action Space
    ``AssistantActionSpace``: the raw assistant text in any common tool-call format (hermes
    ``<tool_call>``, Llama 3 JSON, Llama 4 pythonic, ``<function=...>``) or an OpenAI assistant
    message dict with ``tool_calls``. Text without a call is the turn's final answer; ``<think>``
    blocks are kept in the record and removed from the answer. Malformed calls get an error tool
    message; the env never raises on policy output.

    ## Observation Space
    ``DialogueObservationSpace``: ``{"messages", "images", "image_names", "tools"}`` -- the
    dialogue in OpenAI chat format (usable as ``messages`` for a chat-completions request), the
    images as PIL images in the order of the image parts, their file names, and the function
    schemas offered this step (empty when tools are withdrawn).

    ## Rewards
    0.0 on every step but the last; at the end (terminated or truncated) ``reward(task, record)``
    gives the reward and ``info["reward_components"]``. Default: ``vtb_rewards.default_reward()``
    (found through ``vtb_env.reward``; rubric score, critical-rubric pass, mode, format and
    tool-success components; the judge from the ``VTB_JUDGE_*`` variables, else exact rubric
    checks only).

    ## Starting State
    A task drawn with the env's RNG (or ``options={"task_id": ...}`` / ``{"index": ...}``); the
    dialogue holds the system prompt and the first turn's prompt and images.

    ## Episode End
    Terminated after the last turn's final answer. Truncated when the policy still calls tools
    after the cap withdrew them (``at_cap="ask_final"``) or, with ``at_cap="placeholder"``,
    when the last turn hits the cap.

    ## Arguments
    ``tasks`` (list of Task, a path or any ``load_tasks`` source; default: the demo set),
    ``tools`` (a ToolRegistry; default: ``vtb_env.tools.default_tools()``), ``reward``,
    ``config`` (EnvConfig or preset name ``"default"``/``"official"``), ``render_mode``
    (``"ansi"`` or ``"html"``), ``judge_options`` (the default reward's judge request options, e.g.
    ``{"temperature": None, "max_tokens": None}``; merged into ``config.judge_options``).

    ## Version History
    * v0: initial version.
    """

    metadata = {"render_modes": ["ansi", "html"], "render_fps": 1}

    def __init__(
        self,
        tasks: Sequence[Task] | str | Path | Any | None = None,
        tools: ToolRegistry | None = None,
        reward: RewardFn | None = None,
        config: EnvConfig | str | None = None,
        render_mode: str | None = None,
        judge_options: Mapping[str, Any] | None = None,
    ):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.config = resolve_config(config)
        if judge_options is not None:
            self.config = replace(self.config, judge_options={**self.config.judge_options, **judge_options})
        self.tasks: tuple[Task, ...] = resolve_tasks(tasks)
        self._index_of = {task.id: i for i, task in enumerate(self.tasks)}
        self._owns_tools = tools is None
        self.tools = ablate(tools if tools is not None else default_tools(), self.config.tool_set)
        self.reward_fn: RewardFn = (
            reward
            if reward is not None
            else default_reward(
                self.config.judge_options, {"answer_format": self.config.answer_format, **self.config.reward_options}
            )
        )
        self.system_prompt = with_answer_format(
            resolve_system_prompt(self.config.system_prompt), self.config.answer_format
        )
        self.render_mode = render_mode
        self.action_space = AssistantActionSpace()
        self.observation_space = DialogueObservationSpace()
        self._task_images = TaskImageCache()
        self._episode: EpisodeState | None = None
        self._guard = StepGuard()  # one stepping thread: a concurrent step()/reset() raises ConcurrentStepError

    # ---- gymnasium API -------------------------------------------------------------------

    @holds("reset")
    def reset(
        self, *, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        task = self.tasks[self._pick(options or {})]
        info = task_info(task)
        record = EpisodeRecord(
            task_id=task.id,
            metadata={
                **copy.deepcopy(info),
                "config": self.config.preset_name,
                "tools": list(self.tools.names),
                "images": [],
            },
        )
        self._episode = episode = EpisodeState(task=task, record=record, info=info)
        if self.system_prompt is not None:
            episode.dialogue.append({"role": "system", "content": self.system_prompt})
        self._open_turn(0)
        return self._observation(), self._info()

    def step(self, action: str | Mapping[str, Any]) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        return self.end_step(self.execute(self.begin_step(action)))

    def render(self) -> str | None:
        if self.render_mode is None or self._episode is None:
            return None
        messages = self._episode.dialogue.observation(
            [], "data_url", self.config.image_encoding, self.config.jpeg_quality
        )["messages"]
        return (
            render_ansi(messages)
            if self.render_mode == "ansi"
            else render_html(messages, title=f"VisualToolBench task {self._episode.task.id}")
        )

    def close(self) -> None:
        if self._owns_tools:
            self.tools.close()

    # ---- a step in three parts (begin_step, execute, end_step), so that a batch can run the tool
    # calls of many envs at once ---

    @property
    def episode_over(self) -> bool:
        """True once the episode has ended (terminated or truncated): ``step`` then raises until ``reset``."""
        return self._episode is not None and self._episode.done

    @takes
    def begin_step(self, action: str | Mapping[str, Any]) -> "PendingStep":
        """Parse the action and plan its tool calls (fast, no tool runs)."""
        episode = self._require_running()
        start = time.perf_counter()
        action = clean_action(action)  # policy text enters here, so everything emitted encodes as UTF-8
        try:
            parsed = clean_parsed_action(parse_action(action, self.config.tool_format))
        except Exception as exc:  # a parser bug must not end a rollout
            parsed = ParsedAction(
                content="",
                calls=[
                    ParsedCall(name="", arguments="", error=f"could not parse the action: {type(exc).__name__}: {exc}")
                ],
            )
        step = StepRecord(
            action_text=action_text(action),
            reasoning=parsed.reasoning,
            parser=parsed.parser,
            parse_errors=[c.error for c in parsed.calls if c.error],
        )
        pending = PendingStep(parsed=parsed, record=step)
        for call in parsed.calls:
            call_id = self._call_id(episode, call.call_id)
            record = ToolCallRecord.from_call(call, call_id, round_index=episode.rounds_in_turn)
            blocked = blocked_reason(episode, self.config, len(pending.calls))
            if record.error is None and blocked is not None:
                record.error, record.error_kind = blocked
            pending.calls.append(record)
            step.tool_calls.append(record)
        pending.overhead_s = time.perf_counter() - start
        return pending

    @applies
    def end_step(self, pending: "PendingStep") -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """Apply the results of ``pending`` and return gymnasium's step tuple."""
        episode = self._require_running()
        start = time.perf_counter()
        step = pending.record
        episode.turn_record.steps.append(step)
        terminated = truncated = False
        if not pending.calls:
            terminated = self._close_turn(pending.parsed.content, step)
        else:
            self._append_round(episode, pending)
            if episode.awaiting_final:  # tools were withdrawn and the policy still called them
                episode.turn_record.truncated = truncated = True
            else:
                terminated, truncated = self._after_round(episode, step)
        episode.done = terminated or truncated
        result = self._step_result(terminated, truncated)
        step.env_overhead_s = pending.overhead_s + time.perf_counter() - start
        return result

    @holds("truncate")
    def truncate(self, reason: str) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """End the running episode now and score it as it stands through the env's reward.

        For a caller that stops an episode the env would go on with (a trainer's token budget is
        spent, a wall-clock limit): gymnasium's step tuple with ``truncated=True``. The record's
        last turn is marked truncated and ``reason`` is kept in ``record.metadata["truncation"]``.
        """
        episode = self._require_running()
        episode.turn_record.truncated = True
        episode.record.metadata["truncation"] = reason
        episode.done = True
        return self._step_result(False, True)

    def _step_result(
        self, terminated: bool, truncated: bool
    ) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """The step tuple; at the episode's end the reward, with its components (or error) in ``info``."""
        episode = self._require_episode()
        score = score_episode(self.reward_fn, episode.task, episode.record) if episode.done else None
        observation, info = self._observation(), self._info()
        if score is None:
            return observation, 0.0, terminated, truncated, info
        info.update(score.info())
        return observation, score.reward, terminated, truncated, info

    # ---- turns and rounds ----------------------------------------------------------------

    def _open_turn(self, index: int) -> None:
        episode = self._require_episode()
        turn = episode.task.turns[index]
        assets = self._task_images.turn_images(episode.task, index)
        episode.record.metadata["images"].extend({"name": a.name, "sha256": a.sha256, "turn": index} for a in assets)
        if self.config.cap_scope == "turn":  # per task (the paper), the counts run on across turns
            episode.calls_in_turn, episode.rounds_in_turn = 0, 0
        episode.turn_index = index
        episode.awaiting_final = cap_used(episode, self.config) >= self.config.max_tool_calls  # budget spent: no tools
        episode.turn_record = TurnRecord(index=index)
        episode.record.turns.append(episode.turn_record)
        episode.turn_start = len(episode.dialogue)
        episode.dialogue.append(user_message(turn.prompt, assets))

    def _close_turn(self, answer: str, step: StepRecord) -> bool:
        """Record the final answer, move the dialogue on; True when the episode is over."""
        episode = self._require_episode()
        step.final_answer = answer
        episode.turn_record.final_answer = answer
        if self.config.history == "golden":
            episode.dialogue.truncate(episode.turn_start + 1)  # keep the turn's prompt, drop its tool exchange
            episode.dialogue.append(
                {"role": "assistant", "content": episode.task.turns[episode.turn_index].golden_answer}
            )
        else:
            episode.dialogue.append({"role": "assistant", "content": answer})
        if episode.turn_index + 1 >= len(episode.task.turns):
            return True
        self._open_turn(episode.turn_index + 1)
        return False

    def _append_round(self, episode: "EpisodeState", pending: "PendingStep") -> None:
        """The round's messages (``vtb_env.tool_round.round_messages``) into the dialogue; the cap's counts move on."""
        for message in round_messages(pending):
            episode.dialogue.append(message)
        episode.calls_in_turn += len(pending.calls)
        episode.rounds_in_turn += 1

    def _after_round(self, episode: "EpisodeState", step: StepRecord) -> tuple[bool, bool]:
        """Apply the cap after a round: (terminated, truncated)."""
        if cap_used(episode, self.config) < self.config.max_tool_calls:
            return False, False
        episode.turn_record.hit_tool_cap = True
        if self.config.at_cap == "ask_final":
            episode.awaiting_final = True
            episode.dialogue.append(cap_message(self.config))
            return False, False
        last_turn = episode.turn_index + 1 >= len(episode.task.turns)
        self._close_turn(CAP_PLACEHOLDER_ANSWER, step)
        if last_turn:
            episode.turn_record.truncated = True
        return False, last_turn

    # ---- tools ---------------------------------------------------------------------------

    def tool_context(self, extra_images: Iterable[ImageAsset] = ()) -> ToolContext:
        """What tools may see now: the visible images and the next free transformed-image index.

        Never answers or rubrics.
        """
        episode = self._require_episode()
        images = tuple(asset.named() for asset in [*episode.dialogue.assets, *extra_images])
        return ToolContext(
            task_id=episode.task.id,
            images=images,
            next_image_index=episode.tool_images.next_index,
            turn_index=episode.turn_index,
        )

    @executes
    def execute(self, pending: "PendingStep") -> "PendingStep":
        """Run the tool calls of ``pending`` (the slow part; safe in a worker thread, one step per env at a time).

        The round's valid calls run in order; each sees the images of the calls before it. Calls
        not started before the round's time budget is spent get an error instead.
        """
        if not pending.calls:
            return pending
        episode = self._require_running()
        run_calls(
            pending,
            self.tools,
            self.tool_context,
            episode.tool_images,
            self.config.round_time_budget_s,
            episode_judge(episode),  # what each call revealed: the mode credit's judgement
        )
        return pending

    # ---- helpers -------------------------------------------------------------------------

    def _pick(self, options: Mapping[str, Any]) -> int:
        if "task_id" in options:
            if options["task_id"] not in self._index_of:
                raise KeyError(f"unknown task_id {options['task_id']!r}")
            return self._index_of[options["task_id"]]
        if "index" in options:
            index = int(options["index"])
            if not 0 <= index < len(self.tasks):
                raise IndexError(f"task index {index} outside 0..{len(self.tasks) - 1}")
            return index
        return int(self.np_random.integers(len(self.tasks)))

    def _call_id(self, episode: "EpisodeState", given: str | None) -> str:
        episode.call_counter += 1
        if given and given not in episode.call_ids:
            episode.call_ids.add(given)
            return given
        call_id = f"call_{episode.call_counter}"
        episode.call_ids.add(call_id)
        return call_id

    def _observation(self) -> dict[str, Any]:
        episode = self._require_episode()
        tools = [] if episode.awaiting_final or episode.done else self.tools.schemas(self.tool_context())
        return episode.dialogue.observation(
            tools,
            self.config.image_parts,
            self.config.image_encoding,
            self.config.jpeg_quality,
            keep_last_images=self.config.max_dialogue_images,
        )

    def _info(self) -> dict[str, Any]:
        episode = self._require_episode()
        last = episode.record.turns[-1].steps[-1] if episode.record.turns[-1].steps else None
        return {
            "task": copy.deepcopy(episode.info),
            "turn": episode.turn_index,
            "tool_calls_in_turn": episode.calls_in_turn,
            "tools_available": not episode.awaiting_final,
            "parse_errors": list(last.parse_errors) if last else [],
            "record": episode.record,
        }

    def _require_episode(self) -> "EpisodeState":
        if self._episode is None:
            raise RuntimeError("call reset() before step()")
        return self._episode

    def _require_running(self) -> "EpisodeState":
        """The episode, if it may still act: a finished one is closed (it paid its reward once)."""
        episode = self._require_episode()
        if episode.done:
            raise EpisodeOverError("the episode has ended (terminated or truncated): call reset() to start another")
        return episode
