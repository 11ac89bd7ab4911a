"""Generator v3: matched twins, whose mode label only reading can tell.

v2's twins shared one photo, but the tool-required picture's key page was faded while the twin's
was crisp: a small CNN on a 64 px thumbnail told them apart (washed-out page = call the tool).
In v3 both twins of an image show the **same pages with the same print**:

- every key panel has a large *hero* page (30 px text) and a small *side* page (10-12 px text,
  lying sideways or upside down in a corner), and both carry a table (chart, map) with digits: one is the key
  document, the other a look-alike decoy (``decoys``) whose labels no question names;
- ``corner``: the tool-redundant twin prints the key document on the hero page and the decoy on the
  side page; the tool-required twin swaps them (the key facts are in the small, turned print);
- ``glare`` / ``shadow``: the key document is on the hero page in both twins, and the same number
  of its rows lie under a patch of glare or shadow at low contrast: the key rows in the
  tool-required twin, other rows in the tool-redundant one.

So page sizes, places, paper, ink, digit density, faded bands, camera, room and lighting are drawn
for the pair (``plan_hiding`` and the look); the label only decides which page or rows carry what.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
from PIL import Image, ImageDraw

from vtb_env.synth import desk, photo, scenery
from vtb_env.synth.decoys import decoy_scene
from vtb_env.synth.desk import rect
from vtb_env.synth.render import Panel, typeface
from vtb_env.synth.scene_drawing import render
from vtb_env.synth.scenes import Entry, Scene

PATCHES = ("glare", "shadow")
# Side-page print at difficulty 0 and 1 (v2: 10 and 8). 11 px (difficulty 0.5) is still unread as shown,
# but flattened and enlarged it reads: at 9 px the OCR lost a fact on 6 of 16 corner tasks ("59" -> "$9").
SMALL_PX = (12, 10)
HELDOUT_KINDS = frozenset({"league", "measurements", "quotes"})  # scene types the train split never shows
HELDOUT_MECHANISMS = frozenset({"shadow"})  # hiding mechanisms the train split never uses
SPLITS = ("all", "train", "heldout")
NAMES = {"corner": "small_text_in_corner", "glare": "low_contrast_glare", "shadow": "low_contrast_shadow"}
HINTS = {
    "corner": "small and turned, on the page in a corner",
    "glare": "its rows washed out by glare",
    "shadow": "its rows in a shadow, at low contrast",
}


@dataclass(frozen=True)
class Hide:
    """How one key panel is hidden in the tool-required twin (drawn once for the pair)."""

    how: str  # corner | glare | shadow
    contrast: float = 1.0  # print contrast under a glare or shadow patch
    key_rows: tuple[str, ...] = ()  # the rows the patch covers in the tool-required twin (the ones read)
    decoy_rows: tuple[str, ...] = ()  # as many rows the patch covers in the tool-redundant twin


def small_print_px(difficulty: float) -> int:
    """Text size on the small side pages: smaller when harder."""
    easy, hard = SMALL_PX
    return easy - round((easy - hard) * min(1.0, max(0.0, difficulty)))


def upended(look: desk.Look) -> tuple[float, ...]:
    """v2's side-page angles, a page lying near upright turned upside down: 11 px print within 25 degrees
    of upright let the OCR read some facts as shown (6 of 10 on one page); sideways or upside down it reads none."""
    return tuple(a + 180 if abs(a) <= 25 else a for a in look.side_angles)


def panel_parts(scene: Scene, split: bool) -> list[tuple[Entry, ...]]:
    """The entries of each key panel: one panel, or two halves for a split document."""
    entries = scene.entries
    return [entries] if not split else [entries[: len(entries) // 2], entries[len(entries) // 2 :]]


def plan_hiding(
    states: Sequence[Scene],
    reads: dict[int, set[str]],
    split_first: bool,
    rng: np.random.Generator,
    difficulty: float,
    split: str = "all",
) -> dict[int, list[Hide]] | None:
    """Per scene state, how each key panel is hidden; None when the task is not in ``split``.

    A patch needs a table with at least as many unread rows as read ones (the twin's patch covers
    as many rows elsewhere); other panels (charts, maps, questions about every row) use ``corner``.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose from {list(SPLITS)}")
    kind = states[0].kind.name
    held_kind = kind in HELDOUT_KINDS
    if split == "train" and held_kind:
        return None
    patches = [p for p in PATCHES if split != "train" or p not in HELDOUT_MECHANISMS]
    if split == "heldout" and not held_kind:
        patches = sorted(HELDOUT_MECHANISMS)
    d = min(1.0, max(0.0, difficulty))
    plan: dict[int, list[Hide]] = {}
    for state, scene in enumerate(states):
        hides = []
        for part in panel_parts(scene, split_first and state == 0):
            keys = [e.label for e in part if e.label in reads.get(state, set())]
            others = [e.label for e in part if e.label not in keys]
            patchable = scene.kind.style == "table" and 0 < len(keys) <= len(others)
            use_patch = patchable and (rng.random() < 0.5 or (split == "heldout" and not held_kind))
            if use_patch:
                how = str(patches[int(rng.integers(0, len(patches)))])
                contrast = round(float(rng.uniform(0.16, 0.24) - 0.04 * d), 3)
                decoy = tuple(str(r) for r in rng.choice(others, size=len(keys), replace=False))
                hides.append(Hide(how, contrast, tuple(keys), decoy))
            else:
                hides.append(Hide("corner"))
        plan[state] = hides
    if split == "heldout" and not held_kind and not any(h.how in HELDOUT_MECHANISMS for v in plan.values() for h in v):
        return None
    return plan


def _on_paper(panel: Panel, size: tuple[int, int], paper: tuple[int, int, int]) -> Image.Image:
    page = Image.new("RGB", size, paper)
    page.paste(panel.image, (0, 0))
    return page


def _fade_rows(
    page: Image.Image, boxes: Sequence[tuple[int, int, int, int]], hide: Hide, paper, px: int
) -> Image.Image:
    """A glare or shadow band across each box's rows, at ``hide.contrast``, with soft edges."""
    array = np.asarray(page).astype(np.float32)
    weight = np.zeros(array.shape[0], np.float32)
    rows = np.arange(array.shape[0], dtype=np.float32)
    reach, soft = 0.5 * px, max(2.0, 0.25 * px)  # flat over the row and its quiet margin, then a soft edge
    for _x0, y0, _x1, y1 in boxes:
        inside = np.clip(np.minimum(rows - (y0 - reach - soft), (y1 + reach + soft) - rows) / soft, 0.0, 1.0)
        weight = np.maximum(weight, inside)
    base = np.array(paper, np.float32)
    if hide.how == "shadow":  # OCR copes with dark paper better than with glare: a shadow needs less contrast
        faded = (base + (array - base) * hide.contrast * 0.6) * 0.7
    else:
        faded = (base + (array - base) * hide.contrast) * 0.75 + 255 * 0.25
    w = weight[:, None, None]
    return Image.fromarray(np.clip(array * (1 - w) + faded * w, 0, 255).astype(np.uint8), "RGB")


_PRINTS: OrderedDict[tuple, tuple[list[Panel], ...]] = OrderedDict()  # the last few pairs' prints


def _prints(
    scene: Scene, split: bool, style: scenery.Style, small_px: int, seeds: tuple[int, int, int]
) -> tuple[list[Panel], ...]:
    """The key document's and its decoy's panels, large and small: the same for both twins of a pair, so
    drawn once and memoised (``seeds``: the decoy's facts, the key's and the decoy's drawing)."""
    key = (scene.kind.name, scene.title, scene.entries, split, style, small_px, seeds)
    if key not in _PRINTS:
        decoy_seed, map_seed, decoy_map_seed = seeds
        decoy = decoy_scene(scene, np.random.default_rng(decoy_seed))

        def draw(s: Scene, part, px: int, seed: int) -> Panel:
            with typeface(style.face if px >= photo.HERO_PX else style.small_face):  # small print: a face OCR reads
                return render(s, px, part, np.random.default_rng(seed), printable=True, pale=True, fit_header=True)

        _PRINTS[key] = tuple(
            [draw(s, p, px, seed) for p in panel_parts(s, split)]
            for s, seed in ((scene, map_seed), (decoy, decoy_map_seed))
            for px in (photo.HERO_PX, small_px)
        )
        while len(_PRINTS) > 4:
            _PRINTS.popitem(last=False)
    return _PRINTS[key]


@dataclass(frozen=True)
class Picture:
    image: Image.Image
    jpeg: bytes | None
    panels: list[Panel]  # the key panels at hero size (their row boxes name the labels)
    placements: list[photo.KeyPlacement]
    look: desk.Look
    names: list[str]  # the shared look's names (room, camera, surface, lens, a moved viewpoint)


def render_state(
    scene: Scene,
    split: bool,
    hides: Sequence[Hide],
    hidden: bool,
    look_rng: np.random.Generator,
    difficulty: float,
    style: scenery.Style,
    view_rng: np.random.Generator | None = None,
) -> Picture:
    """The picture of one scene state; ``hidden`` (tool-required) applies ``hides``, else the twin's layout.

    Large prints are in ``style.face``, small ones in ``style.small_face``. ``view_rng`` (later
    snapshots) moves the camera: the same room and pages seen from another place, so the key page must
    be found again.
    """
    with typeface(style.face):  # notes, signs and large prints; ``draw`` picks the small prints' face
        seeds = (int(look_rng.integers(2**31)), *(int(v) for v in look_rng.integers(2**31, size=2)))
        small_px = small_print_px(difficulty)
        key_big, key_small, decoy_big, decoy_small = _prints(scene, split, style, small_px, seeds)
        size = lambda a, b: (max(a.image.width, b.image.width), max(a.image.height, b.image.height))  # noqa: E731
        big_sizes = [size(k, d) for k, d in zip(key_big, decoy_big, strict=True)]
        small_sizes = [size(k, d) for k, d in zip(key_small, decoy_small, strict=True)]
        look = desk.choose_look(look_rng, len(key_big), difficulty)
        setting = "wall" if style.surface == "wall" else "desk"
        look = replace(look, setting=setting, screen=look.screen and setting == "wall", side_angles=upended(look))
        lens = scenery.choose_lens(look_rng)
        layout = desk.frame_layout(big_sizes, small_sizes, look, look_rng)
        # The room extends past the picture on every side, so a moved camera still sees a full frame.
        (width, height), pad = layout.size, int(0.08 * max(layout.size))
        offset = (layout.offset[0] + pad, layout.offset[1] + pad)
        room_layout = replace(layout, offset=offset, size=(width + 2 * pad, height + 2 * pad))
        room = scenery.room(style, look, lens, room_layout.size, look_rng)
        names = [f"surface_{style.surface}", f"font_{style.face}", *lens.names()]
        pages = [
            [room_layout.shot(p) for p in corners]
            for i in range(len(hides))
            for corners in (
                rect(layout.hero_pos[i], big_sizes[i]),
                rect(layout.side_pos[i], small_sizes[i], look.side_angles[i]),
            )
        ]
        view = None if view_rng is None else scenery.viewpoint(view_rng, (width, height), pad, pages)
        if view is None:
            canvas = room.crop((pad, pad, pad + width, pad + height))
        else:  # the room seen from the moved camera; pages are drawn through both maps at once (one resampling)
            canvas = scenery.view(room, (width, height), view)
            flat = [(0.0, 0.0), (layout.desk[0], 0.0), (layout.desk[0], layout.desk[1]), (0.0, layout.desk[1])]
            seen = [scenery.to_picture(view, room_layout.shot(p)) for p in flat]
            layout = replace(layout, camera=desk.perspective_coeffs(flat, seen), offset=(0.0, 0.0))
            names.append("viewpoint_moved")
        desk.scatter_decoy_papers(canvas, layout, look, look_rng, "linear")  # digit-free notes
        pen = ImageDraw.Draw(canvas)
        paper = key_big[0].background
        placements = []
        for i, hide in enumerate(hides):
            hero, side = desk.page_corners(pen, layout, look, i, big_sizes[i])
            swap = hidden and hide.how == "corner"
            hero_panel, side_panel = (decoy_big[i], key_small[i]) if swap else (key_big[i], decoy_small[i])
            hero_page, side_page = (
                _on_paper(hero_panel, big_sizes[i], paper),
                _on_paper(side_panel, small_sizes[i], paper),
            )
            if hide.how in PATCHES:
                rows = [key_big[i].boxes[r] for r in (hide.key_rows if hidden else hide.decoy_rows)]
                hero_page = _fade_rows(hero_page, rows, hide, paper, photo.HERO_PX)
            # hero pages (30 px print) bilinear through OpenCV; the small side pages stay with Pillow's bicubic
            desk.paste(canvas, hero_page, [layout.shot(p) for p in hero], "linear")
            desk.paste(canvas, side_page, [layout.shot(p) for p in side])
            key_panel, key_corners, px = (key_small[i], side, small_px) if swap else (key_big[i], hero, photo.HERO_PX)
            corners = tuple((round(x, 2), round(y, 2)) for x, y in (layout.shot(p) for p in key_corners))
            placements.append(
                photo.KeyPlacement(corners, (small_sizes if swap else big_sizes)[i], px, dict(key_panel.boxes))
            )
        image, jpeg = desk.finish(scenery.light(canvas, lens), look, look_rng)
        return Picture(image, jpeg, key_big, placements, look, look.names() + names)
