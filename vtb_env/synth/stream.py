"""Task generation: one seeded task (and its twin) per index, a finite batch, an endless stream.

Every task is a pure function of ``(seed, index, difficulty)``: facts, wording and images come
from ``numpy`` generators seeded with ``[seed, index, purpose]``.
"""

from __future__ import annotations

import hashlib
from itertools import count, islice
from typing import Callable, Iterator, Mapping, Sequence, Union

import numpy as np
from PIL import Image

from vtb_env.synth.blueprints import Blueprint, Options
from vtb_env.synth.categories import BUILDERS
from vtb_env.synth.matched import SPLITS, Hide, plan_hiding
from vtb_env.synth.scenery import choose_style
from vtb_env.synth.templates import Wording
from vtb_env.synth.twins import GENERATORS, TOOL_REDUNDANT, TOOL_REQUIRED, assemble
from vtb_env.synth.world import giveaways
from vtb_env.tasks import DOMAINS, TASK_CATEGORIES, Task

Difficulty = Union[float, Callable[[int], float]]
_FACTS, _CHOICE, _RENDER_REQUIRED, _RENDER_REDUNDANT, _LOOK, _HIDE, _WORDING, _STYLE = 1, 0, 2, 3, 4, 5, 6, 7
_DRAWS = 16  # v3 draws a pair's facts again (rarely more than once) while a page answers its question
DEFAULT_GENERATOR = "v3"
# Whose reading the static mode label is true for: the generator hides key facts where Tesseract 5 (the OCR probe,
# ``vtb_env.ocr``) cannot read them as shown and can after the reference code; another reader may disagree (RapidOCR
# reads some 11 px side pages as shown: docs/synth.md). Training users: online labels (``group_label``) measure the
# policy being trained instead (docs/rewards.md).
MODE_LABEL_READER = "tesseract-5"
MAX_UNCONFIRMED_PAIRS = 50  # solvable streams: about 1 pair in 4 is refused, 50 in a row means a wrong reader


def _task_id(seed: int, index: int, label: str, generator: str = DEFAULT_GENERATOR, split: str = "all") -> str:
    """v1 ids are unchanged; other generators (and v3's train/held-out splits) get their own, so runs,
    caches and resumes never mix them."""
    prefix = "vtb-synth" if generator == "v1" else f"vtb-synth-{generator}" + (f"-{split}" if split != "all" else "")
    return hashlib.sha1(f"{prefix}:{seed}:{index}:{label}".encode()).hexdigest()[:24]


def _hiding(
    blueprint: Blueprint, rng: np.random.Generator, difficulty: float, split: str
) -> dict[int, list[Hide]] | None:
    """v3's plan for the pair: how each state's key panels are hidden (None: not in ``split``)."""
    reads: dict[int, set[str]] = {}
    for ask in blueprint.asks:
        for state, label in ask.reads:
            reads.setdefault(state, set()).add(label)
    return plan_hiding(blueprint.states, reads, blueprint.split, rng, difficulty, split)


def _weights(names: tuple[str, ...], mix: Mapping[str, float] | None, what: str) -> np.ndarray:
    if not mix:
        return np.full(len(names), 1.0 / len(names))
    unknown = set(mix) - set(names)
    if unknown:
        raise ValueError(f"unknown {what} in mix: {sorted(unknown)}; choose from {list(names)}")
    weights = np.array([float(mix.get(name, 0.0)) for name in names])
    if (weights < 0).any() or weights.sum() <= 0:
        raise ValueError(f"{what} weights must be non-negative and not all zero: {dict(mix)}")
    return weights / weights.sum()


def build_blueprint(
    seed: int,
    index: int,
    *,
    domain: str | None = None,
    category: str | None = None,
    difficulty: float = 0.5,
    generator: str = DEFAULT_GENERATOR,
) -> Blueprint:
    """The facts and words of the pair at ``index``, before anything is drawn (``generate_pair`` renders it)."""
    choice = np.random.default_rng([seed, index, _CHOICE])
    domain = domain or str(choice.choice(DOMAINS))
    category = category or str(choice.choice(TASK_CATEGORIES))
    if domain not in DOMAINS or category not in BUILDERS:
        raise ValueError(f"unknown domain {domain!r} or category {category!r}")
    if generator != "v3":  # v1, v2: the first wording of every question and the original hybrids
        return BUILDERS[category](np.random.default_rng([seed, index, _FACTS]), domain, difficulty, Options())
    for draw in range(_DRAWS):  # v3: a wording per question; lookups, computations; answerable; fair twins
        wording = Wording(np.random.default_rng([seed, index, _WORDING, *([draw] if draw else [])]))
        options = Options(wording, richer=True, answerable=True, shared_vocabulary=True)
        facts = np.random.default_rng([seed, index, _FACTS, *([draw] if draw else [])])
        blueprint = BUILDERS[category](facts, domain, difficulty, options)
        if not giveaways(blueprint):  # a page read without the question meets no check: else draw again
            return blueprint
    raise RuntimeError(f"pair {seed}:{index}: every draw asks a question its page answers ({giveaways(blueprint)})")


def stream_choice(
    seed: int, index: int, mix: Mapping[str, float] | None = None, domains: Mapping[str, float] | None = None
) -> tuple[str, str]:
    """The category and domain ``stream`` builds at ``index``."""
    category_p, domain_p = _weights(TASK_CATEGORIES, mix, "category"), _weights(DOMAINS, domains, "domain")
    pick = np.random.default_rng([seed, index, _CHOICE])
    category = TASK_CATEGORIES[int(pick.choice(len(TASK_CATEGORIES), p=category_p))]
    return category, DOMAINS[int(pick.choice(len(DOMAINS), p=domain_p))]


def generate_pair(
    seed: int,
    index: int,
    *,
    domain: str | None = None,
    category: str | None = None,
    difficulty: float = 0.5,
    twins: bool = True,
    generator: str = DEFAULT_GENERATOR,
    split: str = "all",
) -> list[Task]:
    """The tool-required task at ``index`` and, when the task admits one, its tool-redundant twin.

    Tasks whose answer needs a corpus or weather lookup have no twin (no rendering makes the
    lookup redundant). ``generator``: ``v3`` (default; twins show the same pages and print, the
    label decides which page or rows hold the key facts), ``v2`` (one photo, only the key pages
    differ) or ``v1`` (the first generator: a degraded photo vs a clean printout).
    ``split`` (v3 only): ``all``, ``train`` (no held-out scene types or hiding mechanisms) or
    ``heldout`` (only tasks that show one); an index outside the split gives ``[]``.
    """
    if not 0.0 <= difficulty <= 1.0:
        raise ValueError(f"difficulty must be in [0, 1], got {difficulty}")
    if generator not in GENERATORS:
        raise ValueError(f"unknown generator {generator!r}; choose from {list(GENERATORS)}")
    if split not in SPLITS or (split != "all" and generator != "v3"):
        raise ValueError(f"split must be one of {list(SPLITS)} (train/heldout: generator v3 only), got {split!r}")
    blueprint = build_blueprint(
        seed, index, domain=domain, category=category, difficulty=difficulty, generator=generator
    )
    hiding, style = None, None
    if generator == "v3":
        hiding = _hiding(blueprint, np.random.default_rng([seed, index, _HIDE]), difficulty, split)
        if hiding is None:
            return []
        style = choose_style(np.random.default_rng([seed, index, _STYLE]), split)
    ids = (_task_id(seed, index, label, generator, split) for label in (TOOL_REQUIRED, TOOL_REDUNDANT))
    required_id, redundant_id = ids
    with_twin = twins and not blueprint.needs_lookup
    base = {
        "generator": "vtb_env.synth" if generator == "v1" else f"vtb_env.synth/{generator}",
        "seed": seed,
        "index": index,
        "pair_id": _task_id(seed, index, "", generator, split).strip()
        if generator != "v1"
        else hashlib.sha1(f"vtb-synth:{seed}:{index}".encode()).hexdigest()[:24],
        **(
            {
                "split": split,
                "font": style.face,
                "small_font": style.small_face,
                "surface": style.surface,
                "mode_label_reader": MODE_LABEL_READER,
            }
            if style
            else {}
        ),
    }
    render = dict(
        difficulty=difficulty, generator=generator, look_seed=(seed, index, _LOOK), hiding=hiding, style=style
    )
    tasks = [
        assemble(
            blueprint,
            TOOL_REQUIRED,
            task_id=required_id,
            rng=np.random.default_rng([seed, index, _RENDER_REQUIRED]),
            metadata={**base, "twin_id": redundant_id if with_twin else None},
            **render,
        )
    ]
    if with_twin:
        tasks.append(
            assemble(
                blueprint,
                TOOL_REDUNDANT,
                task_id=redundant_id,
                rng=np.random.default_rng([seed, index, _RENDER_REDUNDANT]),
                metadata={**base, "twin_id": required_id},
                **render,
            )
        )
    return tasks


def stream(
    seed: int = 0,
    mix: Mapping[str, float] | None = None,
    *,
    domains: Mapping[str, float] | None = None,
    difficulty: Difficulty = 0.5,
    twins: bool = True,
    start: int = 0,
    generator: str = DEFAULT_GENERATOR,
    split: str = "all",
    solvable: bool = False,
    reader: Callable[[Image.Image], str] | None = None,
    prefetch: Callable[[Sequence[Task]], object] | None = None,
) -> Iterator[Task]:
    """Yield tasks forever: each index gives a tool-required task, then its twin when it has one.

    ``mix`` weights the categories (``TASK_CATEGORIES`` names), ``domains`` the domains;
    ``difficulty`` is a number in [0, 1] or a function of the index (a curriculum);
    ``generator`` is ``v3`` (default), ``v2`` or ``v1``; ``split`` (v3): ``all``, ``train`` or
    ``heldout`` (indices outside the split are skipped; see ``generate_pair``).
    ``solvable``: keep a pair only when the OCR probe confirms both labels for the reader that defines
    them (``MODE_LABEL_READER``): the tool-required task has a key fact it cannot read as shown and reads
    every one in its reference code's output, the twin has every key fact read as shown (Tesseract; about
    a second per task; ``vtb_env.synth.probe``). ``reader`` (image -> text) replaces Tesseract's own call,
    e.g. with a cache of its readings; ``prefetch(pair)``, called before the probe reads a pair, can fill
    that cache with the pair's pictures in parallel (the probe itself reads one picture at a time).
    """
    if solvable:  # needs Tesseract (or a reader); imported only when asked for
        from vtb_env.synth.probe import confirms_label, probe_task

    stream_choice(seed, start, mix, domains)  # bad weights fail before the first task
    unconfirmed = 0  # pairs in a row the reader refused: bounded, so a reader that confirms nothing fails
    for index in count(start):
        category, domain = stream_choice(seed, index, mix, domains)
        level = difficulty(index) if callable(difficulty) else difficulty
        pair = generate_pair(
            seed,
            index,
            domain=domain,
            category=category,
            difficulty=float(level),
            twins=twins,
            generator=generator,
            split=split,
        )
        if not pair:  # outside the split
            continue
        if solvable and prefetch is not None:
            prefetch(pair)
        if solvable and not all(confirms_label(probe_task(task, reader=reader)) for task in pair):
            unconfirmed += 1
            if unconfirmed >= MAX_UNCONFIRMED_PAIRS:
                raise RuntimeError(
                    f"the OCR probe confirmed none of {unconfirmed} pairs in a row (up to index {index}): "
                    "its reader does not read these tasks as their labels say (is it the labels' reader?)"
                )
            continue
        unconfirmed = 0
        yield from pair


def generate(n: int, seed: int = 0, mix: Mapping[str, float] | None = None, **options) -> list[Task]:
    """The first ``n`` tasks of ``stream(seed, mix, **options)``."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return list(islice(stream(seed, mix, **options), n))  # takes no task past the n-th (a probe costs seconds)


DEMO_SEED = 2024


def demo_tasks(generator: str = DEFAULT_GENERATOR) -> list[Task]:
    """The bundled demo set: every domain x category once (tool-required) plus the twins."""
    tasks = []
    for index, (domain, category) in enumerate((d, c) for c in TASK_CATEGORIES for d in DOMAINS):
        tasks += generate_pair(DEMO_SEED, index, domain=domain, category=category, difficulty=0.5, generator=generator)
    return tasks
