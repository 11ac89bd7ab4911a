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
log-probs); ``vtb_env`` stays free of torch, and ``rewards`` only scores records.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from PIL import Image

from vtb_env.batch import EnvPool
from vtb_env.observation import map_image_parts
from vtb_env.ocr_view import make_view
from vtb_env.trajectory import EpisodeRecord
from vtb_rewards.grpo import group_advantages
from vtb_rewards.mode import ConfusionMatrix, Outcome, mode_outcome


@dataclass
class Generation:
    """What the policy produced for one prompt: its tokens and their sampling log-probs."""

    token_ids: list[int]
    logprobs: list[float]


class Generator(Protocol):
    """Samples one continuation per prompt (token ids in, token ids out).

    ``images[i]`` are the images of prompt ``i`` in the order of its image placeholders (None for
    text-only policies). ``prompts`` carry each image's tokens expanded (what the model reads and the
    loss is computed on), unless the generator has ``expands_images = True``: it hands raw images to
    an engine that expands each placeholder itself, so it gets ``Episode.placeholder_ids``.
    """

    def __call__(
        self, prompts: Sequence[list[int]], images: Sequence[list[Image.Image]] | None = None
    ) -> list[Generation]: ...


def is_processor(processing_class: Any) -> bool:
    """True for a multimodal processor (it has an image processor), False for a tokenizer."""
    return getattr(processing_class, "image_processor", None) is not None


def vision_inputs(processor: Any, input_ids: Any, images: Sequence[Sequence[Image.Image]]) -> dict[str, Any]:
    """The model's pixel inputs for a batch of token rows, from each row's images in placeholder order.

    Empty when no row has an image. The layouts are the image processor's own (per-row padded for
    Idefics3, flat for LLaVA, patches + ``image_grid_thw`` for Qwen-VL, whose M-RoPE also needs
    ``mm_token_type_ids`` marking the image tokens, as TRL builds it for tool images).
    """
    if not any(images):
        return {}
    inputs = dict(processor.image_processor(images=[list(row) for row in images], return_tensors="pt"))
    if "image_grid_thw" in inputs:
        image_token_id = processor.tokenizer.convert_tokens_to_ids(processor.image_token)
        inputs["mm_token_type_ids"] = (input_ids == image_token_id).long().cpu()
    return {key: value.to(input_ids.device) for key, value in inputs.items()}


class HFGenerator:
    """Sampling with ``model.generate`` (left-padded batch); continuations are cut after the first stop token.

    ``processing_class`` is the tokenizer, or for a vision-language model its processor (the
    prompts' images then go to ``generate`` as pixel inputs).
    """

    def __init__(
        self,
        model: Any,
        processing_class: Any,
        *,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
    ):
        self.model = model
        self.processor = processing_class if is_processor(processing_class) else None
        tokenizer = getattr(processing_class, "tokenizer", processing_class)
        self.max_new_tokens, self.temperature, self.top_p = max_new_tokens, temperature, top_p
        eos = model.generation_config.eos_token_id
        self.stop_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else next(iter(self.stop_ids))

    def __call__(
        self, prompts: Sequence[list[int]], images: Sequence[list[Image.Image]] | None = None
    ) -> list[Generation]:
        import torch

        if not prompts:
            return []
        width = max(len(p) for p in prompts)
        device = next(self.model.parameters()).device
        input_ids = torch.tensor([[self.pad_id] * (width - len(p)) + list(p) for p in prompts], device=device)
        attention_mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
        pixels = vision_inputs(self.processor, input_ids, images) if self.processor is not None and images else {}
        was_training = self.model.training
        self.model.eval()
        with torch.no_grad():
            out = self.model.generate(
                input_ids=input_ids,
                attention_mask=attention_mask,
                **pixels,
                do_sample=True,
                temperature=self.temperature,
                top_p=self.top_p,
                max_new_tokens=self.max_new_tokens,
                pad_token_id=self.pad_id,
                return_dict_in_generate=True,
                output_scores=True,
            )
        self.model.train(was_training)
        new = out.sequences[:, width:]
        logps = torch.stack(out.scores, dim=1).float().log_softmax(-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        generations = []
        for ids, lps in zip(new.tolist(), logps.tolist(), strict=True):
            end = next((i + 1 for i, t in enumerate(ids) if t in self.stop_ids), len(ids))
            generations.append(Generation(ids[:end], lps[:end]))
        return generations


class VLLMGenerator:
    """Generation through a TRL trainer's vLLM engine (``use_vllm=True``, colocate or server mode).

    What vLLM gets for a VLM (TRL 1.16): in colocate mode TRL hands each row's ids and raw images to
    vLLM, whose processor expands every image placeholder, so the rows are ``Episode.placeholder_ids``
    (``expands_images``). In server mode TRL processes the images on the server and places their
    features on the runs of image tokens in the ids, one run per image (``_place_features`` checks the
    count), so the rows are the expanded ids the loss is computed on and vLLM expands nothing.
    Either way vLLM's prompt is the episode's expanded sequence, each image expanded once
    (``tests/integration/test_vllm_vlm_rollout.py`` checks it against a real vLLM server).
    """

    def __init__(self, trainer: Any):
        self.trainer = trainer
        self.expands_images = trainer.vllm_generation.mode == "colocate"

    def __call__(
        self, prompts: Sequence[list[int]], images: Sequence[list[Image.Image]] | None = None
    ) -> list[Generation]:
        images = [list(row) or None for row in images] if images and any(images) else None
        _, completion_ids, logprobs, _ = self.trainer.vllm_generation.generate(list(prompts), images, num_generations=1)
        return [
            Generation(list(ids), [row[0] for row in lps]) for ids, lps in zip(completion_ids, logprobs, strict=True)
        ]


def policy_view(processing_class: Any) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    """The observation view the policy's tokenizer asks for with ``image_view`` in its config (one of
    ``vtb_env.ocr_view.VIEWS``, sharing ``ocr_view.default_cache()``), or None."""
    tokenizer = getattr(processing_class, "tokenizer", processing_class)
    return make_view((getattr(tokenizer, "init_kwargs", None) or {}).get("image_view"))


class ChatRenderer:
    """The policy's chat template applied to env messages; image parts become ``{"type": "image"}``.

    With a processor (vision-language policy) ``encode`` expands each image placeholder into the
    model's image tokens for the given images; with a tokenizer placeholders stay text.
    ``view``: applied to every observation before it is rendered (``start_episode``, ``append_env_reply``);
    by default the one the policy's tokenizer asks for (``policy_view``), e.g. ``vtb_env.ocr_view.OcrView``
    for a text policy that reads the images' words.
    """

    def __init__(
        self,
        processing_class: Any,
        *,
        view: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        **template_kwargs: Any,
    ):
        self.processor = processing_class if is_processor(processing_class) else None
        self.tokenizer = getattr(processing_class, "tokenizer", processing_class)
        self.view = view if view is not None else policy_view(processing_class)
        self.template_kwargs = template_kwargs

    def shown(self, observation: dict[str, Any]) -> dict[str, Any]:
        """The observation as the policy is shown it (through ``view``)."""
        return self.view(observation) if self.view is not None else observation

    @property
    def is_vision(self) -> bool:
        return self.processor is not None

    def text(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], add_generation_prompt: bool
    ) -> str:
        return self.tokenizer.apply_chat_template(
            [_plain_images(m) for m in messages],
            tools=list(tools) or None,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            **self.template_kwargs,
        )

    def encode(self, text: str, images: Sequence[Image.Image] = ()) -> list[int]:
        """Token ids of ``text``; for a VLM, ``images`` are those of its placeholders, in order."""
        if not self.is_vision:
            return self.placeholder_tokens(text)
        placeholders = text.count(self.processor.image_token)
        if placeholders != len(images):
            raise ValueError(
                f"the rendered text has {placeholders} image placeholders ({self.processor.image_token!r}) "
                f"but {len(images)} images arrived with it"
            )
        if not images:
            return self.placeholder_tokens(text)
        return list(self.processor(text=[text], images=[list(images)], add_special_tokens=False)["input_ids"][0])

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def placeholder_tokens(self, text: str) -> list[int]:
        """Token ids of ``text`` with each image placeholder left as is (tokenizer only, no image processor)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def appended_text(
        self, before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
    ) -> str:
        """Text the template adds going from ``before`` (ending with the policy's message) to ``after`` +
        generation prompt."""
        head = self.text(before, tools, add_generation_prompt=False)
        full = self.text(after, tools, add_generation_prompt=True)
        if not full.startswith(head):
            raise ValueError(
                "the chat template is not prefix-preserving: appending messages rewrote earlier text, "
                "so env tokens cannot be isolated"
            )
        return full[len(head) :]


def _plain_images(message: dict[str, Any]) -> dict[str, Any]:
    return map_image_parts([message], lambda part, index: {"type": "image"})[0]


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
