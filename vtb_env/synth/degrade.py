"""Degradations that make image tools necessary, and the exact code that undoes them.

A tool-required image is a photo-like scene (clutter, optionally a device screen) holding
small-text document panels, each optionally mirrored and rotated, the whole frame optionally
under-exposed, blurred and noisy. Everything that was done is recorded in ``Placement`` so the
reference ``python_image_processing`` code can crop, upscale, rotate back, un-mirror and
restore contrast precisely.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageOps

from vtb_env.synth.desk import CLUTTER_WORDS
from vtb_env.synth.render import Box, Panel, font, text_width

CANVAS = (960, 720)
# v1's digit-free signs: v2's and v3's (``desk.CLUTTER_WORDS``) with "Menu" after "Wi-Fi". Frozen: ``rng.choice``
# draws by index, so the order is v1's pixels.
V1_CLUTTER_WORDS = (*CLUTTER_WORDS[:8], "Menu", *CLUTTER_WORDS[8:])


@dataclass(frozen=True)
class Degradation:
    """What happens to a tool-required image (all fields JSON-friendly)."""

    px: int  # body text height of the key panels, in pixels
    rotation: float = 0.0  # degrees counter-clockwise; 90/180/270 are exact transposes
    mirror: bool = False
    exposure: float = 1.0  # < 1: under-exposed and low-contrast
    blur: float = 0.0
    noise: float = 0.0
    screen: bool = False  # panels shown on a small device screen inside the scene

    def names(self, n_panels: int = 1) -> list[str]:
        out = ["small_text", "clutter"]
        if self.rotation:
            out.append(f"rotate_{int(self.rotation)}" if self.rotation in (90, 180, 270) else "rotate_arbitrary")
        out += ["mirror"] * self.mirror + ["underexposed_low_contrast"] * (self.exposure < 1)
        out += ["noise_blur"] * (self.noise > 0 or self.blur > 0) + ["screen_in_scene"] * self.screen
        return out + ["split_regions"] * (n_panels > 1)


def choose(rng: np.random.Generator, difficulty: float) -> Degradation:
    """Degradations for one image; stronger and more numerous as ``difficulty`` goes 0 -> 1."""
    d = min(1.0, max(0.0, difficulty))
    px = int(round(10 - 2 * d))
    # Small text alone is sometimes legible to OCR at 8-10 px: every image gets at least one more degradation.
    n_extras = max(1, int(rng.binomial(3, 0.2 + 0.6 * d)))
    extras = set(rng.choice(["rotate", "mirror", "dark", "noise", "screen"], size=n_extras, replace=False))
    rotation = 0.0
    if "rotate" in extras:
        rotation = (
            float(rng.choice([90, 180, 270])) if rng.random() < 0.6 else float(rng.integers(12, 20 + int(50 * d)))
        )
        rotation = rotation if rotation in (90, 180, 270) or rng.random() < 0.5 else 360.0 - rotation
    arbitrary = rotation not in (0.0, 90.0, 180.0, 270.0)
    return Degradation(
        px=px + 2 * arbitrary,  # resampling a tilted frame twice costs legibility
        rotation=rotation,
        mirror="mirror" in extras,
        exposure=round(float(0.5 - 0.2 * d), 2) if "dark" in extras else 1.0,
        blur=0.4 if "noise" in extras and not arbitrary else 0.0,
        noise=round(2.0 + 3.0 * d, 1) if "noise" in extras else 0.0,
        screen="screen" in extras,
    )


@dataclass(frozen=True)
class Placement:
    """Where a panel landed: ``box`` in the scene, and how it was turned."""

    box: Box  # region of the scene holding the (rotated) panel
    size: tuple[int, int]  # the panel's size before rotation (with its bezel)
    border: int  # bezel width added around the panel
    rotation: float
    mirror: bool
    dark_background: bool = False
    row_boxes: dict[str, Box] = field(default_factory=dict)  # in the unrotated panel (bezel excluded)


def _scene_background(rng: np.random.Generator, size: tuple[int, int]) -> Image.Image:
    w, h = size
    top = rng.integers(120, 220, size=3)
    bottom = rng.integers(40, 140, size=3)
    ramp = np.linspace(0.0, 1.0, h)[:, None, None]
    array = (top[None, None, :] * (1 - ramp) + bottom[None, None, :] * ramp) * np.ones((1, w, 1))
    image = Image.fromarray(array.astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(6, 12))):  # furniture, frames, signs
        x, y = int(rng.integers(-50, w)), int(rng.integers(-50, h))
        bw, bh = int(rng.integers(60, 300)), int(rng.integers(40, 220))
        color = tuple(int(c) for c in rng.integers(30, 230, size=3))
        if rng.random() < 0.5:
            draw.rectangle((x, y, x + bw, y + bh), fill=color)
        else:
            draw.ellipse((x, y, x + bw, y + bh), fill=color)
    for _ in range(int(rng.integers(4, 8))):  # distractor text without digits
        word = str(rng.choice(V1_CLUTTER_WORDS))
        px = int(rng.integers(14, 34))
        x, y = int(rng.integers(0, max(1, w - text_width(word, px, True)))), int(rng.integers(0, h - px))
        draw.text((x, y), word, font=font(px, True), fill=tuple(int(c) for c in rng.integers(0, 256, size=3)))
    return image


def _turn(image: Image.Image, rotation: float, fill: tuple[int, int, int]) -> Image.Image:
    exact = {90: Image.Transpose.ROTATE_90, 180: Image.Transpose.ROTATE_180, 270: Image.Transpose.ROTATE_270}
    if rotation in exact:
        return image.transpose(exact[int(rotation)])
    if rotation:
        return image.rotate(rotation, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=fill)
    return image


def compose(
    panels: Sequence[Panel], degradation: Degradation, rng: np.random.Generator
) -> tuple[Image.Image, list[Placement]]:
    """Place the panels in a cluttered scene and degrade the whole frame."""
    canvas = _scene_background(rng, CANVAS)
    placements: list[Placement] = []
    slots = (
        [(0.04, 0.06), (0.55, 0.52)]
        if len(panels) > 1
        else [(float(rng.uniform(0.05, 0.5)), float(rng.uniform(0.05, 0.45)))]
    )
    for panel, (fx, fy) in zip(panels, slots, strict=False):
        border = max(6, degradation.px) if degradation.screen else 0
        body = ImageOps.expand(panel.image, border=border, fill=(28, 28, 32)) if border else panel.image
        if degradation.mirror:
            body = ImageOps.mirror(body)
        turned = _turn(body, degradation.rotation, fill=(70, 70, 70))
        x = min(int(fx * CANVAS[0]), max(0, CANVAS[0] - turned.width))
        y = min(int(fy * CANVAS[1]), max(0, CANVAS[1] - turned.height))
        if turned.width > CANVAS[0] or turned.height > CANVAS[1]:
            raise ValueError(f"panel of {turned.size} does not fit the {CANVAS} scene; lower the text size or entries")
        canvas.paste(turned, (x, y))
        placements.append(
            Placement(
                (x, y, x + turned.width, y + turned.height),
                body.size,
                border,
                degradation.rotation,
                degradation.mirror,
                sum(panel.background) < 384,
                dict(panel.boxes),
            )
        )
    array = np.asarray(canvas).astype(np.float32)
    if degradation.exposure < 1:
        array = 18 + (array - array.mean()) * (0.6 * degradation.exposure) + array.mean() * degradation.exposure * 0.5
    frame = Image.fromarray(np.clip(array, 0, 255).astype(np.uint8), "RGB")
    if degradation.blur:
        frame = frame.filter(ImageFilter.GaussianBlur(degradation.blur))
    if degradation.noise:  # sensor noise on the documents (kept off the backdrop: smaller PNGs)
        array = np.asarray(frame).astype(np.float32)
        for placement in placements:
            x0, y0, x1, y1 = placement.box
            array[y0:y1, x0:x1] += rng.normal(0.0, degradation.noise, size=(y1 - y0, x1 - x0, 1))
        frame = Image.fromarray(np.clip(array, 0, 255).astype(np.uint8), "RGB")
    return frame, placements


def upscale_factor(px: int) -> int:
    """How much to enlarge text of ``px`` pixels in one step (to ~30 px: one larger step makes OCR
    split soft bold digits, e.g. "18" -> "i8"; the rows get a second, 1.5x step once cleaned)."""
    return max(2, math.ceil(30 / px))


def reference_code(
    image_name: str, placement: Placement, degradation: Degradation, labels: Sequence[str], first_index: int
) -> str:
    """Executable PIL code that isolates each labelled row of one panel and makes it legible.

    It reads ``image_name`` from the working directory and writes
    ``transformed_image_<first_index + j>.png`` for the j-th label.
    """
    k = upscale_factor(degradation.px)
    w, h = placement.size
    lines = [
        "from PIL import Image, ImageFilter, ImageOps",
        f"scene = Image.open({image_name!r}).convert('RGB')",
        f"panel = scene.crop({placement.box})  # the document inside the scene",
        f"panel = panel.resize((panel.width * {k}, panel.height * {k}), Image.Resampling.LANCZOS)  # zoom {k}x",
    ]
    rotation = placement.rotation
    if rotation in (90, 180, 270):
        undo = {90: "ROTATE_270", 180: "ROTATE_180", 270: "ROTATE_90"}[int(rotation)]
        lines.append(f"panel = panel.transpose(Image.Transpose.{undo})  # undo the {int(rotation)} degree turn")
    elif rotation:
        lines += [
            f"panel = panel.rotate({-rotation}, resample=Image.Resampling.BICUBIC, expand=True)  # level the text",
            "cx, cy = panel.width // 2, panel.height // 2",
            f"panel = panel.crop((cx - {w * k // 2}, cy - {h * k // 2}, "
            f"cx + {w * k - w * k // 2}, cy + {h * k - h * k // 2}))",
        ]
    if placement.mirror:
        lines.append("panel = ImageOps.mirror(panel)  # the text was mirrored")
    margin = max(3, degradation.px // 2) * k  # room for rounding after rotation, and a quiet zone
    for j, label in enumerate(labels):
        x0, y0, x1, y1 = placement.row_boxes[label]
        b = placement.border
        box = ((x0 + b) * k - margin, (y0 + b) * k - margin, (x1 + b) * k + margin, (y1 + b) * k + margin)
        lines.append(f"row = panel.crop({box})  # {label}")
        if degradation.noise:
            lines.append("row = row.filter(ImageFilter.MedianFilter(3))  # remove sensor noise")
        gray = (
            "ImageOps.invert(row.convert('L'))  # dark text on a light background"
            if placement.dark_background
            else "row.convert('L')"
        )
        lines.append(f"row = {gray}")
        # The brightest fifth of a row is paper: clipping it to white leaves no texture around the glyphs.
        lines.append("row = ImageOps.autocontrast(row, cutoff=(1, 20))  # restore contrast, clean paper")
        lines.append(
            "row = row.resize((row.width * 3 // 2, row.height * 3 // 2), Image.Resampling.LANCZOS)  # ~45 px text"
        )
        lines.append("row = ImageOps.expand(row, border=24, fill=255)  # a quiet margin around the text")
        lines.append(f"row.save('transformed_image_{first_index + j}.png')")
    return "\n".join(lines) + "\n"
