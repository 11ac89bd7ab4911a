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
  TRL's assistant masks work. The model groups the characters into words (runs of letters and digits)
  and describes each word, at the first position after it, by its **shape** (the classes upper /
  lower / digit of its first characters, its last character's class, its length), not its spelling;
  all-lowercase words (the question's and the page's ordinary words) also get a hashed identity.
- **Words the question and the page share.** Each word also carries one bit: does the same word
  (case-insensitive, compared by a 40-bit hash of its characters) occur *earlier* in the other kind of
  text (a page if it is in the question or another user text, the question if it is on a page)? The
  bit looks back only, so the model stays causal: a prefix gets the same features whatever follows.
- **A small transformer over the words.** The positions that end a word, and the markup, form a
  compact sequence that two causal self-attention blocks (no position encoding: order comes from
  causality) read; each position's output is that of the latest such position.
- **Two actions, a uniform start.** The output layer scores only ``CALL`` and ``ANSWER`` (every other
  token gets a fixed -1e4, so sampling, SFT and GRPO all see the two-way choice), from a zero-initialised
  head: the initial policy picks either action with probability 1/2 on every input.
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from huggingface_hub.dataclasses import strict
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
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

from vtb_agents.two_action_vlm import ANSWER_TEXT, CALL_TEXT

BOS, EOT, PAD, UNK = "<|begin_of_text|>", "<|eot_id|>", "<|pad|>", "[UNK]"
ROLES = {"system": "<|system|>", "user": "<|user|>", "assistant": "<|assistant|>", "tool": "<|tool|>"}
PAGE_OPEN, PAGE_CLOSE, UNREAD_IMAGE = "<|page|>", "<|/page|>", "<|image|>"
SPECIALS = [BOS, EOT, PAD, UNK, *ROLES.values(), PAGE_OPEN, PAGE_CLOSE, UNREAD_IMAGE]
CHARACTERS = string.printable  # letters, digits, punctuation, whitespace; anything else reads as [UNK]

# Segments: which kind of text a position is in, set by the latest markup token before it.
OTHER, TEXT, PAGE = 0, 1, 2
_SEGMENT_OF = {BOS: OTHER, EOT: OTHER, ROLES["system"]: OTHER, ROLES["assistant"]: OTHER, ROLES["tool"]: OTHER}
_SEGMENT_OF.update({ROLES["user"]: TEXT, PAGE_CLOSE: TEXT, PAGE_OPEN: PAGE})
# Character classes. A word is a run of letters, digits and joiners with at least one letter or digit
# ("S-2", "8.4", "mg/dL", "10:30"); separators (spaces, other punctuation, markup, [UNK]) end it.
SEPARATOR, UPPER, LOWER, DIGIT, JOINER = 0, 1, 2, 3, 4
JOINERS = ".-/%+:'$#&_"
NOT_SHARED, SHARED_WORD, SHARED_NAME = 0, 1, 2
SHAPE_CHARS = 8  # the shape describes a word's first 8 letters and digits by class and place
LENGTH_BUCKETS = (1, 2, 3, 5, 8)  # word length <= 1, 2, 3, 5, 8, longer
LOWER_BUCKETS = 512  # hashed identities of all-lowercase words
HASH_BITS = 40
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
    characters.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in SPECIALS])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=characters,
        bos_token=BOS,
        eos_token=EOT,
        pad_token=PAD,
        unk_token=UNK,
        additional_special_tokens=SPECIALS[4:],
        image_view=image_view,
    )
    tokenizer.add_tokens([AddedToken(text, special=False, normalized=False) for text in (CALL_TEXT, ANSWER_TEXT)])
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def action_token_ids(tokenizer: PreTrainedTokenizerFast) -> dict[str, int]:
    """``{"call": id, "answer": id}``."""
    return {"call": tokenizer.convert_tokens_to_ids(CALL_TEXT), "answer": tokenizer.convert_tokens_to_ids(ANSWER_TEXT)}


def _token_tables(tokenizer: PreTrainedTokenizerFast) -> dict[str, list[int]]:
    """Per token id: character class, lower-case character id (for the word hash), segment it opens (-1: none)."""
    size = len(tokenizer)
    classes, lower, segments = [SEPARATOR] * size, list(range(size)), [-1] * size
    for character in CHARACTERS:
        i = tokenizer.convert_tokens_to_ids(character)
        if character in JOINERS:
            classes[i] = JOINER
        elif character.isdigit():
            classes[i] = DIGIT
        elif character.isalpha():
            classes[i] = UPPER if character.isupper() else LOWER
            lower[i] = tokenizer.convert_tokens_to_ids(character.lower())
    for token, segment in _SEGMENT_OF.items():
        segments[tokenizer.convert_tokens_to_ids(token)] = segment
    return {"char_classes": classes, "lower_ids": lower, "segment_markers": segments}


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


def _shift(values: torch.Tensor) -> torch.Tensor:
    """``values`` moved one position right along dim 1 (the first position gets 0 / False)."""
    return torch.nn.functional.pad(values[:, :-1], (1, 0))


@dataclass
class Words:
    """Per position ([B, L] each): character class, letter or digit, place among the word's letters and digits
    (capped); and, where a word has just ended (``ends``), its start, length (letters and digits), whether
    joiners such as ``-`` or ``.`` join its parts, hash, all-lowercase flag, segment and ``shared``
    (``NOT_SHARED``, ``SHARED_WORD``: matched where one of the two is all-lowercase, ``SHARED_NAME``: neither)."""

    classes: torch.Tensor
    alnum: torch.Tensor
    place: torch.Tensor
    ends: torch.Tensor
    start: torch.Tensor
    length: torch.Tensor
    joined: torch.Tensor
    hash: torch.Tensor
    lowercase: torch.Tensor
    segment: torch.Tensor
    word_segment: torch.Tensor
    shared: torch.Tensor


class WordFeatures(nn.Module):
    """Input embeddings: markup and punctuation by token; each word, at the position after it, by shape,
    length, shared bit (module doc), segment and (all-lowercase words) hashed identity."""

    def __init__(self, config: TwoActionTextConfig):
        super().__init__()
        d = config.hidden_size
        self.token = nn.Embedding(config.vocab_size, d)
        self.shape = nn.Embedding(3 * SHAPE_CHARS, d)
        self.last = nn.Embedding(5, d)
        self.length = nn.Embedding(len(LENGTH_BUCKETS) + 1, d)
        self.shared = nn.Embedding(3, d)
        self.joined = nn.Embedding(2, d)
        self.segment = nn.Embedding(3, d)
        self.lower_word = nn.Embedding(LOWER_BUCKETS, d)
        for name in ("char_classes", "lower_ids", "segment_markers"):
            self.register_buffer(name, torch.tensor(getattr(config, name), dtype=torch.long))
        self.register_buffer("length_edges", torch.tensor(LENGTH_BUCKETS))
        self.unread_image = config.unread_image_id
        self.register_buffer("action_ids", torch.tensor(config.action_ids, dtype=torch.long))

    def words(self, input_ids: torch.Tensor, mask: torch.Tensor) -> Words:
        """Where words end and what describes them (no learned weights: the fixed part of the encoding)."""
        classes = self.char_classes[input_ids]
        in_word = (classes != SEPARATOR) & mask
        alnum = in_word & (classes != JOINER)
        positions = torch.arange(input_ids.size(1), device=input_ids.device).expand_as(input_ids)
        prev_in_word = _shift(in_word)
        start = torch.where(in_word & ~prev_in_word, positions, torch.zeros_like(positions))
        start = torch.cummax(start, dim=1).values  # the current run's first position (for in-word positions)
        word_start = _shift(start)  # at the position after a word: where that word began
        alnum_so_far = torch.cumsum(alnum.long(), dim=1)
        before_run = torch.gather(alnum_so_far, 1, (start - 1).clamp(min=0)) * (start > 0)
        place = (alnum_so_far - before_run - 1).clamp(min=0)  # a letter's or digit's place among the word's
        word_hash = self._word_sum(self._char_hash(self.lower_ids[input_ids], place) * alnum, word_start)
        length = self._word_sum(alnum.long(), word_start)
        upper_or_digit = ((classes == UPPER) | (classes == DIGIT)) & alnum
        lowercase = self._word_sum(upper_or_digit.long(), word_start) == 0
        segment = self._segments(input_ids, mask)
        word_segment = _shift(segment)  # a word's segment is its last character's
        ends = ~in_word & prev_in_word & (length > 0)  # the first position after a word describes it
        return Words(
            classes=classes,
            alnum=alnum,
            place=place.clamp(max=SHAPE_CHARS - 1),
            ends=ends,
            start=word_start,
            length=length,
            joined=self._word_sum((in_word & ~alnum).long(), word_start) > 0,
            hash=word_hash,
            lowercase=lowercase,
            segment=segment,
            word_segment=word_segment,
            shared=self._shared(word_hash, ends, word_segment, lowercase),
        )

    def forward(self, input_ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(embeddings [B, L, d], key [B, L])``: ``key`` marks the positions the transformer reads (words' ends
        and markup)."""
        w = self.words(input_ids, mask)
        letters = self.shape((w.classes.clamp(min=UPPER, max=DIGIT) - UPPER) * SHAPE_CHARS + w.place)
        word = (
            self._word_sum(letters * w.alnum[..., None], w.start)
            + self.last(_shift(w.classes))
            + self.length(torch.bucketize(w.length, self.length_edges))
            + self.joined(w.joined.long())
            + self.shared(w.shared)
            + self.segment(w.word_segment)
            + self.lower_word(w.hash % LOWER_BUCKETS) * w.lowercase[..., None]
        )
        tokens = (self.segment_markers[input_ids] >= 0) | (input_ids == self.unread_image)
        tokens = (tokens | torch.isin(input_ids, self.action_ids)) & mask  # markup, unread images, actions
        embeddings = word * w.ends[..., None] + (self.token(input_ids) + self.segment(w.segment)) * tokens[..., None]
        return embeddings, w.ends | tokens

    @staticmethod
    def _word_sum(values: torch.Tensor, word_start: torch.Tensor) -> torch.Tensor:
        """For each position i: the sum of ``values`` over ``word_start[i] .. i-1``."""
        total = torch.cumsum(values, dim=1)
        before_start = word_start - 1
        index = before_start.clamp(min=0)
        if values.dim() == 3:
            index = index[..., None].expand(-1, -1, values.size(-1))
        at_start = torch.gather(total, 1, index)
        at_start = torch.where((before_start >= 0).view(*before_start.shape, *([1] * (values.dim() - 2))), at_start, 0)
        prev_total = torch.nn.functional.pad(total[:, :-1], (0, 0, 1, 0) if values.dim() == 3 else (1, 0))
        return prev_total - at_start

    @staticmethod
    def _char_hash(lower_ids: torch.Tensor, place: torch.Tensor) -> torch.Tensor:
        """A pseudo-random 40-bit value per (character, place in word); a word's hash is their sum."""
        mixed = (lower_ids + 1) * 1_000_003 + (place.clamp(max=63) + 1) * 7_919
        return (mixed * mixed) & ((1 << HASH_BITS) - 1)

    def _segments(self, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        opens = self.segment_markers[input_ids]
        positions = torch.arange(input_ids.size(1), device=input_ids.device).expand_as(input_ids)
        latest = torch.cummax(torch.where((opens >= 0) & mask, positions, -1), dim=1).values
        segment = torch.gather(opens, 1, latest.clamp(min=0))
        return torch.where(latest >= 0, segment, OTHER)

    @staticmethod
    def _shared(
        word_hash: torch.Tensor, ends: torch.Tensor, segment: torch.Tensor, lowercase: torch.Tensor
    ) -> torch.Tensor:
        """Does the word ending here occur earlier in the other kind of text (question vs page), and as a name?"""
        reading = ends & (segment != OTHER)
        earlier = torch.ones(word_hash.shape[1], word_hash.shape[1], dtype=torch.bool, device=word_hash.device).tril(-1)
        match = (
            (word_hash[:, :, None] == word_hash[:, None, :])
            & (segment[:, :, None] != segment[:, None, :])
            & earlier
            & reading[:, None, :]
            & reading[:, :, None]
        )
        as_name = (match & ~lowercase[:, None, :]).any(dim=2) & ~lowercase
        return torch.where(as_name, SHARED_NAME, torch.where(match.any(dim=2), SHARED_WORD, NOT_SHARED))


class Block(GradientCheckpointingLayer):
    """Pre-norm causal self-attention and MLP."""

    def __init__(self, config: TwoActionTextConfig):
        super().__init__()
        d, self.heads = config.hidden_size, config.num_attention_heads
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(
            nn.Linear(d, config.intermediate_size), nn.GELU(), nn.Linear(config.intermediate_size, d)
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
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=self.config.initializer_range)
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
        **_token_tables(tokenizer),
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
