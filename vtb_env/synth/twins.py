"""Turn a blueprint into a Task for one mode label.

Generator v3 (default, ``matched``): both labels get the same photo with the same pages and
print (a key document and a look-alike decoy on a large and a small page, faint bands of glare or
shadow); the label decides which page, or which rows under a band, hold the key facts. Generator v2
(``photo``): the same photo, but ``tool_required`` hides the key pages (small in a corner, turned,
faded) and ``tool_redundant`` prints them large. Generator v1 (``degrade``): ``tool_required`` is small key
text inside a degraded photo-like scene, ``tool_redundant`` the same facts rendered large,
upright and clean. Tool-required tasks carry a reference trajectory whose
``python_image_processing`` code isolates, enlarges and repairs each key row; twins keep only
what no rendering can replace (none, for twinned tasks).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from PIL import Image

from vtb_env.image_names import task_image_name
from vtb_env.synth import degrade, desk, matched, photo, scenery
from vtb_env.synth.blueprints import Blueprint
from vtb_env.synth.render import Panel, png_bytes
from vtb_env.synth.scene_drawing import render
from vtb_env.synth.scenes import Scene
from vtb_env.synth.world import bind_giveaways, turn_worlds
from vtb_env.tasks import ImageRef, Rubric, Task, Turn
from vtb_env.toolsets import VISION_TOOL

TOOL_REQUIRED, TOOL_REDUNDANT = "tool_required", "tool_redundant"
COMPUTE_TOOLS = ("calculator", "python_interpreter")  # what a tool-redundant twin's text reasoning replaces
CLEAR_PX = 32  # body text of tool-redundant renderings (OCR misreads some bold digits below ~30 px)


def _panels(scene: Scene, split: bool, px: int, rng: np.random.Generator, printable: bool = False) -> list[Panel]:
    if not split:
        return [render(scene, px, rng=rng, printable=printable)]
    half = len(scene.entries) // 2
    return [render(scene, px, part, rng, printable=printable) for part in (scene.entries[:half], scene.entries[half:])]


def _clear_image(panels: Sequence[Panel]) -> Image.Image:
    margin = CLEAR_PX
    width = sum(p.image.width for p in panels) + margin * (len(panels) + 1)
    height = max(p.image.height for p in panels) + 2 * margin
    image = Image.new("RGB", (width, height), (255, 255, 255))
    x = margin
    for panel in panels:
        image.paste(panel.image, (x, margin))
        x += panel.image.width + margin
    return image


class _Rendered:
    """One scene state's image; for tool-required images, how to undo what hides the key facts."""

    def __init__(
        self,
        image: Image.Image,
        panels: list[Panel],
        *,
        data: bytes | None = None,
        code: Callable[[str, int, Sequence[str], int], str] | None = None,
        degradations: Sequence[str] = (),
        look: Sequence[str] = (),
        hint: str = "undoing rotation, mirroring and poor exposure",
        compress_level: int = 6,
    ) -> None:
        self.image, self.panels, self.code, self.hint = image, panels, code, hint
        self.data = data or png_bytes(image, compress_level)
        self.degradations, self.look = list(degradations), list(look)

    def panel_of(self, label: str) -> int:
        return next(i for i, p in enumerate(self.panels) if label in p.boxes)


def _render_state(scene: Scene, split: bool, label: str, rng: np.random.Generator, difficulty: float) -> _Rendered:
    """Generator v1: a clean large printout (redundant) or a degraded cluttered photo (required)."""
    if label == TOOL_REDUNDANT:
        panels = _panels(scene, split, CLEAR_PX, rng, printable=True)
        return _Rendered(_clear_image(panels), panels)
    degradation = degrade.choose(rng, difficulty)
    panels = _panels(scene, split, degradation.px, rng)
    image, placements = degrade.compose(panels, degradation, rng)
    code = lambda name, i, labels, first: degrade.reference_code(name, placements[i], degradation, labels, first)  # noqa: E731
    return _Rendered(image, panels, code=code, degradations=degradation.names(len(panels)))


HINTS = {
    "small_text_in_corner": "small, in a corner",
    "rotate_180": "upside down",
    "mirror": "mirrored",
    "flip": "upside down and mirrored",
    "low_contrast_glare": "washed out by glare",
    "low_contrast_shadow": "in a shadow, at low contrast",
}


def _render_state_v2(
    scene: Scene, split: bool, label: str, rng: np.random.Generator, look_rng: np.random.Generator, difficulty: float
) -> _Rendered:
    """Generator v2: the same photo for both labels; only the key pages differ (``photo``)."""
    parts = (
        [scene.entries]
        if not split
        else [scene.entries[: len(scene.entries) // 2], scene.entries[len(scene.entries) // 2 :]]
    )
    map_seed = int(look_rng.integers(2**31))
    small_px = int(round(10 - 2 * min(1.0, max(0.0, difficulty))))
    big = [
        render(scene, photo.HERO_PX, part, np.random.default_rng(map_seed), printable=True, pale=True) for part in parts
    ]
    small = [
        render(scene, small_px, part, np.random.default_rng(map_seed), printable=True, pale=True) for part in parts
    ]
    look = desk.choose_look(look_rng, len(parts), difficulty)
    mechanisms = None if label == TOOL_REDUNDANT else [photo.choose_mechanism(rng, difficulty) for _ in parts]
    image, jpeg, placements = photo.compose(big, small, small_px, look, look_rng, mechanisms)
    if mechanisms is None:
        return _Rendered(
            image, big, data=jpeg, look=look.names(), compress_level=3
        )  # photos: fast, nearly as small as level 6
    names = list(dict.fromkeys(n for m in mechanisms for n in m.names()))
    code = lambda name, i, labels, first: photo.reference_code(name, placements[i], look, labels, first)  # noqa: E731
    hint = "; ".join(HINTS[n] for n in names) + "; flattening the page"
    return _Rendered(
        image,
        big,
        data=jpeg,
        code=code,
        degradations=names + ["split_regions"] * split,
        look=look.names(),
        hint=hint,
        compress_level=3,
    )


def _render_state_v3(
    scene: Scene,
    split: bool,
    label: str,
    hides: Sequence[matched.Hide],
    look_rng: np.random.Generator,
    difficulty: float,
    style: scenery.Style,
    view_rng: np.random.Generator | None,
) -> _Rendered:
    """Generator v3: the same pages and print for both labels; the label decides which page or rows
    hold the key facts (``matched``)."""
    hidden = label == TOOL_REQUIRED
    picture = matched.render_state(scene, split, hides, hidden, look_rng, difficulty, style, view_rng)
    # zlib's run-length strategy through OpenCV's libpng: half the CPU of v2's level 3, 9% smaller files (docs/synth.md)
    data = picture.jpeg or png_bytes(picture.image, opencv=True)
    look = picture.names + [f"row_patch_{h.how}" for h in hides if h.how in matched.PATCHES]
    if not hidden:
        return _Rendered(picture.image, picture.panels, data=data, look=look)
    names = list(dict.fromkeys(matched.NAMES[h.how] for h in hides))
    placements = picture.placements
    code = lambda name, i, labels, first: photo.reference_code(  # noqa: E731
        name, placements[i], picture.look, labels, first, even_light=True
    )
    hint = "; ".join(dict.fromkeys(matched.HINTS[h.how] for h in hides)) + "; flattening the page"
    return _Rendered(
        picture.image,
        picture.panels,
        data=data,
        code=code,
        degradations=names + ["split_regions"] * split,
        look=look,
        hint=hint,
    )


GENERATORS = ("v1", "v2", "v3")
V3_STYLE = scenery.Style("source-sans", "wood")  # when a caller gives none


def assemble(
    blueprint: Blueprint,
    label: str,
    *,
    task_id: str,
    rng: np.random.Generator,
    difficulty: float,
    metadata: dict[str, Any],
    generator: str = "v3",
    look_seed: Sequence[int] = (),
    hiding: Mapping[int, Sequence[matched.Hide]] | None = None,
    style: scenery.Style | None = None,
) -> Task:
    """Render every scene state for ``label`` and build the Task.

    ``generator`` v2 and v3 draw each state's camera and room from ``[*look_seed, state]``, the same
    for both twins (v3 also its pages, from ``hiding``, one plan per state drawn for the pair, and its
    typeface and surface from ``style``; v3's later snapshots show the first one's room from a camera
    drawn from ``[*look_seed, state]``); v1 renders each label on its own (see docs/synth.md).
    """
    if generator not in GENERATORS:
        raise ValueError(f"unknown generator {generator!r}; choose from {list(GENERATORS)}")
    rendered: dict[int, _Rendered] = {}
    image_names: dict[int, str] = {}
    turns, key_facts, degradations, looks = [], [], {}, {}
    worlds = turn_worlds(blueprint)
    checks = bind_giveaways(blueprint, worlds)
    next_transformed = 0
    for t, ask in enumerate(blueprint.asks):
        refs = []
        for state in ask.new_states:
            split = blueprint.split and state == 0
            if generator == "v1":
                rendered[state] = _render_state(blueprint.states[state], split, label, rng, difficulty)
            elif generator == "v2":
                look_rng = np.random.default_rng([*look_seed, state])
                rendered[state] = _render_state_v2(blueprint.states[state], split, label, rng, look_rng, difficulty)
            else:
                look_rng = np.random.default_rng([*look_seed, 0])  # every snapshot: the same room
                view_rng = np.random.default_rng([*look_seed, state]) if state else None
                hides = (hiding or {})[state]
                rendered[state] = _render_state_v3(
                    blueprint.states[state], split, label, hides, look_rng, difficulty, style or V3_STYLE, view_rng
                )
            name = image_names[state] = task_image_name(len(image_names) + 1)
            refs.append(ImageRef(name=name, data=rendered[state].data))
            if rendered[state].degradations:
                degradations[name] = rendered[state].degradations
            if rendered[state].look:
                looks[name] = rendered[state].look
        steps, trajectory = [], []
        for state in dict.fromkeys(s for s, _ in ask.reads):  # states in first-read order
            view, name = rendered[state], image_names[state]
            scene = blueprint.states[state]
            labels = [lbl for s, lbl in ask.reads if s == state]
            facts = ", ".join(f"{lbl}: {scene.entry(lbl).text}" for lbl in labels)
            # v3 also names each fact's row as printed (a map's leg: its two towns): a reader must find those
            # names beside the value to know whose value it read (v1/v2 frozen)
            key_facts += [
                {
                    "turn": t,
                    "image": name,
                    "text": scene.entry(lbl).text,
                    **(
                        {"names": scene.entry(lbl).towns if scene.kind.style == "map" else [lbl]}
                        if generator == "v3"
                        else {}
                    ),
                }
                for lbl in labels
            ]
            if view.code is None:
                steps.append(f"Read from the {scene.kind.what} in {name}: {facts}.")
                continue
            steps.append(f"Locate the {scene.kind.what} in {name}, crop and enlarge it ({view.hint}) to read {facts}.")
            for panel_index in dict.fromkeys(view.panel_of(lbl) for lbl in labels):
                panel_labels = [lbl for lbl in labels if view.panel_of(lbl) == panel_index]
                code = view.code(name, panel_index, panel_labels, next_transformed)
                next_transformed += len(panel_labels)
                trajectory.append(
                    {
                        "tool": VISION_TOOL,
                        "arguments": {"code": code},
                        "purpose": f"Crop and enhance the rows for {', '.join(panel_labels)} in {name}.",
                    }
                )
        if label == TOOL_REQUIRED or blueprint.needs_lookup:
            trajectory += [
                call for call in ask.tool_calls if label == TOOL_REQUIRED or call["tool"] not in COMPUTE_TOOLS
            ]
        steps += ask.steps
        rubrics = tuple(
            Rubric(
                id=f"{task_id}-t{t + 1}-r{j + 1}",
                description=r.description,
                weight=r.weight,
                categories=r.categories,
                critical=r.critical,
                check=checks[t][j],
            )
            for j, r in enumerate(ask.rubrics)
        )
        turns.append(
            Turn(
                prompt=ask.prompt,
                images=tuple(refs),
                golden_answer=ask.golden,
                tool_trajectory_raw=json.dumps(trajectory, ensure_ascii=False),
                rubrics=rubrics,
                key_steps=tuple(steps),
                world=worlds[t],
            )
        )
    metadata = {
        **metadata,
        "key_facts": key_facts,
        "degradations": degradations,
        **({"looks": looks} if looks else {}),
        "variant": blueprint.variant,
        "scene": blueprint.states[0].kind.name,
        "difficulty": difficulty,
        "needs_lookup": blueprint.needs_lookup,
    }
    return Task(
        id=task_id,
        turns=tuple(turns),
        prompt_category=blueprint.domain.lower(),
        eval_focus=blueprint.category,
        mode_label=label,
        metadata=metadata,
    )  # type: ignore[arg-type]
