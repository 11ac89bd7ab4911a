"""A tiny text checkpoint shaped like SmolLM2-Instruct, and OCR reads for hermetic text-view runs.

``build_chatml_model`` saves a random-weight Llama whose tokenizer has ChatML's ``<|im_start|>`` /
``<|im_end|>`` (the end of a turn, its EOS) and SmolLM2's own chat template, which joins
``message['content']`` as a string: it breaks on the env's list-of-parts content and knows no tools, tool
calls or generation marks (what ``--chat-template chatml-text`` is for).

``write_ocr_cache`` writes an ``OcrCache`` file whose every picture reads as ``OCR_WORDS``, so a run with
``--ocr-cache`` never calls Tesseract and its prompts show known words.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from PIL import Image

from tests.support.tiny_models import _llama_config, _save, build_tokenizer
from vtb_env.ocr import OcrWord
from vtb_env.ocr_view import OcrCache

IM_START, IM_END = "<|im_start|>", "<|im_end|>"
# SmolLM2-135M-Instruct's template (tokenizer_config.json), verbatim.
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
OCR_WORDS = ("Calcium", "8.4", "mg/dL")


def build_chatml_model(path: str | Path, *, layers: int = 2) -> Path:
    """A random-weight ``LlamaForCausalLM`` with a ChatML tokenizer and SmolLM2's template (module doc)."""
    import torch
    from transformers import LlamaForCausalLM

    tokenizer = build_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": [IM_START, IM_END]})
    tokenizer.eos_token = IM_END
    tokenizer.chat_template = SMOLLM2_TEMPLATE
    torch.manual_seed(0)
    model = LlamaForCausalLM(_llama_config(tokenizer, layers=layers)).eval()
    return _save(model, tokenizer, path)


class FixedWordsEngine:
    """An OCR engine that reads every picture as ``OCR_WORDS``."""

    def read(self, image: Image.Image) -> list[OcrWord]:
        return [OcrWord(word, (0, 0, 1, 1), 0.9) for word in OCR_WORDS]


def write_ocr_cache(path: str | Path, images: Iterable[Image.Image]) -> Path:
    """An OCR cache file holding ``OCR_WORDS`` for each of ``images``."""
    cache = OcrCache(FixedWordsEngine())
    cache.fill(images)
    return cache.save(path)
