"""A tiny reading policy whose every reply is one of two actions, over the question and the OCR words of the pictures.

The text twin of ``vtb_agents.two_action_vlm``: the same two action tokens (``CALL``, a complete
``python_image_processing`` zoom, and ``ANSWER``, a fixed final answer), chosen at each assistant
turn, but the policy reads text, not pixels. The env's images reach it through
``vtb_env.ocr_view.OcrView``: each picture becomes the words a frozen reader (Tesseract) sees in it,
wrapped in ``<|page|>`` ... ``<|/page|>`` by the chat template. Built offline with random weights
(``build_two_action_text``), it saves and loads with ``save_pretrained`` / ``AutoModelForCausalLM``
and ``AutoTokenizer`` (importing this module registers the classes) and trains with TRL like any
causal LM (its tokenizer names the view, ``image_view``, that ``vtb_agents.rollout.ChatRenderer`` applies).

How it reads (all learned except the input encoding):

- **Characters in, words inside.** The tokenizer is a standard fast tokenizer over single characters
  (plus the chat markup and the two action tokens), so any name, code or number can be written and
  TRL's assistant masks work. The model groups the characters into words (runs of letters, digits and
  joiners such as ``-`` ``.`` ``/``: ``S-2``, ``8.4``, ``mg/dL``) and describes each word, at the first
  position after it, by its **shape** (upper / lower / digit class of its first letters and digits,
  its last character's class, its length, whether joiners join it), not its spelling; all-lowercase
  words (the question's and the page's ordinary words) also get a hashed identity.
- **Words the question and the page share.** Each word is marked when the same word (case-insensitive,
  letters and digits compared by a 40-bit hash) occurs *earlier* in the other kind of text: on a page if
  it is in a question, in a question if it is on a page. A match where neither word is all-lowercase is a
  *name* match (``Calcium``, ``QUIL``, ``S-2``), otherwise a *word* match (``result`` / ``Result``). The
  marks look back only, so the model stays causal: a prefix gets the same features whatever follows.
- **A small transformer over the words.** The positions that end a word, the markup and the actions
  form a compact sequence; a running maximum over it (a learned projection: the strongest evidence read
  so far) joins each position's input, then two causal self-attention blocks (no position encoding:
  order comes from causality) read it. Every position's output is that of the latest such position.
- **Two actions, a uniform start.** The output layer's rows other than ``CALL`` and ``ANSWER`` are zero
  with bias -1e4 (so sampling, SFT and GRPO all see the two-way choice, and TRL's fused head works as on
  any causal LM); the two action rows start at zero: the initial policy picks either action with
  probability 1/2 on every input.

Why the initialisation: supervised on the first decision's mode label, GPT-style init (0.02 everywhere)
sat at the chance loss for 10-14 epochs before separating the twins (one page word in ~50 carries the
mark, averaged away by the initially uniform attention); with the running maximum's layers at 0.3 and
the blocks' residual outputs at zero (they start as the identity) it separated them after 2-3 epochs.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import torch
from huggingface_hub.dataclasses import strict
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    GenerationMixin,
    PreTrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
)
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutput, CausalLMOutput

from vtb_agents.two_action_vlm import (
    ANSWER_TEXT,
    BOS,
    CALL_TEXT,
    EOT,
    PAD,
    UNK,
    action_token_ids,
    two_action_tokenizer,
)
from vtb_agents.word_features import OTHER, PAGE, TEXT, WordFeatures, token_tables

ROLES = {"system": "<|system|>", "user": "<|user|>", "assistant": "<|assistant|>", "tool": "<|tool|>"}
PAGE_OPEN, PAGE_CLOSE, UNREAD_IMAGE = "<|page|>", "<|/page|>", "<|image|>"
SPECIALS = [BOS, EOT, PAD, UNK, *ROLES.values(), PAGE_OPEN, PAGE_CLOSE, UNREAD_IMAGE]
CHARACTERS = string.printable  # letters, digits, punctuation, whitespace; anything else reads as [UNK]

_SEGMENT_OF = {BOS: OTHER, EOT: OTHER, ROLES["system"]: OTHER, ROLES["assistant"]: OTHER, ROLES["tool"]: OTHER}
_SEGMENT_OF.update({ROLES["user"]: TEXT, PAGE_CLOSE: TEXT, PAGE_OPEN: PAGE})
EVIDENCE_INIT = 0.3  # the running maximum's layers (module doc: why the initialisation)
NO_ACTION_LOGIT = -1e4  # every token but the two actions: exp(-1e4) is 0 in float32 and bfloat16

# Chat markup: roles as tokens, pages (OCR parts, see vtb_env.ocr_view) between <|page|> and <|/page|>, an
# image nobody read as <|image|>; an assistant message is its action token (marked for assistant-only SFT),
# with no end-of-turn after it (the policy's one token is its whole reply); no tool list (CALL is built in).
CHAT_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'assistant' %}<|assistant|>{% generation %}"
    "{{ " + json.dumps(CALL_TEXT) + " if message['tool_calls'] else " + json.dumps(ANSWER_TEXT) + " }}"
    "{% endgeneration %}"
    "{%- else %}"
    "{{ {'system': '<|system|>', 'user': '<|user|>', 'tool': '<|tool|>'}[message['role']] }}"
    "{%- if message['content'] is string %}{{ message['content'] }}"
    "{%- elif message['content'] %}{%- for part in message['content'] %}"
    "{%- if part['type'] == 'text' and part['ocr'] is defined and part['ocr'] %}<|page|>{{ part['text'] }}<|/page|>"
    "{%- elif part['type'] == 'text' %} {{ part['text'] }}"
    "{%- else %}<|image|>{%- endif %}"
    "{%- endfor %}{%- endif %}<|eot_id|>"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>{% endif %}"
)

MODEL_TYPE = "vtb_two_action_text"


def build_tokenizer(image_view: str = "ocr") -> PreTrainedTokenizerFast:
    """One token per character of ``CHARACTERS`` (others: ``[UNK]``); markup special; ``CALL``/``ANSWER`` added.

    ``image_view`` (saved in its config) names the observation view the policy reads through
    (``vtb_env.ocr_view.VIEWS``; ``vtb_agents.rollout.policy_view`` applies it)."""
    vocab = {token: i for i, token in enumerate(SPECIALS + list(CHARACTERS))}
    characters = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    characters.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    characters.decoder = decoders.Fuse()
    return two_action_tokenizer(
        characters, SPECIALS, CHAT_TEMPLATE, additional_special_tokens=SPECIALS[4:], image_view=image_view
    )


@strict
class TwoActionTextConfig(PreTrainedConfig):
    """Sizes, and the tokenizer's per-token tables and ids the model reads its input with."""

    model_type = MODEL_TYPE

    vocab_size: int = 0
    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    intermediate_size: int = 256
    char_classes: list[int] | None = None
    lower_ids: list[int] | None = None
    segment_markers: list[int] | None = None
    action_ids: list[int] | None = None
    unread_image_id: int = 0
    initializer_range: float = 0.02
    tie_word_embeddings: bool = False


def _linear(inputs: int, outputs: int, init_std: float) -> nn.Linear:
    """A linear layer that ``_init_weights`` initialises with ``init_std`` (0: zeros) instead of the default."""
    layer = nn.Linear(inputs, outputs)
    layer.init_std = init_std
    return layer


class Block(GradientCheckpointingLayer):
    """Pre-norm causal self-attention and MLP."""

    def __init__(self, config: TwoActionTextConfig):
        super().__init__()
        d, self.heads = config.hidden_size, config.num_attention_heads
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), _linear(d, d, 0.0)  # residual branches start as identity
        self.mlp = nn.Sequential(
            nn.Linear(d, config.intermediate_size), nn.GELU(), _linear(config.intermediate_size, d, 0.0)
        )

    def forward(self, x: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attended = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed[:, None])
        x = x + self.out(attended.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.norm2(x))


class TwoActionTextPreTrainedModel(PreTrainedModel):
    config_class = TwoActionTextConfig
    config: TwoActionTextConfig
    base_model_prefix = "reader"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True  # TRL's GRPOConfig turns it on by default
    _supports_sdpa = True

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):  # a layer may set its own ``init_std`` (0: zeros)
            nn.init.normal_(module.weight, std=getattr(module, "init_std", self.config.initializer_range))
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
        if isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        if module is getattr(self, "lm_head", None):  # the two actions, uniform; every other token out (module doc)
            nn.init.zeros_(module.weight)
            with torch.no_grad():
                module.bias.fill_(NO_ACTION_LOGIT)
                module.bias[self.config.action_ids] = 0.0


class TwoActionTextModel(TwoActionTextPreTrainedModel):
    """The reader: word features, then the blocks over the positions that end a word or are markup; the last
    hidden state of every position is that of the latest such position at or before it."""

    def __init__(self, config: TwoActionTextConfig):
        super().__init__(config)
        self.features = WordFeatures(config)
        self.evidence = _linear(config.hidden_size, config.hidden_size, EVIDENCE_INIT)
        self.evidence_out = _linear(config.hidden_size, config.hidden_size, EVIDENCE_INIT)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.num_hidden_layers))
        self.norm = nn.LayerNorm(config.hidden_size)
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        return self.features.token

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **_: Any) -> BaseModelOutput:
        mask = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
        embeddings, key = self.features(input_ids, mask)
        order = torch.argsort((~key).to(torch.int8), dim=1, stable=True)  # key positions first, in order
        count = int(key.sum(dim=1).max().clamp(min=1))
        order = order[:, :count]
        x = torch.gather(embeddings, 1, order[..., None].expand(-1, -1, embeddings.size(-1)))
        valid = torch.gather(key, 1, order)
        allowed = torch.ones(count, count, dtype=torch.bool, device=x.device).tril() & valid[:, None, :]
        allowed = allowed | torch.eye(count, dtype=torch.bool, device=x.device)  # padding rows attend to themselves
        evidence = self.evidence(x).masked_fill(~valid[..., None], torch.finfo(x.dtype).min)
        x = x + self.evidence_out(torch.cummax(evidence, dim=1).values)  # the strongest evidence read so far
        for block in self.blocks:
            x = block(x, allowed)
        x = self.norm(x)
        latest = (torch.cumsum(key.long(), dim=1) - 1).clamp(min=0)
        return BaseModelOutput(last_hidden_state=torch.gather(x, 1, latest[..., None].expand(-1, -1, x.size(-1))))


class TwoActionTextForCausalLM(TwoActionTextPreTrainedModel, GenerationMixin):
    """The reading policy (module doc): ``TwoActionTextModel`` and a linear head whose rows other than ``CALL``
    and ``ANSWER`` are zero with bias ``NO_ACTION_LOGIT``."""

    def __init__(self, config: TwoActionTextConfig):
        super().__init__(config)
        self.reader = TwoActionTextModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size)
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        return self.reader.get_input_embeddings()

    def get_output_embeddings(self) -> nn.Module:
        return self.lm_head

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        logits_to_keep: int = 0,
        **_: Any,
    ) -> CausalLMOutput:
        hidden = self.reader(input_ids, attention_mask).last_hidden_state
        logits = self.lm_head(hidden[:, -logits_to_keep:] if logits_to_keep else hidden)
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1), ignore_index=-100
            )
        return CausalLMOutput(loss=loss, logits=logits)

    def prepare_inputs_for_generation(self, input_ids: torch.Tensor, attention_mask=None, **kwargs: Any):
        return {"input_ids": input_ids, "attention_mask": attention_mask}


AutoConfig.register(MODEL_TYPE, TwoActionTextConfig, exist_ok=True)  # importing this module lets Auto* load it
AutoModelForCausalLM.register(TwoActionTextConfig, TwoActionTextForCausalLM, exist_ok=True)


def build_two_action_text(
    path: str | Path,
    *,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 2,
    image_view: str = "ocr",
    seed: int = 0,
) -> Path:
    """Write the random-weight reading policy (model, tokenizer, generation config) to ``path`` and return it.

    ``image_view``: what the policy is shown of the images (``vtb_env.ocr_view.VIEWS``).
    """
    from vtb_env.ocr_view import VIEWS

    if image_view not in VIEWS:
        raise ValueError(f"image_view must be one of {VIEWS}, got {image_view!r}")
    tokenizer = build_tokenizer(image_view)
    actions = action_token_ids(tokenizer)
    config = TwoActionTextConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden_size,
        action_ids=[actions["call"], actions["answer"]],
        unread_image_id=tokenizer.convert_tokens_to_ids(UNREAD_IMAGE),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **token_tables(
            {c: tokenizer.convert_tokens_to_ids(c) for c in CHARACTERS},
            len(tokenizer),
            {tokenizer.convert_tokens_to_ids(token): segment for token, segment in _SEGMENT_OF.items()},
        ),
    )
    torch.manual_seed(seed)
    model = TwoActionTextForCausalLM(config).eval()
    generation = model.generation_config
    generation.eos_token_id, generation.pad_token_id = tokenizer.eos_token_id, tokenizer.pad_token_id
    generation.use_cache = False  # the model keeps no cache: every step reads the whole prefix
    generation.suppress_tokens = [i for i in range(len(tokenizer)) if i not in actions.values()]
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
