"""Turn a blueprint into a Task for one mode label.

``tool_required``: small key text inside a degraded photo-like scene, with a reference
trajectory whose ``python_image_processing`` code crops, enlarges and repairs each key row.
``tool_redundant``: the same question and facts rendered large, upright and clean; its
reference trajectory keeps only what no rendering can replace (none, for twinned tasks).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np
from PIL import Image

from vtb_env.synth import degrade
from vtb_env.synth.categories import Blueprint
from vtb_env.synth.render import Panel, png_bytes
from vtb_env.synth.scenes import Scene, render
from vtb_env.tasks import ImageRef, Rubric, Task, Turn

TOOL_REQUIRED, TOOL_REDUNDANT = "tool_required", "tool_redundant"
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
    """One scene state's image, and for tool-required images how to undo its degradation."""

    def __init__(self, image: Image.Image, panels: list[Panel], placements: list[degrade.Placement] | None,
                 degradation: degrade.Degradation | None) -> None:
        self.image, self.panels, self.placements, self.degradation = image, panels, placements, degradation

    def panel_of(self, label: str) -> int:
        return next(i for i, p in enumerate(self.panels) if label in p.boxes)


def _render_state(scene: Scene, split: bool, label: str, rng: np.random.Generator, difficulty: float) -> _Rendered:
    if label == TOOL_REDUNDANT:
        panels = _panels(scene, split, CLEAR_PX, rng, printable=True)
        return _Rendered(_clear_image(panels), panels, None, None)
    degradation = degrade.choose(rng, difficulty)
    panels = _panels(scene, split, degradation.px, rng)
    image, placements = degrade.compose(panels, degradation, rng)
    return _Rendered(image, panels, placements, degradation)


def assemble(blueprint: Blueprint, label: str, *, task_id: str, rng: np.random.Generator, difficulty: float,
             metadata: dict[str, Any]) -> Task:
    """Render every scene state for ``label`` and build the Task."""
    rendered: dict[int, _Rendered] = {}
    image_names: dict[int, str] = {}
    turns, key_facts, degradations = [], [], {}
    next_transformed = 0
    for t, ask in enumerate(blueprint.asks):
        refs = []
        for state in ask.new_states:
            split = blueprint.split and state == 0
            rendered[state] = _render_state(blueprint.states[state], split, label, rng, difficulty)
            image_names[state] = f"image_{len(image_names) + 1}.png"
            refs.append(ImageRef(name=image_names[state], data=png_bytes(rendered[state].image)))
            if rendered[state].degradation is not None:
                degradations[image_names[state]] = rendered[state].degradation.names(len(rendered[state].panels))
        steps, trajectory = [], []
        for state in dict.fromkeys(s for s, _ in ask.reads):  # states in first-read order
            view, name = rendered[state], image_names[state]
            scene = blueprint.states[state]
            labels = [lbl for s, lbl in ask.reads if s == state]
            facts = ", ".join(f"{lbl}: {scene.entry(lbl).text}" for lbl in labels)
            key_facts += [{"turn": t, "image": name, "text": scene.entry(lbl).text} for lbl in labels]
            if view.placements is None:
                steps.append(f"Read from the {scene.kind.what} in {name}: {facts}.")
                continue
            steps.append(f"Locate the {scene.kind.what} in {name}, crop and enlarge it (undoing rotation, mirroring and "
                         f"poor exposure) to read {facts}.")
            for panel_index in dict.fromkeys(view.panel_of(lbl) for lbl in labels):
                panel_labels = [lbl for lbl in labels if view.panel_of(lbl) == panel_index]
                code = degrade.reference_code(name, view.placements[panel_index], view.degradation, panel_labels, next_transformed)
                next_transformed += len(panel_labels)
                trajectory.append({"tool": "python_image_processing", "arguments": {"code": code},
                                   "purpose": f"Crop and enhance the rows for {', '.join(panel_labels)} in {name}."})
        if label == TOOL_REQUIRED or blueprint.needs_lookup:
            trajectory += [call for call in ask.tool_calls if label == TOOL_REQUIRED or call["tool"] != "calculator"]
        steps += ask.steps
        rubrics = tuple(
            Rubric(id=f"{task_id}-t{t + 1}-r{j + 1}", description=r.description, weight=r.weight, categories=r.categories,
                   critical=r.critical, check=r.check)
            for j, r in enumerate(ask.rubrics)
        )
        turns.append(Turn(prompt=ask.prompt, images=tuple(refs), golden_answer=ask.golden,
                          tool_trajectory_raw=json.dumps(trajectory, ensure_ascii=False), rubrics=rubrics, key_steps=tuple(steps)))
    metadata = {**metadata, "key_facts": key_facts, "degradations": degradations, "variant": blueprint.variant,
                "scene": blueprint.states[0].kind.name, "difficulty": difficulty, "needs_lookup": blueprint.needs_lookup}
    return Task(id=task_id, turns=tuple(turns), prompt_category=blueprint.domain.lower(), eval_focus=blueprint.category,
                mode_label=label, metadata=metadata)  # type: ignore[arg-type]
