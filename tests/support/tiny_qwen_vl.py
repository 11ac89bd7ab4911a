"""Tiny Qwen2.5-VL and Qwen3-VL checkpoints built offline, with the models' own chat templates, for TRL's VLM paths.

Real transformers classes (``Qwen2_5_VLForConditionalGeneration``, ``Qwen3VLForConditionalGeneration``)
with random weights, a byte-level BPE tokenizer trained here with the Qwen special tokens, the
real image processor (patches of 16 px merged 2x2, images resized to at most 64x64 px) and the
chat template each family ships (TRL's copies, ``trl/chat_templates``), so that TRL recognises
the template as it would the real model's. Saved with ``save_pretrained``; load with
``AutoModelForImageTextToText`` / ``AutoProcessor``.

Two-action policy: two added tokens hold whole replies, CALL (``<tool_call>{call}</tool_call>``)
and ANSWER (``final_answer``); ``generation_config.suppress_tokens`` masks every other token but
the end of turn, and their output rows start equal, so each reply is a fair random mix of tool
calls and answers (the pattern of ``vtb_agents.two_action_vlm``). The model's weights decide
nothing else; what these checkpoints exercise is the plumbing: images into the vision tower.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoProcessor,
    PreTrainedTokenizerFast,
    Qwen2_5_VLConfig,
    Qwen2_5_VLForConditionalGeneration,
    Qwen2_5_VLProcessor,
    Qwen3VLConfig,
    Qwen3VLForConditionalGeneration,
    Qwen3VLProcessor,
)
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

QwenFamily = Literal["qwen2_5_vl", "qwen3_vl"]
QWEN_FAMILIES: tuple[QwenFamily, ...] = ("qwen2_5_vl", "qwen3_vl")

END_OF_TURN, IMAGE_PAD = "<|im_end|>", "<|image_pad|>"
_SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    END_OF_TURN,
    "<|vision_start|>",
    "<|vision_end|>",
    IMAGE_PAD,
    "<|video_pad|>",
]
_ADDED = [
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<tools>",
    "</tools>",
    "<think>",
    "</think>",
]
_CORPUS = [
    "system user assistant tool You are a helpful assistant.",
    "What is shown in the image? Crop the top left corner and zoom in. The answer is 42.",
    '# Tools\nYou may call one or more functions to assist with the user query. {"type": "function"}',
    "def crop(image):\n    return image.crop((0, 0, 10, 10))\n\n",
]
_HIDDEN, _HEAD_DIM, _PATCH, _MERGE = 64, 64, 16, 2


# transformers' Qwen-VL processors require a video processor, and every video processor needs torchvision,
# which has no CPU build on this machine's package index (the PyPI wheel is CUDA-only). The image path never
# touches the video processor, so these subclasses drop it; everything else is the real processor.
class ImageOnlyQwen2_5_VLProcessor(Qwen2_5_VLProcessor):
    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)


class ImageOnlyQwen3VLProcessor(Qwen3VLProcessor):
    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)


AutoProcessor.register(Qwen2_5_VLConfig, ImageOnlyQwen2_5_VLProcessor, exist_ok=True)
AutoProcessor.register(Qwen3VLConfig, ImageOnlyQwen3VLProcessor, exist_ok=True)


def _tokenizer(call_text: str, answer: str) -> PreTrainedTokenizerFast:
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=_SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator(_CORPUS * 8, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token=END_OF_TURN, pad_token="<|endoftext|>", extra_special_tokens={}
    )
    tokenizer.add_tokens([*_ADDED, call_text, answer])
    return tokenizer


def _config(family: QwenFamily, tokenizer: PreTrainedTokenizerFast) -> Any:
    ids = {name: tokenizer.convert_tokens_to_ids(token) for name, token in _TOKEN_FIELDS.items()}
    text = dict(
        vocab_size=len(tokenizer),
        hidden_size=_HIDDEN,
        intermediate_size=2 * _HIDDEN,
        num_hidden_layers=1,
        num_attention_heads=1,
        num_key_value_heads=1,
        head_dim=_HEAD_DIM,
        max_position_embeddings=4096,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [12, 10, 10]},
    )
    vision = dict(
        depth=1,
        hidden_size=32,
        intermediate_size=64,
        num_heads=1,
        patch_size=_PATCH,
        spatial_merge_size=_MERGE,
        temporal_patch_size=2,
        out_hidden_size=_HIDDEN,
    )
    if family == "qwen3_vl":
        vision |= {"num_position_embeddings": 16, "deepstack_visual_indexes": [0]}
        return Qwen3VLConfig(text_config=text, vision_config=vision, **ids)
    vision |= {"window_size": _PATCH * _MERGE, "fullatt_block_indexes": [0], "in_chans": 3}
    return Qwen2_5_VLConfig(text_config=text, vision_config=vision, **ids)


_TOKEN_FIELDS = {
    "image_token_id": IMAGE_PAD,
    "video_token_id": "<|video_pad|>",
    "vision_start_token_id": "<|vision_start|>",
    "vision_end_token_id": "<|vision_end|>",
}


def build_tiny_qwen_vl(
    path: str | Path,
    family: QwenFamily,
    tool_call: dict[str, Any],
    final_answer: str = "The answer is 42.",
) -> Path:
    """Save a two-action tiny ``family`` VLM and its processor under ``path`` (see the module docstring)."""
    from trl.chat_template_utils import qwen2_5_vl_chat_template, qwen3_vl_chat_template

    call_text = f"<tool_call>\n{json.dumps(tool_call)}\n</tool_call>"
    tokenizer = _tokenizer(call_text, final_answer)
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=_PATCH,
        merge_size=_MERGE,
        temporal_patch_size=2,
        size={"shortest_edge": 32 * 32, "longest_edge": 64 * 64},
    )
    processor_class = ImageOnlyQwen3VLProcessor if family == "qwen3_vl" else ImageOnlyQwen2_5_VLProcessor
    template = qwen3_vl_chat_template if family == "qwen3_vl" else qwen2_5_vl_chat_template
    processor = processor_class(image_processor=image_processor, tokenizer=tokenizer, chat_template=template)
    torch.manual_seed(0)
    model_class = Qwen3VLForConditionalGeneration if family == "qwen3_vl" else Qwen2_5_VLForConditionalGeneration
    model = model_class(_config(family, tokenizer)).eval()
    actions = [tokenizer.convert_tokens_to_ids(t) for t in (call_text, final_answer, END_OF_TURN)]
    with torch.no_grad():
        model.get_output_embeddings().weight[actions] = 0.0  # equal logits: a fair choice at every token
    model.generation_config.suppress_tokens = [i for i in range(len(tokenizer)) if i not in actions]
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    path = Path(path)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path
