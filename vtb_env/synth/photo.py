"""Generator v2: photo-like pictures in which only the detail the question needs tells the label.

A picture is a camera view of documents on a desk or a wall: a background with clutter,
digit-free decoy papers, one *hero* page per key panel (big enough to read at ~30 px text) and
one small *side* page per key panel in a corner, all mapped through one camera (roll,
keystone). Lighting gradient, exposure, sensor noise and JPEG quality belong to the camera too.
Everything above is drawn from a ``Look`` shared by both twins of an image, so whole-image
degradations carry no label.

Only what sits on the key pages differs:

- tool-redundant: each key panel is printed large on its hero page; the side pages hold notes;
- tool-required: each key panel gets one or more of ``corner`` (printed small on the side page,
  in a corner and turned by that page's angle; the hero page holds notes in the same layout),
  ``turned`` (the hero page is upside down or mirrored: the same footprint), ``faded`` (the
  hero page's print is washed out by glare or sunk in a shadow, at low contrast).

The reference code maps the key page's corners back to a flat, enlarged page (one perspective
transform undoes camera, tilt, turn and mirroring) and cleans each key row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from PIL import Image, ImageDraw

from vtb_env.synth.desk import (
    Look,
    Point,
    background,
    finish,
    frame_layout,
    notes_page,
    page_corners,
    paste,
    perspective_coeffs,
    scatter_decoy_papers,
)
from vtb_env.synth.render import Box, Panel

HERO_PX = 30  # text of legible key pages (OCR misreads some bold digits below ~30 px)
MECHANISMS = ("corner", "turned", "faded")


@dataclass(frozen=True)
class Mechanism:
    """What hides one key panel in a tool-required picture (label-specific; JSON-friendly)."""

    corner: bool = False
    turn: str = ""  # "" | rotate_180 | mirror | flip
    fade: str = ""  # "" | glare | shadow
    contrast: float = 1.0

    def names(self) -> list[str]:
        return (
            ["small_text_in_corner"] * self.corner
            + [self.turn] * bool(self.turn)
            + [f"low_contrast_{self.fade}"] * bool(self.fade)
        )


def choose_mechanism(rng: np.random.Generator, difficulty: float) -> Mechanism:
    """One or two ways of hiding a key panel. Fading applies to hero pages only: small print that
    is also faded is lost to JPEG and noise for good, and the tools could not bring it back."""
    d = min(1.0, max(0.0, difficulty))
    picked = {str(rng.choice(MECHANISMS))}
    if rng.random() < 0.35 + 0.4 * d:
        picked.add(str(rng.choice(MECHANISMS)))
    if picked == {"turned"}:  # an upside-down "69" or "88" still reads: a turned hero page is also faded
        picked.add("faded")
    if "corner" in picked:
        picked.discard("faded")
    return Mechanism(
        corner="corner" in picked,
        turn=str(rng.choice(["rotate_180", "mirror", "flip"])) if "turned" in picked else "",
        fade=str(rng.choice(["glare", "shadow"])) if "faded" in picked else "",
        contrast=round(float(rng.uniform(0.20, 0.28) - 0.04 * d), 3) if "faded" in picked else 1.0,
    )


@dataclass(frozen=True)
class KeyPlacement:
    """Where a key panel's page lies in the picture: its corners in content order
    (top-left, top-right, bottom-right, bottom-left of the printed page)."""

    corners: tuple[Point, ...]
    size: tuple[int, int]
    px: int  # text size on the page
    row_boxes: dict[str, Box] = field(default_factory=dict)
    mechanism: Mechanism | None = None


def _fade(page: Image.Image, paper: tuple[int, int, int], mechanism: Mechanism) -> Image.Image:
    array = np.asarray(page).astype(np.float32)
    base = np.array(paper, np.float32)
    array = base + (array - base) * mechanism.contrast
    array = array * 0.62 if mechanism.fade == "shadow" else array * 0.75 + 255 * 0.25
    return Image.fromarray(np.clip(array, 0, 255).astype(np.uint8), "RGB")


def _turn(corners: list[Point], turn: str) -> list[Point]:
    tl, tr, br, bl = corners
    return {"rotate_180": [br, bl, tl, tr], "mirror": [tr, tl, bl, br], "flip": [bl, br, tr, tl]}.get(turn, corners)


def compose(
    big: Sequence[Panel],
    small: Sequence[Panel],
    small_px: int,
    look: Look,
    look_rng: np.random.Generator,
    mechanisms: Sequence[Mechanism] | None,
) -> tuple[Image.Image, bytes | None, list[KeyPlacement]]:
    """The picture for one scene state: ``big``/``small`` are the key panels at hero/side size;
    ``mechanisms`` (one per panel) hide them, None shows them legibly (tool-redundant).
    Returns the picture, its JPEG bytes when the camera saved a JPEG, and the key pages' placements.

    Every draw from ``look_rng`` happens whatever the label, so both twins share all of it.
    """
    n = len(big)
    layout = frame_layout([p.image.size for p in big], [p.image.size for p in small], look, look_rng)
    shot = layout.shot
    canvas = background(look_rng, layout.size, look)
    paper, ink = big[0].background, (40, 40, 40)
    scatter_decoy_papers(canvas, layout, look, look_rng)
    hero_notes = [notes_page(p.image.size, HERO_PX, paper, ink, look_rng) for p in big]
    side_notes = [notes_page(p.image.size, small_px, paper, ink, look_rng) for p in small]
    draw = ImageDraw.Draw(canvas)
    placements = []
    for i in range(n):
        mech = mechanisms[i] if mechanisms is not None else None
        hero, side = page_corners(draw, layout, look, i, big[i].image.size)
        if mech is not None and mech.corner:
            key_page, key_corners, hero_page, side_page, px, panel = (
                small[i].image,
                side,
                hero_notes[i],
                None,
                small_px,
                small[i],
            )
        else:
            key_page, key_corners, hero_page, side_page, px, panel = (
                big[i].image,
                hero,
                None,
                side_notes[i],
                HERO_PX,
                big[i],
            )
        if mech is not None and mech.fade:
            key_page = _fade(key_page, paper, mech)
        if mech is not None and mech.turn:
            key_corners = _turn(key_corners, mech.turn)
        photo_corners = tuple(shot(p) for p in key_corners)
        paste(canvas, hero_page or side_page, [shot(p) for p in (hero if hero_page else side)])
        paste(canvas, key_page, photo_corners)
        placements.append(
            KeyPlacement(
                tuple((round(x, 2), round(y, 2)) for x, y in photo_corners), key_page.size, px, dict(panel.boxes), mech
            )
        )
    frame, jpeg = finish(canvas, look, look_rng)
    return frame, jpeg, placements


def reference_code(
    image_name: str,
    placement: KeyPlacement,
    look: Look,
    labels: Sequence[str],
    first_index: int,
    even_light: bool = False,
) -> str:
    """Executable PIL code that flattens the key page, enlarges it and cleans each labelled row.

    It reads ``image_name`` and writes ``transformed_image_<first_index + j>.png`` for the j-th label.
    ``even_light`` (v3) also divides each row by its paper's brightness (a light gradient or a shadow's
    edge across a row defeats one global contrast stretch).
    """
    k = max(1, math.ceil(30 / placement.px))
    w, h = placement.size
    target = [(0, 0), (w * k, 0), (w * k, h * k), (0, h * k)]
    coeffs = tuple(round(c, 10) for c in perspective_coeffs(target, placement.corners))
    corners = [tuple(round(v) for v in p) for p in placement.corners]
    lines = [
        "import numpy as np\nfrom PIL import Image, ImageFilter, ImageOps"
        if even_light
        else "from PIL import Image, ImageFilter, ImageOps",
        f"photo = Image.open({image_name!r}).convert('RGB')",
        (
            "# The page's printed top-left, top-right, bottom-right and bottom-left corners "
            f"lie at {corners} in the photo."
        ),
        (
            "# One perspective map from the flat page (zoomed) to those corners "
            "undoes the camera angle, tilt, turn and mirroring."
        ),
        (
            f"page = photo.transform(({w * k}, {h * k}), Image.Transform.PERSPECTIVE, {coeffs}, "
            f"Image.Resampling.BICUBIC)  # zoom {k}x"
        ),
    ]
    margin = max(3, placement.px // 2) * k
    boxes = {}
    for label in labels:
        x0, y0, x1, y1 = placement.row_boxes[label]
        boxes[label] = (x0 * k - margin, y0 * k - margin, x1 * k + margin, y1 * k + margin)
    clean = _row_cleaning(bool(look.noise or look.jpeg), even_light)
    if even_light:  # one cleaning function and a loop: the code stays within the tool's 5,000 characters
        lines.append("\n\ndef clean(row):")
        lines += [f"    {line}" for line in clean]
        lines.append("    return row\n\n")
        lines.append(f"for index, (label, box) in enumerate({list(boxes.items())}, start={first_index}):")
        lines.append("    clean(page.crop(box)).save(f'transformed_image_{index}.png')")
        return "\n".join(lines) + "\n"
    for j, label in enumerate(labels):
        lines.append(f"row = page.crop({boxes[label]})  # {label}")
        lines += clean
        lines.append(f"row.save('transformed_image_{first_index + j}.png')")
    return "\n".join(lines) + "\n"


def _row_cleaning(denoise: bool, even_light: bool) -> list[str]:
    """The statements that clean one cropped row ``row`` (v1/v2 code text unchanged)."""
    lines = ["row = row.filter(ImageFilter.MedianFilter(3))  # remove sensor noise and JPEG speckle"] if denoise else []
    if even_light:
        size = 2 * (30 // 5) + 1  # wider than a stroke of ~30 px text: the filter keeps only paper
        lines += [
            "row = row.convert('L')",
            f"paper = row.filter(ImageFilter.MaxFilter({size})).filter(ImageFilter.GaussianBlur({size}))",
            "row = Image.fromarray(np.clip(np.asarray(row, float) / np.maximum(np.asarray(paper, float), 1) * 255,"
            " 0, 255).astype('uint8'))  # even out the light",
        ]
    # Ink covers well under a third of a row crop: clipping the brightest 30% to white leaves clean paper.
    lines.append("row = ImageOps.autocontrast(row.convert('L'), cutoff=(1, 30))  # restore contrast, clean paper")
    lines.append("row = row.resize((row.width * 3 // 2, row.height * 3 // 2), Image.Resampling.LANCZOS)  # ~45 px text")
    lines.append("row = ImageOps.expand(row, border=24, fill=255)  # a quiet margin around the text")
    return lines
