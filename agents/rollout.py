"""Multi-turn, tool-using rollouts of a token-level policy in VisualToolBench environments.

One episode becomes one token sequence, the shape GRPO trainers (TRL's ``rollout_func``,
verl's multi-turn rollout) train on::

    prompt_ids | policy tokens (mask 1) | env tokens (mask 0) | policy tokens (mask 1) | ...

Env tokens are what the environment appends between two policy steps: tool results, the user
message showing the images a tool made, the next turn's prompt and images, the cap notice.
The environment owns the dialogue (parsing in any format, sandboxed tools, caps, image names,
reward); this module only tokenizes it. The env tokens of a step are the text the chat template
adds when the environment's new messages are appended, so the template must be
prefix-preserving (Llama 3's is; checked at every step with a clear error). The template lists
the tools offered at reset for the whole episode, so the system block never changes.

Vision-language policies (a transformers processor as ``processing_class``): each image
placeholder is expanded by the processor into the model's image tokens, and ``Episode.images``
keeps every image the policy saw (prompt, tool outputs, later turns) in the order of its
placeholders, so generation here and the trainer's log-prob passes (``vision_inputs``) give the
model the same pixels at the same positions. ``Episode.placeholder_ids`` is the same sequence with
each image left as its one placeholder token (the chat template's text, tokenizer only): what an
engine that runs the processor itself on raw images (vLLM) must get, so that each image is
expanded exactly once (TRL issue #6294: expanded ids plus the images get expanded twice).

Why in ``agents``: this is the policy side of the loop (tokenizer, generation, sampling
log-probs); ``vtb_env`` stays free of torch, and ``rewards`` only scores records. The generators
live in ``vtb_agents.generation`` and the renderer in ``vtb_agents.chat_render``; both are
re-exported here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from PIL import Image

from vtb_agents.chat_render import ChatRenderer, policy_view, set_image_view
from vtb_agents.generation import Generation, Generator, HFGenerator, VLLMGenerator, is_processor, vision_inputs
from vtb_env.batch import EnvPool
from vtb_env.trajectory import EpisodeRecord
from vtb_rewards.grpo import group_advantages
from vtb_rewards.mode import ConfusionMatrix, Outcome, mode_outcome


@dataclass
class Episode:
    """One finished rollout: the token sequence, its mask and log-probs, and the env's verdict."""

    task_id: str
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)  # 1: policy token (trained on), 0: env token
    logprobs: list[float] = field(default_factory=list)  # sampling log-probs; 0.0 for env tokens
    images: list[Image.Image] = field(
        default_factory=list
    )  # every image a vision policy was shown, in placeholder order (prompt, tools, later turns); none for text
    image_names: list[str] = field(default_factory=list)  # every image the env showed (image_<k>.png, transformed_...)
    # prompt and completion with each image as its one placeholder token (what vLLM expands itself)
    placeholder_ids: list[int] = field(default_factory=list)
    reward: float = 0.0
    components: dict[str, float] = field(default_factory=dict)
    record: "EpisodeRecord | None" = None
    mode_outcome: Outcome | None = None
    static_label: str | None = None  # the task's own mode label (the generator's), if any
    online_label: str | None = None  # the group's label measured for this policy (vtb_agents.mode_probes)
    probe: bool = False  # a text-only probe: played with the tools withdrawn (vtb_agents.mode_probes)
    length_truncated: bool = False  # stopped by the token budget before the env ended it
    policy_steps: int = 0
    seconds: float = 0.0

    def extend(
        self, ids: Sequence[int], logprobs: Sequence[float] | None, placeholder_ids: Sequence[int] | None = None
    ) -> None:
        """Append policy tokens (``logprobs`` given) or env tokens (None; ``placeholder_ids``: them unexpanded)."""
        self.placeholder_ids.extend(ids if placeholder_ids is None else placeholder_ids)
        self.completion_ids.extend(ids)
        self.env_mask.extend([0 if logprobs is None else 1] * len(ids))
        self.logprobs.extend([0.0] * len(ids) if logprobs is None else logprobs)


@dataclass
class _Live:
    index: int
    episode: Episode
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    label: str | None
    record: "EpisodeRecord"  # the env updates it in place
    start: float
    done: bool = False


def run_episodes(
    pool: EnvPool,
    task_ids: Sequence[str],
    generate: Generator,
    renderer: ChatRenderer,
    *,
    max_completion_tokens: int = 2048,
    seed: int | None = None,
    round_sync: Callable[[int], int] | None = None,
) -> list[Episode]:
    """Play one episode per task id (repeat ids for a GRPO group), all in lock-step.

    Each round, every live episode's sequence goes to ``generate`` in one batch, the texts go to
    the environments, and their tool calls run concurrently (``EnvPool``). An episode whose
    sequence passes ``max_completion_tokens`` is stopped and scored as it stands (no answer:
    format 0, rubrics not met) with ``length_truncated`` set.

    ``round_sync`` (several processes generating together): given this process's live-episode
    count, returns the largest count of any process; rounds go on while it is above 0 and each
    batch is padded to it with one-token filler prompts (their output is dropped), so every
    process calls ``generate`` the same number of times with the same batch width.
    """
    if len(task_ids) > len(pool):
        raise ValueError(f"{len(task_ids)} episodes need {len(task_ids)} environments; the pool has {len(pool)}")
    for env in pool.envs[: len(task_ids)]:
        if env.config.history == "golden":
            raise ValueError(
                "rollouts need history='model': golden history rewrites the dialogue, so it is not one token sequence"
            )
    indices = list(range(len(task_ids)))
    resets = pool.reset(seed=seed, options=[{"task_id": t} for t in task_ids], indices=indices)
    live = []
    for i, (task_id, (obs, info)) in enumerate(zip(task_ids, resets, strict=True)):
        episode = start_episode(renderer, task_id, obs)
        live.append(
            _Live(
                i,
                episode,
                renderer.shown(obs)["messages"],
                obs["tools"],
                info["task"].get("mode_label"),
                info["record"],
                time.perf_counter(),
            )
        )
    filler = live[0].episode.prompt_ids[:1]
    while True:
        active = [s for s in live if not s.done]
        width = round_sync(len(active)) if round_sync is not None else len(active)
        if width == 0:
            break
        padding = width - len(active)
        images = [s.episode.images for s in active] + [[]] * padding if renderer.is_vision else None
        if getattr(generate, "expands_images", False):
            prompts = [s.episode.placeholder_ids for s in active]
        else:
            prompts = [s.episode.prompt_ids + s.episode.completion_ids for s in active]
        generations = generate(prompts + [filler] * padding, images)
        actions: list[str | None] = [None] * len(pool)
        for state, gen in zip(active, generations, strict=False):
            state.episode.extend(gen.token_ids, gen.logprobs)
            state.episode.policy_steps += 1
            if len(state.episode.completion_ids) > max_completion_tokens:
                _stop_for_length(pool, state)
            else:
                actions[state.index] = renderer.decode(gen.token_ids)
        for state, result in zip(live, pool.step(actions), strict=False):
            if result is None:
                continue
            if result.terminated or result.truncated:
                _finish(state, result.reward, result.info)
                continue
            state.messages = append_env_reply(renderer, state.episode, state.messages, state.tools, result.observation)
            if len(state.episode.completion_ids) > max_completion_tokens:
                _stop_for_length(pool, state)
    return [s.episode for s in live]


def start_episode(renderer: ChatRenderer, task_id: str, observation: dict[str, Any]) -> Episode:
    """A new episode from the env's first observation: prompt tokens and the images shown so far."""
    episode = Episode(task_id, [], images=_shown(renderer, observation["images"]))
    episode.image_names = list(observation["image_names"])
    observation = renderer.shown(observation)
    text = renderer.text(observation["messages"], observation["tools"], add_generation_prompt=True)
    episode.prompt_ids = renderer.encode(text, episode.images)
    episode.placeholder_ids = renderer.placeholder_tokens(text)
    return episode


def append_env_reply(
    renderer: ChatRenderer,
    episode: Episode,
    messages: Sequence[dict[str, Any]],
    tools: Sequence[dict[str, Any]],
    observation: dict[str, Any],
) -> list[dict[str, Any]]:
    """Append what the env added after the policy's message (env tokens, mask 0, and new images) to ``episode``.

    ``messages`` is the dialogue before the policy's message; returns the env's dialogue now.
    """
    after = renderer.shown(observation)["messages"]  # the old ones, the env's copy of the policy's message, new ones
    new_images = _shown(renderer, observation["images"][len(episode.image_names) :])
    appended = renderer.appended_text(after[: len(messages) + 1], after, tools)
    episode.extend(renderer.encode(appended, new_images), None, renderer.placeholder_tokens(appended))
    episode.images += new_images
    episode.image_names += observation["image_names"][len(episode.image_names) :]
    return list(after)


def _shown(renderer: ChatRenderer, images: Sequence[Image.Image]) -> list[Image.Image]:
    """The images a policy is shown (``encode`` expands them), as RGB: all of them for a VLM; none for a text
    policy (placeholders stay text, or its view turned them into words)."""
    return [image.convert("RGB") for image in images] if renderer.is_vision else []


def _finish(state: _Live, reward: float, info: dict[str, Any]) -> None:
    episode = state.episode
    episode.reward, episode.components = float(reward), dict(info.get("reward_components") or {})
    if "reward_error" in info:
        episode.components["reward_error"] = 1.0
    episode.record = info["record"]
    episode.static_label = state.label
    if state.label is not None:  # "used tools" as the reward read it (its mode_reading), else any call
        used = episode.components.get("used_tools", float(episode.record.used_tools))
        episode.mode_outcome = mode_outcome(state.label, bool(used))
    episode.seconds = time.perf_counter() - state.start
    state.done = True


def _stop_for_length(pool: EnvPool, state: _Live) -> None:
    """End the unfinished episode and score it through the env's reward (it has no final answer yet)."""
    _, reward, _, _, info = pool.envs[state.index].truncate("max_completion_tokens")
    state.episode.length_truncated = True
    _finish(state, reward, info)


def summarize_rollouts(episodes: Sequence[Episode], group_size: int) -> dict[str, float]:
    """Per-batch metrics: mean reward and components, mode-selection MCC, group statistics, speed."""
    n = len(episodes)
    metrics: dict[str, float] = {"reward": sum(e.reward for e in episodes) / n}
    names = sorted({name for e in episodes for name in e.components} - {"reward"})
    for name in names:
        values = [e.components[name] for e in episodes if name in e.components]
        metrics[f"reward/{name}"] = sum(values) / len(values)
    outcomes = [e.mode_outcome for e in episodes if e.mode_outcome is not None]
    if outcomes:
        confusion = ConfusionMatrix.from_outcomes(outcomes)
        metrics.update(
            {
                "mode/mcc": confusion.mcc(),
                **{f"mode/{k}": float(v) for k, v in confusion.to_dict().items() if k in ("TP", "FN", "TN", "FP")},
            }
        )
    advantages = group_advantages([e.reward for e in episodes], group_size)
    groups = [episodes[i : i + group_size] for i in range(0, n, group_size)]
    metrics["group/frac_zero_std"] = sum(len({e.reward for e in g}) == 1 for g in groups) / len(groups)
    metrics["group/mean_abs_advantage"] = sum(abs(a) for a in advantages) / n
    metrics["episode/tool_calls"] = sum(len(e.record.tool_calls) for e in episodes if e.record) / n
    metrics["episode/images"] = sum(len(e.image_names) for e in episodes) / n
    metrics["episode/policy_steps"] = sum(e.policy_steps for e in episodes) / n
    metrics["episode/length_truncated"] = sum(e.length_truncated for e in episodes) / n
    metrics["episode/seconds"] = sum(e.seconds for e in episodes) / n
    return metrics


__all__ = [
    "ChatRenderer",
    "Episode",
    "Generation",
    "Generator",
    "HFGenerator",
    "VLLMGenerator",
    "append_env_reply",
    "is_processor",
    "policy_view",
    "run_episodes",
    "set_image_view",
    "start_episode",
    "summarize_rollouts",
    "vision_inputs",
]
