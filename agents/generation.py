"""The policy's side of a rollout step: token ids in, sampled token ids and their log-probs out.

``HFGenerator`` runs a transformers model (batched, or row by row reusing each episode's KV cache
across its rounds), ``VLLMGenerator`` a TRL trainer's vLLM engine; both satisfy ``Generator``,
what ``vtb_agents.rollout.run_episodes`` calls every round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from PIL import Image


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
    """Generation with ``model.generate``; continuations are cut after the first stop token.

    ``processing_class`` is the tokenizer, or for a vision-language model its processor (the
    prompts' images then go to ``generate`` as pixel inputs). ``greedy``: the argmax at every step
    (``do_sample=False``; the log-probs are then those of the unwarped logits).

    ``kv_reuse`` (text policies): each row is generated on its own, keeping its KV cache, and a later
    prompt that extends a cached one (the next round of the same episode: the prompt, the policy's
    reply, the env's tokens) prefills only the tokens after the cached prefix, so a k-round episode
    costs about one prefill instead of k. Caches live until the next call that does not extend them;
    make a new generator whenever the weights change (``EnvRollout`` makes one per rollout).
    ``prefilled_tokens`` counts the prompt tokens run through the model (what reuse saves).
    """

    def __init__(
        self,
        model: Any,
        processing_class: Any,
        *,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        greedy: bool = False,
        kv_reuse: bool = False,
    ):
        self.model = model
        self.processor = processing_class if is_processor(processing_class) else None
        if kv_reuse and self.processor is not None:
            raise ValueError(
                "kv_reuse is for text policies: a vision policy's image features are not cached per prefix"
            )
        tokenizer = getattr(processing_class, "tokenizer", processing_class)
        self.max_new_tokens, self.temperature, self.top_p = max_new_tokens, temperature, top_p
        self.greedy, self.kv_reuse = greedy, kv_reuse
        eos = model.generation_config.eos_token_id
        self.stop_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else next(iter(self.stop_ids))
        self.prefilled_tokens = 0
        self._caches: list[tuple[list[int], Any]] = []  # (the tokens a cache holds, the cache), last call's rows

    def __call__(
        self, prompts: Sequence[list[int]], images: Sequence[list[Image.Image]] | None = None
    ) -> list[Generation]:
        import torch

        if not prompts:
            return []
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                if self.kv_reuse:
                    return self._generate_reusing([list(p) for p in prompts])
                return self._generate_batch(prompts, images)
        finally:
            self.model.train(was_training)

    def _decoding(self) -> dict[str, Any]:
        if self.greedy:
            return {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        return {"do_sample": True, "temperature": self.temperature, "top_p": self.top_p}

    def _generate(self, input_ids: Any, attention_mask: Any, **kwargs: Any) -> Any:
        return self.model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            **kwargs,
            **self._decoding(),
            max_new_tokens=self.max_new_tokens,
            pad_token_id=self.pad_id,
            return_dict_in_generate=True,
            output_scores=True,
        )

    def _generate_batch(
        self, prompts: Sequence[list[int]], images: Sequence[list[Image.Image]] | None
    ) -> list[Generation]:
        """All rows in one left-padded batch, each prefilled whole."""
        import torch

        width = max(len(p) for p in prompts)
        device = next(self.model.parameters()).device
        input_ids = torch.tensor([[self.pad_id] * (width - len(p)) + list(p) for p in prompts], device=device)
        attention_mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
        pixels = vision_inputs(self.processor, input_ids, images) if self.processor is not None and images else {}
        out = self._generate(input_ids, attention_mask, **pixels)
        self.prefilled_tokens += sum(len(p) for p in prompts)
        return [self._cut(ids, lps) for ids, lps in zip(*self._new_tokens(out, width), strict=True)]

    def _generate_reusing(self, prompts: list[list[int]]) -> list[Generation]:
        """Row by row, each from the cache of the longest cached prefix of its prompt (class doc)."""
        import torch

        device = next(self.model.parameters()).device
        pool, self._caches = self._caches, []
        generations = []
        for prompt in prompts:
            cache, cached = self._take_prefix(pool, prompt)
            input_ids = torch.tensor([prompt], device=device)
            out = self._generate(input_ids, torch.ones_like(input_ids), **{_cache_name(): cache})
            self.prefilled_tokens += len(prompt) - cached
            (ids,), (lps,) = self._new_tokens(out, len(prompt))
            generation = self._cut(ids, lps)
            generations.append(generation)
            kept = getattr(out, _cache_name())
            self._caches.append(((prompt + generation.token_ids)[: kept.get_seq_length()], kept))
        return generations

    @staticmethod
    def _take_prefix(pool: list[tuple[list[int], Any]], prompt: list[int]) -> tuple[Any, int]:
        """The cache holding the longest prefix of ``prompt`` (taken out of ``pool``, cropped to leave at least
        one token to prefill), and how many tokens it holds; ``(None, 0)`` when none shares a prefix."""
        best, best_length = None, 0
        for entry in pool:
            tokens = entry[0]
            length = min(len(tokens), len(prompt) - 1)
            if length > best_length and tokens[:length] == prompt[:length]:
                best, best_length = entry, length
        if best is None:
            return None, 0
        pool.remove(best)
        cache = best[1]
        surplus = cache.get_seq_length() - best_length
        if surplus > 0:
            cache.crop(-surplus)  # a negative count removes tokens in every transformers version
        return cache, best_length

    @staticmethod
    def _new_tokens(out: Any, width: int) -> tuple[list[list[int]], list[list[float]]]:
        import torch

        new = out.sequences[:, width:]
        scores = torch.stack(out.scores, dim=1).float().log_softmax(-1)
        logps = scores.gather(-1, new.unsqueeze(-1)).squeeze(-1)
        return new.tolist(), logps.tolist()

    def _cut(self, ids: list[int], logprobs: list[float]) -> Generation:
        end = next((i + 1 for i, t in enumerate(ids) if t in self.stop_ids), len(ids))
        return Generation(ids[:end], logprobs[:end])


def _cache_name() -> str:
    """What ``generate`` calls the KV cache: ``cache`` in recent transformers, ``past_key_values`` before."""
    import dataclasses

    from transformers.generation.utils import GenerateDecoderOnlyOutput

    fields = {field.name for field in dataclasses.fields(GenerateDecoderOnlyOutput)}
    return "cache" if "cache" in fields else "past_key_values"


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
