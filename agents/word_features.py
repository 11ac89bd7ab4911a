"""How the reading policy (``vtb_agents.two_action_text``) sees text: words from characters, by shape, and the
words a question and a page share.

Everything here is fixed (no learned choice) except the embeddings of ``WordFeatures``; the module doc of
``two_action_text`` says why each piece is there. Tensors are ``[batch, positions]`` of token ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import torch
from torch import nn

# Segments: which kind of text a position is in, set by the latest markup token before it.
OTHER, TEXT, PAGE = 0, 1, 2
# Character classes. A word is a run of letters, digits and joiners with at least one letter or digit
# ("S-2", "8.4", "mg/dL", "10:30"); separators (spaces, other punctuation, markup, [UNK]) end it.
SEPARATOR, UPPER, LOWER, DIGIT, JOINER = 0, 1, 2, 3, 4
JOINERS = ".-/%+:'$#&_"
NOT_SHARED, SHARED_WORD, SHARED_NAME = 0, 1, 2
SHAPE_CHARS = 8  # the shape describes a word's first 8 letters and digits by class and place
LENGTH_BUCKETS = (1, 2, 3, 5, 8)  # word length <= 1, 2, 3, 5, 8, longer
LOWER_BUCKETS = 512  # hashed identities of all-lowercase words
HASH_BITS = 40


def token_tables(vocab: Mapping[str, int], size: int, segment_of: Mapping[int, int]) -> dict[str, list[int]]:
    """Per token id (``size`` ids; ``vocab``: single characters -> id, ``segment_of``: markup id -> the segment
    it opens): character class, lower-case character id (for the word hash), segment opened (-1: none)."""
    classes, lower, segments = [SEPARATOR] * size, list(range(size)), [-1] * size
    for character, i in vocab.items():
        if len(character) != 1:
            continue
        if character in JOINERS:
            classes[i] = JOINER
        elif character.isdigit():
            classes[i] = DIGIT
        elif character.isalpha() and character.lower() in vocab:
            classes[i] = UPPER if character.isupper() else LOWER
            lower[i] = vocab[character.lower()]
    for i, segment in segment_of.items():
        segments[i] = segment
    return {"char_classes": classes, "lower_ids": lower, "segment_markers": segments}


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
    """Input embeddings: markup, unread images and actions by token; each word, at the position after it, by
    shape, length, joiners, shared mark, segment and (all-lowercase words) hashed identity. ``config`` gives
    ``hidden_size``, ``vocab_size``, the ``token_tables``, ``unread_image_id`` and ``action_ids``."""

    def __init__(self, config: Any):
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
