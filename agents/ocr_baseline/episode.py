"""One decision's view of the episode: the dialogue parsed into what the agent knows and can read."""

from __future__ import annotations

import json
from typing import Any, Callable, Sequence

from vtb_agents.base import Observation
from vtb_agents.ocr_baseline.dialogue import (
    call_args,
    call_name,
    final_answers,
    image_names,
    is_prompt,
    message_text,
    tool_call,
    variants,
)
from vtb_agents.ocr_baseline.questions import Question
from vtb_agents.ocr_baseline.reading import Reading, parse_reading
from vtb_agents.ocr_baseline.voting import same_documents, vote
from vtb_env.toolsets import VISION_TOOL

Ocr = Callable[[Any], list[Any]]  # image -> OCR words


class EpisodeView:
    """The dialogue so far (prompts, the images each turn brought, this turn's tool calls and
    results, the transformed variants the agent made) and readings of its images through ``ocr``
    (and of repaired regions also through ``second``, when given)."""

    def __init__(self, observation: Observation, ocr: Ocr, second: Ocr | None = None):
        self.ocr = ocr
        self.second = second  # reads a repaired region again as one block of printed lines, for the vote
        self.messages = list(observation.get("messages") or ())
        self.images = dict(zip(observation.get("image_names") or (), observation.get("images") or (), strict=False))
        self.offered = {tool.get("function", {}).get("name") for tool in observation.get("tools") or ()}
        prompts = [i for i, m in enumerate(self.messages) if is_prompt(self.messages, i)]
        self.prompt_at = prompts[-1] if prompts else None
        shown = image_names(self.messages, observation.get("image_names") or ())
        self.turn_originals = [shown[i] for i in prompts]
        after = self.messages[(self.prompt_at if self.prompt_at is not None else 0) + 1 :]
        self.calls = [c for m in after if m.get("role") == "assistant" for c in m.get("tool_calls") or ()]
        self.results = {m.get("tool_call_id"): str(m.get("content") or "") for m in after if m.get("role") == "tool"}
        self.variants = variants(self.messages)
        answers = final_answers(self.messages)
        prompt = message_text(self.messages[self.prompt_at]) if self.prompt_at is not None else ""
        previous = answers[-1] if answers else ""
        clarified = previous.rstrip().endswith("?")
        earlier = [message_text(self.messages[i]) for i in prompts[:-1]]
        self.dialogue = " ".join(earlier + answers)  # what was asked and answered before this turn
        text = f"{earlier[-1]} {prompt}" if clarified and earlier else prompt
        self.question = Question(text, prompt, previous, clarified)

    # -- reading --

    def reading(self, name: str) -> Reading:
        """The best reading of a task image: its transformed variants (when made) merged with the original."""
        original, *regions = self.region_readings(name)
        combined = Reading()
        for read in regions:
            combined = combined.merged(read)
        return combined.merged(original) if regions else original

    def region_readings(self, name: str) -> list[Reading]:
        """The original image's reading, then one voted reading per document the vision tool repaired
        (regions whose readings share rows, e.g. one sheet found by its outline and as a text region)."""
        original = parse_reading(self.ocr(self.images[name])) if name in self.images else Reading()
        regions: dict[str, list[str]] = {}
        for variant, (source, box) in self.variants.items():
            if source == name and variant in self.images:
                regions.setdefault(json.dumps(box), []).append(variant)
        size = self.images[name].size if name in self.images else None
        return [original] + [
            vote(doc) for doc in same_documents([self.region_votes(v, size) for v in regions.values()], original)
        ]

    def region_votes(self, variants: Sequence[str], page_size: tuple[int, int] | None = None) -> list[Reading]:
        """Readings of one region: its quarter turns in order up to the first that reads cleanly, and the
        best of them read again as one block of lines (``second``), for the vote.

        Sparse-text OCR drops whole rows of a flattened table (lone numbers in a column); block OCR reads
        it line by line but garbles scattered text (a chart's labels), so both readings vote. A variant of
        ``page_size`` (the whole picture, its light evened out) is not read as a block: block OCR of a
        scene makes rows of clutter.
        """
        read: list[tuple[Reading, str]] = []
        for variant in variants:
            reading = parse_reading(self.ocr(self.images[variant]))
            read.append((reading, variant))
            if reading.legible:
                break
        best, variant = max(read, key=lambda rv: (rv[0].quality, len(rv[0].rows)), default=(Reading(), ""))
        if variant and self.second is not None and self.images[variant].size != page_size:
            read.append((parse_reading(self.second(self.images[variant])), variant))
        return [reading for reading, _variant in read]

    def word_sets(self, name: str) -> list[list[Any]]:
        """OCR words of a task image and of each of its transformed variants (for tickets and maps)."""
        sources = [name] + [v for v, (src, _box) in self.variants.items() if src == name]
        return [list(self.ocr(self.images[s])) for s in sources if s in self.images]

    def current(self) -> list[str]:
        """The images the latest prompt brought (none when it brought none)."""
        return self.turn_originals[-1] if self.turn_originals else []

    def image_for_turn(self, back: int) -> list[str]:
        """Images of the latest turn that brought images, ``back`` such turns ago (0 = newest)."""
        with_images = [names for names in self.turn_originals if names]
        return with_images[-1 - back] if len(with_images) > back else []

    def in_view(self) -> list[str]:
        """The images a question about "this image" means: the latest prompt's, else the newest ones."""
        return self.current() or self.image_for_turn(0)

    def repaired(self, name: str) -> bool:
        """Has the vision tool already made variants of image ``name``?"""
        return any(src == name for src, _box in self.variants.values())

    def can_repair(self, names: Sequence[str]) -> bool:
        """Is the vision tool offered, and is one of ``names`` not repaired yet?"""
        return VISION_TOOL in self.offered and any(n in self.images and not self.repaired(n) for n in names)

    # -- tools --

    def lookup(self, tool: str, arguments: dict[str, Any]) -> str | None:
        """The result of a lookup already made this turn, or None (the caller then makes it)."""
        for call in self.calls:
            if call_name(call) == tool and call_args(call) == arguments:
                return self.results.get(call.get("id"), "")
        return None

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The action that calls ``tool`` with ``arguments`` as this turn's next tool call."""
        return tool_call(tool, arguments, len(self.calls))

    def vision_calls(self) -> int:
        """Calls of the vision tool made this turn."""
        return sum(call_name(c) == VISION_TOOL for c in self.calls)
