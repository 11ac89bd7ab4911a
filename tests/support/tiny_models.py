"""Tiny models built offline for tests: real transformers classes, random or scripted weights.

Every builder writes a checkpoint with ``save_pretrained`` into a directory and returns it; it
reloads with the real ``Auto*`` classes and is served by vLLM (CPU build included). Checkpoints
are a few MB and build in well under a second. All share one tokenizer (byte-level BPE trained
here on in-code sentences) and one Llama-3-style chat template that renders ``tools`` and maps
``{"type": "image"}`` content parts to ``<image>``. ``head_dim`` is 64 (supported by vLLM's CPU
attention).

``build_scripted_model`` makes a deterministic model whose greedy decoding emits
``<tool_call>{...}</tool_call>`` and, once a tool result is in the conversation, a fixed final
answer: see its docstring for how.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    CLIPVisionConfig,
    Idefics3ForConditionalGeneration,
    Idefics3Processor,
    LlamaConfig,
    LlamaForCausalLM,
    LlavaConfig,
    LlavaForConditionalGeneration,
    LlavaProcessor,
    MllamaConfig,
    MllamaForConditionalGeneration,
    MllamaProcessor,
    PreTrainedTokenizerFast,
)
from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil
from transformers.models.mllama.image_processing_pil_mllama import MllamaImageProcessorPil

from vtb_agents.two_action_vlm import idefics3_config_and_processor

Family = Literal["llama", "idefics3", "llava"]
FAMILIES: tuple[Family, ...] = ("llama", "idefics3", "llava")

BOS, EOT, PAD, IMAGE = "<|begin_of_text|>", "<|eot_id|>", "<|pad|>", "<image>"
TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
# Header words the chat template writes; the scripted model keys on the user and tool ones.
USER_ROLE, TOOL_ROLE = "user", "ipython"
_SPECIAL_TOKENS = [
    BOS,
    EOT,
    PAD,
    IMAGE,
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eom_id|>",
    "<|python_tag|>",
    # Idefics3's processor looks these up by name.
    "<fake_token_around_image>",
    "<global-img>",
    "<end_of_utterance>",
    *(f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)),
]
_HEAD_DIM = 64
_ROPE_THETA = 500000.0

# Llama-3.1 style: tools as JSON lines in a system block, tool results under the `ipython` role,
# calls written hermes-style (what vLLM's `hermes` parser and our raw-text parser read).
CHAT_TEMPLATE = (
    "{{- bos_token }}"
    "{%- if tools %}<|start_header_id|>system<|end_header_id|>\n\n"
    'You may call one of these tools by replying <tool_call>{"name": ..., "arguments": {...}}</tool_call>.\n'
    "{%- for tool in tools %}\n{{ tool | tojson }}{%- endfor %}<|eot_id|>{%- endif %}"
    "{%- for message in messages %}"
    "<|start_header_id|>{{ 'ipython' if message['role'] == 'tool' else message['role'] }}<|end_header_id|>\n\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{%- elif message['content'] %}{%- for part in message['content'] %}"
    "{%- if part['type'] == 'image' %}<image>{%- elif part['type'] == 'text' %}{{ part['text'] }}{%- endif %}"
    "{%- endfor %}{%- endif %}"
    "{%- for call in message['tool_calls'] or [] %}"
    "{%- set fn = call['function'] if call['function'] is defined else call %}"
    '<tool_call>{"name": "{{ fn[\'name\'] }}", "arguments": '
    "{{ fn['arguments'] if fn['arguments'] is string else fn['arguments'] | tojson }}}</tool_call>"
    "{%- endfor %}<|eot_id|>"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)

_CORPUS = [
    "user assistant system ipython tool tools image images answer question",
    "What is shown in the image? Crop the top left corner and zoom in.",
    "The answer is 42. The temperature was 21 degrees in Paris on Monday.",
    "Call python_image_processing with code that rotates the image by 90 degrees.",
    'Use the calculator: {"expression": "2 + 2"} returns 4.',
    "Search the web for the tallest building and read the page text.",
    "def crop(image):\n    return image.crop((0, 0, 10, 10))\n\n",
    "Hello, how can I help you today?\n\nPlease look at image_1.png and transformed_image_0.png.",
]


def build_tokenizer() -> PreTrainedTokenizerFast:
    """Byte-level BPE (~400 tokens) with the Llama-3 specials, ``<tool_call>`` and our template."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=_SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    # Repeat role words and "\n\n" so each becomes one token (the scripted model keys on them), and
    # the same words after a space, so that in running text they are other tokens.
    corpus = _CORPUS * 4 + [f"{USER_ROLE}\n\n{TOOL_ROLE}\n\nassistant\n\n {USER_ROLE} {TOOL_ROLE}"] * 50
    bpe.train_from_iterator(corpus, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token=BOS,
        eos_token=EOT,
        pad_token=PAD,
        extra_special_tokens={"image_token": IMAGE},
    )
    # Not special: vLLM's hermes parser finds them in the vocabulary, and decoding must keep them.
    tokenizer.add_tokens([TOOL_CALL_OPEN, TOOL_CALL_CLOSE])
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def _llama_config(
    tokenizer: PreTrainedTokenizerFast, *, hidden_size: int = 128, layers: int = 2, heads: int = 2
) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * _HEAD_DIM,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        head_dim=_HEAD_DIM,
        max_position_embeddings=4096,
        rope_theta=_ROPE_THETA,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def _save(model: torch.nn.Module, processor_or_tokenizer: Any, path: str | Path) -> Path:
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.generation_config.eos_token_id = model.config.get_text_config().eos_token_id
    model.generation_config.pad_token_id = model.config.get_text_config().pad_token_id
    model.save_pretrained(path)
    processor_or_tokenizer.save_pretrained(path)
    return path


def _idefics3(tokenizer: PreTrainedTokenizerFast, text: LlamaConfig) -> tuple[torch.nn.Module, Idefics3Processor]:
    config, processor = idefics3_config_and_processor(
        tokenizer,
        text,
        image_size=64,
        patch_size=16,
        vision_hidden_size=_HEAD_DIM,
        vision_heads=1,
        chat_template=CHAT_TEMPLATE,
    )
    return Idefics3ForConditionalGeneration(config).eval(), processor


def _llava(tokenizer: PreTrainedTokenizerFast, text: LlamaConfig) -> tuple[torch.nn.Module, LlavaProcessor]:
    image_size, patch_size = 32, 16
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(
            hidden_size=_HEAD_DIM,
            intermediate_size=2 * _HEAD_DIM,
            num_hidden_layers=2,
            num_attention_heads=1,
            image_size=image_size,
            patch_size=patch_size,
            projection_dim=_HEAD_DIM,
        ).to_dict(),
        text_config=text.to_dict(),
        image_token_index=tokenizer.convert_tokens_to_ids(IMAGE),
        image_seq_length=(image_size // patch_size) ** 2,
        vision_feature_layer=-1,
        tie_word_embeddings=False,
    )
    image_processor = CLIPImageProcessorPil(size={"shortest_edge": image_size}, crop_size=image_size)
    processor = LlavaProcessor(
        image_processor,
        tokenizer,
        patch_size=patch_size,
        vision_feature_select_strategy="default",
        chat_template=CHAT_TEMPLATE,
        num_additional_image_tokens=1,
    )
    return LlavaForConditionalGeneration(config).eval(), processor


def _build(family: Family, tokenizer: PreTrainedTokenizerFast, text: LlamaConfig) -> tuple[torch.nn.Module, Any]:
    torch.manual_seed(0)
    if family == "llama":
        return LlamaForCausalLM(text).eval(), tokenizer
    if family == "idefics3":
        return _idefics3(tokenizer, text)
    if family == "llava":
        return _llava(tokenizer, text)
    raise ValueError(f"unknown family {family!r}; expected one of {FAMILIES}")


def build_tiny_llama(path: str | Path) -> Path:
    """A random-weight LlamaForCausalLM (~1 MB) with our tokenizer; load with AutoModelForCausalLM."""
    tokenizer = build_tokenizer()
    return _save(*_build("llama", tokenizer, _llama_config(tokenizer)), path)


def build_tiny_idefics3(path: str | Path) -> Path:
    """A random-weight Idefics3 VLM and processor; load with AutoModelForImageTextToText/AutoProcessor."""
    tokenizer = build_tokenizer()
    return _save(*_build("idefics3", tokenizer, _llama_config(tokenizer)), path)


def build_tiny_llava(path: str | Path) -> Path:
    """A random-weight LLaVA (CLIP vision + Llama) and processor. vLLM CPU needs torchvision for it."""
    tokenizer = build_tokenizer()
    return _save(*_build("llava", tokenizer, _llama_config(tokenizer)), path)


def build_tiny_mllama(path: str | Path) -> Path:
    """A random-weight Mllama (Llama 3.2 Vision: tiled vision encoder, cross-attention text layers) and processor.

    Loads with AutoModelForImageTextToText/AutoProcessor. ``max_num_tiles`` must stay 4 (the
    default supported aspect ratios assume it). Not in ``FAMILIES``: vLLM no longer serves Mllama.
    """
    tokenizer = build_tokenizer()
    text = _llama_config(tokenizer).to_dict()
    text["cross_attention_layers"] = [1]  # layer 0 self-attention, layer 1 cross-attends to the image
    image_size, patch_size = 32, 16
    config = MllamaConfig(
        vision_config=dict(
            hidden_size=_HEAD_DIM,
            intermediate_size=2 * _HEAD_DIM,
            num_hidden_layers=2,
            num_global_layers=1,
            attention_heads=1,
            image_size=image_size,
            patch_size=patch_size,
            max_num_tiles=4,
            intermediate_layers_indices=[0],
            vision_output_dim=2 * _HEAD_DIM,  # hidden x (1 + intermediate layers)
        ),
        text_config=text,
        image_token_index=tokenizer.convert_tokens_to_ids(IMAGE),
    )
    torch.manual_seed(0)
    model = MllamaForConditionalGeneration(config).eval()
    with torch.no_grad():  # the cross-attention gates start at 0 (image ignored) until trained: open them
        for name, parameter in model.named_parameters():
            if name.endswith(("cross_attn_attn_gate", "cross_attn_mlp_gate")):
                parameter.fill_(1.0)
    image_processor = MllamaImageProcessorPil(size={"height": image_size, "width": image_size}, max_image_tiles=4)
    # The processor takes its image token from the tokenizer (ours: <image>, as in CHAT_TEMPLATE).
    return _save(model, MllamaProcessor(image_processor, tokenizer, chat_template=CHAT_TEMPLATE), path)


def build_scripted_model(
    path: str | Path,
    family: Family = "llama",
    tool_call: dict[str, Any] | None = None,
    final_answer: str = "The answer is 42.",
    *,
    call_each_turn: bool = True,
) -> Path:
    """A deterministic model: greedy decoding emits ``<tool_call>{tool_call}</tool_call>`` or ``final_answer``.

    ``tool_call`` is ``{"name": ..., "arguments": {...}}``, or None for a model that always
    answers (a scripted judge, say). Which of the two it emits depends on
    the conversation: with ``call_each_turn`` it calls the tool while the prompt has more ``user``
    messages than ``tool`` results (so: one call per user turn, then the answer once the result is
    in); otherwise it calls only until the first tool result. Either way the reply ends with EOS.
    Identical in transformers and vLLM (float32).

    Construction (one layer, hidden size >= vocabulary, so embeddings are exact one-hot vectors):
    the MLP is off (``down_proj`` = 0) and only one attention head is used: at the last token of
    the generation prompt (``"\\n\\n"``) it attends equally to BOS and to every ``user`` and
    ``ipython`` role-header token, and writes into one extra residual direction U the mean of
    their values (BOS 0, tool -1, user +1 with ``call_each_turn``, else 0). ``lm_head`` reads U
    there to pick the first token of the call or of the answer; every other emitted token predicts
    its successor in a fixed chain (``<tool_call>`` -> CALL -> ``</tool_call>`` -> EOS; ANSWER -> EOS), where CALL and
    ANSWER are each one added token holding the whole text. RoPE (theta 5e5) barely rotates the
    lowest-frequency dimension pair the head uses, so position does not matter up to 4096 tokens.
    Limitation: the words ``user``/``ipython`` written in message text right after a newline or
    punctuation (not after a space) tokenize like role headers and shift the count.
    """
    if tool_call is not None and set(tool_call) != {"name", "arguments"}:
        raise ValueError("tool_call must be {'name': ..., 'arguments': {...}} or None")
    # Without a call, the call chain is never entered (its first token gets no logit).
    call_text = json.dumps(tool_call) if tool_call is not None else None
    tokenizer = build_tokenizer()
    tokenizer.add_tokens([text for text in (call_text, final_answer) if text is not None])
    ids = _scripted_token_ids(tokenizer, call_text, final_answer)
    hidden = -(-(len(tokenizer) + 1) // _HEAD_DIM) * _HEAD_DIM
    text = _llama_config(tokenizer, hidden_size=hidden, layers=1, heads=1)
    model, processor = _build(family, tokenizer, text)
    _script_weights(model, ids, u_dim=hidden - 1, call_each_turn=call_each_turn)
    return _save(model, processor, path)


def _scripted_token_ids(tokenizer: PreTrainedTokenizerFast, call_text: str | None, answer: str) -> dict[str, int]:
    def single(text: str) -> int:
        encoded = tokenizer.encode(text, add_special_tokens=False)
        if len(encoded) != 1:
            raise ValueError(f"{text!r} must be one token, got {tokenizer.convert_ids_to_tokens(encoded)}")
        return encoded[0]

    prompt_end = tokenizer.encode("<|start_header_id|>assistant<|end_header_id|>\n\n", add_special_tokens=False)[-1]
    ids = {
        "bos": tokenizer.bos_token_id,
        "eos": tokenizer.eos_token_id,
        "prompt_end": prompt_end,
        "user": single(USER_ROLE),
        "tool": single(TOOL_ROLE),
        "answer": single(answer),
    }
    if call_text is not None:
        ids.update(open=single(TOOL_CALL_OPEN), call=single(call_text), close=single(TOOL_CALL_CLOSE))
    return ids


@torch.no_grad()
def _script_weights(model: torch.nn.Module, ids: dict[str, int], *, u_dim: int, call_each_turn: bool) -> None:
    lm = model.get_decoder()
    embed, lm_head = model.get_input_embeddings(), model.get_output_embeddings()
    # Zero the language model's matrices and the vision-to-text connector (image positions then carry
    # nothing); the vision tower keeps its random weights. Norm weights (1-D) stay 1.
    connectors = [p for n, p in model.named_parameters() if "connector" in n or "multi_modal_projector" in n]
    for param in (*lm.parameters(), lm_head.weight, *connectors):
        if param.dim() > 1:
            param.zero_()
    vocab, hidden = embed.weight.shape
    embed.weight[:, :vocab] = torch.eye(vocab)
    # RMSNorm of a one-hot vector puts sqrt(hidden) on its coordinate: scale projections back.
    unit = hidden**-0.5
    attn = lm.layers[0].self_attn
    pair = _HEAD_DIM // 2 - 1  # lowest RoPE frequency: rotates < 0.01 rad over 4096 positions
    attn.q_proj.weight[pair, ids["prompt_end"]] = 16 * unit
    value_of = {"bos": 0.0, "user": 1.0 if call_each_turn else 0.0, "tool": -1.0}
    for token, value in value_of.items():
        attn.k_proj.weight[pair, ids[token]] = 16 * unit  # score 16*16/sqrt(64) = 32 against 0 elsewhere
        attn.v_proj.weight[0, ids[token]] = value * unit
    attn.o_proj.weight[u_dim, 0] = 1.0
    # At the prompt end U = mean value: > 0 while a turn still needs its call (call_each_turn), 0 when
    # it has none yet (not call_each_turn), negative after results. Threshold between the cases:
    threshold = 0.02 if call_each_turn else -0.02
    gain, base = 100.0, 50.0
    lm_head.weight[ids["answer"], ids["prompt_end"]] = base + gain * threshold
    chain = [("answer", "eos")]
    if "call" in ids:
        lm_head.weight[ids["open"], ids["prompt_end"]] = base
        lm_head.weight[ids["open"], u_dim] = gain
        chain += [("open", "call"), ("call", "close"), ("close", "eos")]
    for token, successor in chain:
        lm_head.weight[ids[successor], ids[token]] = gain
