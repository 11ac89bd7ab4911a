"""TransformersAgent: a local Hugging Face checkpoint as a policy, on CPU or GPU.

Vision-language models (LLaVA, Idefics3, Mllama, Llama 4, Qwen2-VL, ...) load through
``AutoModelForImageTextToText`` + ``AutoProcessor``; text-only models through
``AutoModelForCausalLM`` + the tokenizer. The prompt is the model's own chat template rendered
with the observation's messages and the tool schemas, so the model sees tools exactly as in RL
training; the action is the raw generated text and the env's parsers read calls from it.
``act_batch`` pads left and generates for several episodes at once.

A text checkpoint whose tokenizer config names an observation view (``image_view``: ``ocr`` or
``ocr-pages``, as ``--image-view`` saves it with a trained checkpoint) reads the pictures through it and
is prompted exactly as ``vtb_agents.rollout`` prompts it in training (``ChatRenderer``: content parts, the
pages' words marked ``ocr``).
"""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from PIL import Image

from vtb_agents.base import Action, BaseAgent, CallRecord, Observation
from vtb_agents.chat_render import ChatRenderer, policy_view
from vtb_agents.messages import ObservationError
from vtb_env.observation import map_image_parts


class TransformersAgent(BaseAgent):
    """Greedy (temperature 0) or sampled generation from a local checkpoint; see the module docstring."""

    def __init__(
        self,
        path: str | Path,
        *,
        device: str | None = None,
        dtype: str | None = None,
        max_new_tokens: int = 512,
        temperature: float = 0.0,
        top_p: float | None = None,
        seed: int | None = None,
        batch_size: int = 8,
        offer_tools: bool = True,
    ):
        super().__init__()
        import torch
        from transformers import AutoConfig

        self.path = str(path)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.seed = seed
        self.batch_size = max(1, batch_size)
        self.offer_tools = offer_tools
        self.name = f"hf:{Path(self.path).name}"
        self._generate_lock = threading.Lock()
        config = AutoConfig.from_pretrained(self.path)
        self.is_vision = _is_image_text_to_text(config)
        torch_dtype = getattr(torch, dtype) if dtype else None
        if self.is_vision:
            from transformers import AutoModelForImageTextToText, AutoProcessor

            self.processor = AutoProcessor.from_pretrained(self.path)
            self.tokenizer = self.processor.tokenizer
            self.model = AutoModelForImageTextToText.from_pretrained(self.path, dtype=torch_dtype)
        else:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(self.path)
            self.processor = self.tokenizer
            self.model = AutoModelForCausalLM.from_pretrained(self.path, dtype=torch_dtype)
        self.model.to(self.device).eval()
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self._stop_ids = _stop_token_ids(self.model, self.tokenizer)
        # a text policy trained through a view is evaluated through it, rendered as in training
        self.renderer = ChatRenderer(self.processor) if not self.is_vision and policy_view(self.processor) else None

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "path": self.path,
            "architecture": type(self.model).__name__,
            "device": self.device,
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
        }

    def act(self, observation: Observation) -> Action:
        return self.act_batch([observation])[0]

    def act_batch(self, observations: Sequence[Observation]) -> list[Action]:
        actions: list[Action] = []
        for start in range(0, len(observations), self.batch_size):
            actions.extend(self._generate(observations[start : start + self.batch_size]))
        return actions

    # -- prompt building ------------------------------------------------------------------

    def render(self, observation: Observation) -> tuple[str, list[Image.Image]]:
        """The chat-template prompt for one observation and the images it refers to, in order."""
        tools = list(observation.get("tools") or []) if self.offer_tools else []
        if self.renderer is not None:
            return self.renderer.text(self.renderer.shown(observation)["messages"], tools, True), []
        messages, images = to_template_messages(observation, keep_images=self.is_vision)
        prompt = self.processor.apply_chat_template(
            messages, tools=tools or None, add_generation_prompt=True, tokenize=False
        )
        return prompt, images

    def _generate(self, observations: Sequence[Observation]) -> list[str]:
        import torch

        rendered = [self.render(observation) for observation in observations]
        prompts = [prompt for prompt, _ in rendered]
        start = time.perf_counter()
        if self.is_vision and any(images for _, images in rendered):
            inputs = self.processor(
                text=prompts, images=[images for _, images in rendered], padding=True, return_tensors="pt"
            )
        else:
            inputs = self.tokenizer(prompts, padding=True, return_tensors="pt", add_special_tokens=False)
        inputs = inputs.to(self.device)
        sampling = {"do_sample": self.temperature > 0}
        if self.temperature > 0:
            sampling.update(temperature=self.temperature, top_p=self.top_p or 1.0)
        with self._generate_lock, torch.inference_mode():
            if self.seed is not None:
                torch.manual_seed(self.seed)
            output = self.model.generate(
                **inputs,
                max_new_tokens=self.max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
                eos_token_id=sorted(self._stop_ids) or None,
                **sampling,
            )
        latency = time.perf_counter() - start
        prompt_length = inputs["input_ids"].shape[1]
        texts = []
        for row, mask in zip(output[:, prompt_length:].tolist(), inputs["attention_mask"].tolist(), strict=True):
            completion = _until_stop(row, self._stop_ids)
            texts.append(self.tokenizer.decode(completion, skip_special_tokens=False))
            self.record(
                CallRecord(
                    latency_s=latency / len(prompts),
                    prompt_tokens=int(sum(mask)),
                    completion_tokens=len(completion),
                    meta={"batch_size": len(prompts)},
                )
            )
        return texts


def _is_image_text_to_text(config: Any) -> bool:
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    return config.model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES


def _stop_token_ids(model: Any, tokenizer: Any) -> set[int]:
    """Every id that ends a reply: the generation config's eos ids, the tokenizer's, and <|eot_id|>-style ends."""
    ids: set[int] = set()
    for value in (getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif value:
            ids.update(int(v) for v in value)
    for token in ("<|eot_id|>", "<|eom_id|>", "<end_of_utterance>", "<|im_end|>", "<|eot|>"):
        token_id = tokenizer.convert_tokens_to_ids(token)
        if isinstance(token_id, int) and token_id != tokenizer.unk_token_id and token_id >= 0:
            ids.add(token_id)
    return ids


def _until_stop(ids: list[int], stop_ids: set[int]) -> list[int]:
    for index, token_id in enumerate(ids):
        if token_id in stop_ids:
            return ids[:index]
    return ids


def to_template_messages(
    observation: Observation, *, keep_images: bool
) -> tuple[list[dict[str, Any]], list[Image.Image]]:
    """Chat-template messages (content parts ``{"type": "image"}`` / ``{"type": "text"}``) and their images.

    Without ``keep_images`` (text-only models) image parts become the text ``[image]`` and
    content is a plain string, which every text template accepts. Tool-call arguments are
    decoded from JSON strings to objects, as chat templates expect.
    """
    available = list(observation.get("images") or ())
    images: list[Image.Image] = []

    def convert(part: Mapping[str, Any], index: int) -> dict[str, Any]:
        if not keep_images:
            return {"type": "text", "text": "[image]"}
        image = available[index] if index < len(available) else _decode_data_url(part)
        if not isinstance(image, Image.Image):
            raise ObservationError("an image placeholder has no matching PIL image in observation['images']")
        images.append(image.convert("RGB"))
        return {"type": "image"}

    as_parts = [{**message, "content": _parts(message.get("content"))} for message in observation.get("messages") or ()]
    messages = []
    for message in map_image_parts(as_parts, convert):
        converted = [
            part if part["type"] == "image" else {"type": "text", "text": str(part.get("text", ""))}
            for part in message["content"]
            if part.get("type") in ("image", "text")
        ]
        out: dict[str, Any] = {"role": message["role"]}
        out["content"] = converted if keep_images else "".join(p["text"] for p in converted)
        if message.get("tool_calls"):
            out["tool_calls"] = [_hf_tool_call(call) for call in message["tool_calls"]]
        if message.get("tool_call_id"):
            out["tool_call_id"] = message["tool_call_id"]
        messages.append(out)
    return messages, images


def _parts(content: Any) -> list[Mapping[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [part for part in content if isinstance(part, Mapping)]


def _hf_tool_call(call: Mapping[str, Any]) -> dict[str, Any]:
    function = dict(call.get("function") or call)
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            pass
    return {"type": "function", "function": {"name": function.get("name", ""), "arguments": arguments}}


def _decode_data_url(part: Mapping[str, Any]) -> Image.Image | None:
    url = str((part.get("image_url") or {}).get("url", ""))
    if not url.startswith("data:") or "," not in url:
        return None
    try:
        return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    except (ValueError, OSError):
        return None
