"""A tiny vision-language policy whose every reply is one of two actions: answer, or zoom with the vision tool.

Built offline with random weights as a real transformers Idefics3 (SigLIP vision tower, pixel
shuffle connector, Llama text model) and its processor, saved with ``save_pretrained``; it loads
with ``AutoModelForImageTextToText`` / ``AutoProcessor`` and trains with TRL like any VLM. It
exists to show that the environment's reward teaches *when* to call a tool (scripts/learning_check.py).

Why each choice:

- **Two actions, both well formed.** The vocabulary holds two action tokens: ``CALL`` is one
  token whose text is a complete ``<tool_call>`` of ``python_image_processing`` (zoom into the
  top-left quarter of ``image_1.png``, saved as the next ``transformed_image_<i>.png``), ``ANSWER``
  one token holding a fixed final answer. ``generation_config.suppress_tokens`` lists every other
  token, so sampling (``generate`` with ``max_new_tokens=1``) picks between the two with the
  model's own relative probabilities: constrained decoding, the choice is the model's.
- **The decision sees the image.** The first (only) generated token is predicted at the
  assistant header, which attends through the real causal attention to every earlier token,
  the image tokens (vision tower -> connector) included. Nothing in the weights is scripted.
- **Short sequences.** Word-level vocabulary of the chat markup and a few words; other words
  are ``[UNK]``. The chat template writes no tool list (the tool call is built into ``CALL``)
  and no end-of-turn after assistant messages (the policy emits no EOS: its one token is the
  whole reply, so the episode's token sequence is exactly what the template renders).
- **A uniform start.** All weights are random except the two action rows of the output layer,
  which start at zero (as policy heads in RL often do): the initial policy picks either action
  with probability 1/2 on every input, so any mode selection it shows later was learned. With
  random rows, the argmax of the untrained policy already split the current synthetic twins by
  their image statistics (greedy MCC 0.78 on synth:32:1 at initialisation, seed 0).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch
from huggingface_hub.dataclasses import strict
from PIL import Image
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
from transformers import (
    AutoConfig,
    AutoModelForImageTextToText,
    Idefics3Config,
    Idefics3ForConditionalGeneration,
    Idefics3Processor,
    LlamaConfig,
    PreTrainedTokenizerFast,
)
from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

BOS, EOT, PAD, UNK, IMAGE = "<|begin_of_text|>", "<|eot_id|>", "<|pad|>", "[UNK]", "<image>"
HEADER_OPEN, HEADER_CLOSE = "<|start_header_id|>", "<|end_header_id|>"
_IDEFICS3_SPECIALS = ["<fake_token_around_image>", "<global-img>", "<end_of_utterance>"]
_WORDS = [
    "system",
    "user",
    "assistant",
    "ipython",
    "image",
    "The",
    "the",
    "What",
    "what",
    "is",
    "in",
    "this",
    "png",
    "[",
    "]",
    ".",
    "?",
    ",",
    ":",
    "{",
    "}",
    '"',
]

ZOOM_CODE = (
    "import glob\n"
    "from PIL import Image\n"
    "image = Image.open('image_1.png')\n"
    "w, h = image.size\n"
    "index = len(glob.glob('transformed_image_*.png'))\n"
    "image.crop((0, 0, w // 2, h // 2)).resize((w, h)).save(f'transformed_image_{index}.png')"
)


def zoomed(image: Image.Image) -> Image.Image:
    """What ``ZOOM_CODE`` saves for ``image`` as ``image_1.png`` (the same Pillow calls, run here): the top-left
    quarter enlarged to the full size. Lets a run read what the ``CALL`` action will show before it shows it."""
    w, h = image.size
    return image.crop((0, 0, w // 2, h // 2)).resize((w, h))


CALL_TEXT = (
    "<tool_call>" + json.dumps({"name": "python_image_processing", "arguments": {"code": ZOOM_CODE}}) + "</tool_call>"
)
ANSWER_TEXT = "The answer is 42."

# Llama-3-like markup; images as <image>; an assistant message is its action token (CALL when it calls a
# tool, ANSWER otherwise), marked for assistant-only SFT losses, with no <|eot_id|> after it (see module doc).
CHAT_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "<|start_header_id|>{{ 'ipython' if message['role'] == 'tool' else message['role'] }}<|end_header_id|>"
    "{%- if message['role'] == 'assistant' %}{% generation %}"
    "{{ " + json.dumps(CALL_TEXT) + " if message['tool_calls'] else " + json.dumps(ANSWER_TEXT) + " }}"
    "{% endgeneration %}"
    "{%- else %}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{%- elif message['content'] %}{%- for part in message['content'] %}"
    "{%- if part['type'] == 'image' %}<image>{%- elif part['type'] == 'text' %} {{ part['text'] }}{%- endif %}"
    "{%- endfor %}{%- endif %}<|eot_id|>"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>{% endif %}"
)


CONV_IDEFICS3 = "vtb_conv_idefics3"
DEFAULT_IMAGE_SIZE, DEFAULT_PATCH_SIZE, DEFAULT_STEM_WIDTH = 384, 32, 16


@strict
class ConvStemIdefics3Config(Idefics3Config):
    """Idefics3 whose vision tower embeds patches with a small CNN (``stem_width`` channels in its first layer)."""

    model_type = CONV_IDEFICS3
    stem_width: int = 16


class ConvStem(torch.nn.Sequential):
    """log2(patch) 3x3 convolutions of stride 2 (GroupNorm, GELU between them): one vector per patch.

    Replaces SigLIP's single linear patch projection, which from random weights and a few hundred
    images cannot learn what separates the twins (faded or turned key pages, notes where the key
    page should be: strokes, contrast and colour at the scale of a character).
    """

    def __init__(self, out_channels: int, patch_size: int, width: int):
        depth = int(math.log2(patch_size))
        if 2**depth != patch_size or depth < 1:
            raise ValueError(f"patch_size must be a power of two >= 2, got {patch_size}")
        layers: list[torch.nn.Module] = []
        channels = 3
        for i in range(depth):
            last = i == depth - 1
            out = out_channels if last else width * 2**i
            layers.append(torch.nn.Conv2d(channels, out, kernel_size=3, stride=2, padding=1))
            if not last:
                layers += [torch.nn.GroupNorm(min(4, out), out), torch.nn.GELU()]
            channels = out
        super().__init__(*layers)


class ConvStemIdefics3ForConditionalGeneration(Idefics3ForConditionalGeneration):
    """``Idefics3ForConditionalGeneration`` with ``ConvStem`` as the vision tower's patch embedding; the rest
    (SigLIP layers, pixel-shuffle connector, Llama, generation, TRL's VLM paths) is Idefics3's own."""

    config_class = ConvStemIdefics3Config

    def __init__(self, config: ConvStemIdefics3Config):
        super().__init__(config)
        vision = config.vision_config
        self.model.vision_model.embeddings.patch_embedding = ConvStem(
            vision.hidden_size, vision.patch_size, config.stem_width
        )


AutoConfig.register(CONV_IDEFICS3, ConvStemIdefics3Config, exist_ok=True)  # importing this module lets Auto* load it
AutoModelForImageTextToText.register(ConvStemIdefics3Config, ConvStemIdefics3ForConditionalGeneration, exist_ok=True)


def build_tokenizer() -> PreTrainedTokenizerFast:
    """Word-level; markup and image tokens special; ``CALL``/``ANSWER`` added (decoded as their text)."""
    specials = [BOS, EOT, PAD, UNK, IMAGE, HEADER_OPEN, HEADER_CLOSE, *_IDEFICS3_SPECIALS]
    word_level = Tokenizer(models.WordLevel({token: i for i, token in enumerate(specials + _WORDS)}, unk_token=UNK))
    word_level.pre_tokenizer = pre_tokenizers.Whitespace()
    return two_action_tokenizer(
        word_level,
        specials,
        CHAT_TEMPLATE,
        additional_special_tokens=specials[4:],
        extra_special_tokens={"image_token": IMAGE},
    )


def two_action_tokenizer(
    word_level: Tokenizer, specials: list[str], chat_template: str, **kwargs: Any
) -> PreTrainedTokenizerFast:
    """The fast tokenizer of a two-action policy: ``word_level`` (its vocabulary starting with BOS, EOT, PAD,
    UNK) with ``specials`` special, the two action tokens added, and ``chat_template``; ``kwargs`` go to
    ``PreTrainedTokenizerFast``."""
    word_level.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in specials])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=word_level, bos_token=BOS, eos_token=EOT, pad_token=PAD, unk_token=UNK, **kwargs
    )
    tokenizer.add_tokens(
        [AddedToken(text, special=False, normalized=False) for text in (CALL_TEXT, ANSWER_TEXT)]
    )  # not special: decoding with skip_special_tokens keeps them
    tokenizer.chat_template = chat_template
    return tokenizer


def action_token_ids(tokenizer: PreTrainedTokenizerFast) -> dict[str, int]:
    """``{"call": id, "answer": id}``."""
    return {"call": tokenizer.convert_tokens_to_ids(CALL_TEXT), "answer": tokenizer.convert_tokens_to_ids(ANSWER_TEXT)}


def idefics3_config_and_processor(
    tokenizer: PreTrainedTokenizerFast,
    text: LlamaConfig,
    *,
    image_size: int,
    patch_size: int,
    vision_hidden_size: int,
    vision_heads: int,
    chat_template: str,
    scale_factor: int = 2,
    stem_width: int | None = None,
) -> tuple[Idefics3Config, Idefics3Processor]:
    """A tiny Idefics3 (one-layer SigLIP tower, pixel shuffle by ``scale_factor``, ``text`` as the
    language model) and its processor: no image splitting, images resized to ``image_size`` square, each
    one ``(image_size / patch_size)**2 / scale_factor**2`` tokens of the tokenizer's image token.
    ``stem_width``: a ``ConvStemIdefics3Config`` (CNN patch embedding) instead of Idefics3's own.
    Build the model from the config after seeding torch (the config draws no random numbers)."""
    config_class, extra = (
        (Idefics3Config, {}) if stem_width is None else (ConvStemIdefics3Config, {"stem_width": stem_width})
    )
    config = config_class(
        **extra,
        vision_config=dict(
            hidden_size=vision_hidden_size,
            intermediate_size=2 * vision_hidden_size,
            num_hidden_layers=1,
            num_attention_heads=vision_heads,
            image_size=image_size,
            patch_size=patch_size,
        ),
        text_config=text.to_dict(),
        scale_factor=scale_factor,
        image_token_id=tokenizer.convert_tokens_to_ids(tokenizer.image_token),
        tie_word_embeddings=False,
    )
    image_processor = Idefics3ImageProcessorPil(
        do_image_splitting=False, size={"longest_edge": image_size}, max_image_size={"longest_edge": image_size}
    )
    image_seq_len = (image_size // patch_size) ** 2 // scale_factor**2
    processor = Idefics3Processor(image_processor, tokenizer, image_seq_len=image_seq_len, chat_template=chat_template)
    return config, processor


def build_two_action_vlm(
    path: str | Path,
    *,
    image_size: int = DEFAULT_IMAGE_SIZE,
    patch_size: int = DEFAULT_PATCH_SIZE,
    stem_width: int | None = DEFAULT_STEM_WIDTH,
    hidden_size: int = 64,
    layers: int = 2,
    seed: int = 0,
) -> Path:
    """Write the random-weight policy (model, processor, generation config) to ``path`` and return it.

    Images are resized to ``image_size`` x ``image_size``; each becomes ``(image_size / patch_size)**2 / 4``
    image tokens (pixel shuffle, scale factor 2). ``stem_width``: the CNN patch embedding's first width
    (``ConvStemIdefics3ForConditionalGeneration``); None: Idefics3's own linear patch embedding.
    """
    tokenizer = build_tokenizer()
    head_dim = 32
    text = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=hidden_size // head_dim,
        num_key_value_heads=hidden_size // head_dim,
        head_dim=head_dim,
        max_position_embeddings=8192,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    config, processor = idefics3_config_and_processor(
        tokenizer,
        text,
        image_size=image_size,
        patch_size=patch_size,
        vision_hidden_size=hidden_size,
        vision_heads=2,
        chat_template=CHAT_TEMPLATE,
        stem_width=stem_width,
    )
    torch.manual_seed(seed)
    model_class = Idefics3ForConditionalGeneration if stem_width is None else ConvStemIdefics3ForConditionalGeneration
    model = model_class(config).eval()
    actions = set(action_token_ids(tokenizer).values())
    with torch.no_grad():  # a uniform initial policy: equal action logits whatever the input (see module doc)
        model.get_output_embeddings().weight[sorted(actions)] = 0.0
    generation = model.generation_config
    generation.eos_token_id, generation.pad_token_id = tokenizer.eos_token_id, tokenizer.pad_token_id
    generation.suppress_tokens = [i for i in range(len(tokenizer)) if i not in actions]
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path
