"""The room and the camera shared by generators v2 and v3: a desk or a wall with clutter and
digit-free papers, pages placed on it (hero pages in a row, side pages in a corner column), one
camera (roll, keystone) mapping the flat desk into the frame, then lighting, exposure, sensor noise
and JPEG. Everything here is drawn from a ``Look`` and the look's generator, the same for both twins.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from PIL import Image, ImageDraw

from vtb_env.synth.render import font, text_width

Point = tuple[float, float]

NOTE_WORDS = (
    "review",
    "notes",
    "please",
    "before",
    "meeting",
    "agenda",
    "draft",
    "reply",
    "owner",
    "status",
    "pending",
    "follow",
    "up",
    "team",
    "budget",
    "check",
    "room",
    "desk",
    "call",
    "later",
    "next",
    "week",
    "shared",
    "folder",
    "print",
    "copy",
    "sign",
    "here",
    "today",
    "plan",
    "ideas",
    "list",
    "remember",
)
NOTE_TITLES = ("Notes", "Memo", "To do", "Agenda", "Reminders", "Ideas")
# The digit-free signs strewn over the room of v2 and v3 (v1's, ``degrade.V1_CLUTTER_WORDS``, add "Menu"). Frozen:
# ``rng.choice`` draws by index, so any edit moves v2's pixels.
CLUTTER_WORDS = (
    "SALE",
    "Welcome",
    "Exit",
    "Notice",
    "Open",
    "Thank you",
    "Staff only",
    "Wi-Fi",
    "Info",
    "Push",
    "Caution",
    "Please wait",
    "Lobby",
    "Queue here",
)


def perspective_coeffs(out_pts: Sequence[Point], in_pts: Sequence[Point]) -> tuple[float, ...]:
    """PIL ``PERSPECTIVE`` data mapping each output point to its input point (four pairs)."""
    rows, rhs = [], []
    for (x, y), (u, v) in zip(out_pts, in_pts, strict=True):
        rows += [[x, y, 1, 0, 0, 0, -u * x, -u * y], [0, 0, 0, x, y, 1, -v * x, -v * y]]
        rhs += [u, v]
    return tuple(float(c) for c in np.linalg.solve(np.array(rows, float), np.array(rhs, float)))


def _apply(coeffs: Sequence[float], point: Point) -> Point:
    a, b, c, d, e, f, g, h = coeffs
    x, y = point
    w = g * x + h * y + 1
    return ((a * x + b * y + c) / w, (d * x + e * y + f) / w)


def rect(center: Point, size: tuple[int, int], angle: float = 0.0) -> list[Point]:
    """Corners (top-left, top-right, bottom-right, bottom-left of the content) turned by ``angle``."""
    cx, cy = center
    w, h = size
    t = math.radians(angle)
    out = []
    for dx, dy in ((-w / 2, -h / 2), (w / 2, -h / 2), (w / 2, h / 2), (-w / 2, h / 2)):
        out.append((cx + dx * math.cos(t) + dy * math.sin(t), cy - dx * math.sin(t) + dy * math.cos(t)))
    return out


@dataclass(frozen=True)
class Look:
    """The camera and the room: shared by both twins of an image (JSON-friendly)."""

    setting: str  # desk | wall
    tilt: float  # camera roll, degrees
    keystone: float  # one side of the frame shorter by this share (perspective)
    keystone_side: int  # 0 top, 1 right, 2 bottom, 3 left
    exposure: float  # < 1: a dark picture
    light: tuple[int, float]  # lighting gradient: (axis 0 = x / 1 = y, strength signed)
    clutter: int  # 0 light, 1 some, 2 heavy
    decoys: int  # extra papers (notes, no digits)
    side_angles: tuple[float, ...]  # how each side page lies
    screen: bool  # hero pages shown on monitors
    noise: float
    jpeg: int | None  # JPEG quality, None = lossless

    def names(self) -> list[str]:
        out = [f"{self.setting}_photo", f"clutter_{('light', 'some', 'heavy')[self.clutter]}"]
        out += ["tilt"] * (abs(self.tilt) >= 1) + ["perspective"] * (self.keystone >= 0.03)
        out += ["dark"] * (self.exposure < 0.8) + ["lighting_gradient"] * (abs(self.light[1]) >= 0.15)
        out += [f"decoy_papers_{self.decoys}"] * (self.decoys > 0) + ["screen_in_room"] * self.screen
        return out + ["sensor_noise"] * (self.noise > 0) + ([f"jpeg_q{self.jpeg}"] if self.jpeg else [])


def choose_look(rng: np.random.Generator, n_panels: int, difficulty: float) -> Look:
    """A camera and room; harsher with ``difficulty``, and never so harsh that a 30 px page is lost."""
    d = min(1.0, max(0.0, difficulty))
    setting = "desk" if rng.random() < 0.6 else "wall"
    return Look(
        setting=setting,
        tilt=round(float(rng.uniform(-1, 1)) * (1.5 + 2.5 * d), 1),
        keystone=round(float(rng.uniform(0, 0.04 + 0.06 * d)), 3),
        keystone_side=int(rng.integers(0, 4)),
        exposure=round(float(rng.uniform(0.55, 1.0)) if rng.random() < 0.3 + 0.3 * d else 1.0, 2),
        light=(int(rng.integers(0, 2)), round(float(rng.uniform(-0.35, 0.35)), 2)),
        clutter=int(rng.choice(3, p=[0.4 - 0.2 * d, 0.4, 0.2 + 0.2 * d])),
        decoys=int(rng.integers(0, 3)),
        side_angles=tuple(
            float(rng.choice([0, 90, 180, 270])) + round(float(rng.uniform(-25, 25)), 1) for _ in range(n_panels)
        ),
        screen=setting == "wall" and rng.random() < 0.4,
        noise=round(float(rng.uniform(1.0, 2.0 + 1.5 * d)), 1)
        if (noisy := rng.random() < d - 0.5)
        else 0.0,  # hard tasks only
        jpeg=int(rng.integers(55, 93)) if noisy or rng.random() < 0.5 else None,  # a noisy sensor's photo is a JPEG
    )


def notes_page(
    size: tuple[int, int], px: int, paper: tuple[int, int, int], ink: tuple[int, int, int], rng: np.random.Generator
) -> Image.Image:
    """A page of digit-free notes laid out like a two-column table (the same texture as a key page)."""
    w, h = size
    image = Image.new("RGB", size, paper)
    draw = ImageDraw.Draw(image)
    pad, line = px, int(px * 1.8)
    draw.text((pad, pad), str(rng.choice(NOTE_TITLES)), font=font(int(px * 1.3), True), fill=ink)
    y, right = pad + int(px * 2.2), int(w * float(rng.uniform(0.5, 0.65)))
    while y + px < h - pad:
        words = " ".join(str(rng.choice(NOTE_WORDS)) for _ in range(int(rng.integers(1, 3))))
        if text_width(words, px) < right - pad - px:
            draw.text((pad, y), words, font=font(px), fill=ink)
        tail = str(rng.choice(NOTE_WORDS))
        if right + text_width(tail, px, True) < w - pad:
            draw.text((right, y), tail, font=font(px, True), fill=ink)
        y += line
    return image


def warp(image: Image.Image, size: tuple[int, int], coeffs: Sequence[float], how: str = "pillow") -> Image.Image:
    """``image.transform(size, PERSPECTIVE, coeffs, BICUBIC)`` (``how="pillow"``), or the same map bilinear
    through OpenCV (``"linear"``, v3: ~15x cheaper). The map is computed here (numpy, float64) and handed to
    ``cv2.remap`` as fixed-point coordinates: OpenCV's own ``warpPerspective``, its bicubic remap and its float
    maps gave other pixels with and without AVX2; this path gave the same pixels at every x86 level tried
    (SSE3 to AVX-512: docs/synth.md), as the committed demo set needs."""
    if how == "pillow":
        return image.transform(size, Image.Transform.PERSPECTIVE, tuple(coeffs), Image.Resampling.BICUBIC)
    import cv2  # a core dependency, needed only here

    a, b, c, d, e, f, g, h = coeffs
    xs, ys = np.meshgrid(np.arange(size[0]) + 0.5, np.arange(size[1]) + 0.5)  # Pillow maps pixel centres
    z = g * xs + h * ys + 1.0
    map_x = ((a * xs + b * ys + c) / z - 0.5).astype(np.float32)
    map_y = ((d * xs + e * ys + f) / z - 0.5).astype(np.float32)
    fixed, fraction = cv2.convertMaps(map_x, map_y, cv2.CV_16SC2)
    out = cv2.remap(np.asarray(image), fixed, fraction, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
    return Image.fromarray(out, image.mode)


def paste(canvas: Image.Image, page: Image.Image, corners: Sequence[Point], how: str = "pillow") -> None:
    """Draw ``page`` onto ``canvas`` so its content corners land on ``corners`` (``how``: see ``warp``)."""
    xs, ys = [p[0] for p in corners], [p[1] for p in corners]
    x0, y0 = max(0, int(math.floor(min(xs)))), max(0, int(math.floor(min(ys))))
    x1, y1 = min(canvas.width, int(math.ceil(max(xs)))), min(canvas.height, int(math.ceil(max(ys))))
    if x1 <= x0 or y1 <= y0:
        return
    w, h = page.size
    coeffs = perspective_coeffs([(x - x0, y - y0) for x, y in corners], [(0, 0), (w, 0), (w, h), (0, h)])
    warped = warp(page.convert("RGBA"), (x1 - x0, y1 - y0), coeffs, how)
    canvas.paste(warped, (x0, y0), warped)


def background(rng: np.random.Generator, size: tuple[int, int], look: Look) -> Image.Image:
    """A desk top (wood, grain) or a wall with a floor, furniture and clutter: flat shapes only."""
    w, h = size
    if look.setting == "desk":
        base = tuple(int(c) for c in rng.integers([110, 70, 40], [190, 140, 100]))
        image = Image.new("RGB", size, base)
        draw = ImageDraw.Draw(image)
        for _ in range(int(rng.integers(8, 20))):  # grain
            y = int(rng.integers(0, h))
            shade = tuple(int(max(0, c - rng.integers(8, 30))) for c in base)
            draw.line((0, y, w, y + int(rng.integers(-30, 30))), fill=shade, width=int(rng.integers(1, 5)))
    else:
        wall = tuple(int(c) for c in rng.integers(150, 235, size=3))
        image = Image.new("RGB", size, wall)
        draw = ImageDraw.Draw(image)
        floor = int(h * float(rng.uniform(0.75, 0.92)))
        draw.rectangle((0, floor, w, h), fill=tuple(int(c) for c in rng.integers(60, 140, size=3)))
        for _ in range(int(rng.integers(1, 3))):  # windows and frames
            x, y = int(rng.integers(0, w)), int(rng.integers(0, floor // 2 + 1))
            draw.rectangle(
                (x, y, x + int(rng.integers(80, 260)), y + int(rng.integers(80, 220))),
                fill=tuple(int(c) for c in rng.integers(120, 250, size=3)),
                outline=(60, 60, 60),
                width=4,
            )
    for _ in range(int(rng.integers(3, 6)) + 5 * look.clutter):  # mugs, phones, books, pens
        x, y = int(rng.integers(-40, w)), int(rng.integers(-40, h))
        bw, bh = int(rng.integers(30, 180)), int(rng.integers(20, 140))
        color = tuple(int(c) for c in rng.integers(20, 240, size=3))
        shape = int(rng.integers(0, 3))
        if shape == 0:
            draw.ellipse((x, y, x + bw, y + bh), fill=color)
        elif shape == 1:
            draw.rectangle((x, y, x + bw, y + bh), fill=color)
        else:
            draw.line((x, y, x + bw * 2, y + bh // 3), fill=color, width=int(rng.integers(4, 10)))
    for _ in range(int(rng.integers(1, 3)) + 3 * look.clutter):  # signs and labels without digits
        word, px = str(rng.choice(CLUTTER_WORDS)), int(rng.integers(14, 34))
        x, y = int(rng.integers(0, max(1, w - text_width(word, px, True)))), int(rng.integers(0, max(1, h - px)))
        draw.text((x, y), word, font=font(px, True), fill=tuple(int(c) for c in rng.integers(0, 256, size=3)))
    return image


def finish(canvas: Image.Image, look: Look, rng: np.random.Generator) -> tuple[Image.Image, bytes | None]:
    """Lighting gradient, exposure, sensor noise and JPEG: what the camera adds to the whole frame."""
    array = np.asarray(canvas).astype(np.float32)
    axis, strength = look.light
    ramp = np.linspace(-1.0, 1.0, array.shape[1 - axis], dtype=np.float32) * strength
    gain = (1.0 + ramp)[None, :, None] if axis == 0 else (1.0 + ramp)[:, None, None]
    array = array * gain * look.exposure
    if look.noise:
        array += rng.normal(0.0, look.noise, size=array.shape[:2] + (1,)).astype(np.float32)
    frame = Image.fromarray(np.clip(array, 0, 255).astype(np.uint8), "RGB")
    if not look.jpeg:
        return frame, None
    buffer = io.BytesIO()
    frame.save(buffer, format="JPEG", quality=look.jpeg)
    return Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"), buffer.getvalue()


@dataclass(frozen=True)
class Layout:
    """Where the pages of one picture lie before and after the camera (shared by both twins)."""

    hero_pos: list[Point]  # centres of the hero pages on the flat desk
    side_pos: list[Point]  # centres of the side pages
    side_sizes: list[tuple[int, int]]
    camera: tuple[float, ...]  # perspective map of the flat desk into the frame
    offset: Point  # frame -> picture: subtract the frame's minimum, add the margins
    size: tuple[int, int]  # the picture
    desk: tuple[float, float]  # width and height of the flat desk the pages lie on

    def shot(self, point: Point) -> Point:
        """Where a point of the flat desk lands in the picture."""
        x, y = _apply(self.camera, point)
        return (x + self.offset[0], y + self.offset[1])


def frame_layout(
    hero_sizes: Sequence[tuple[int, int]],
    side_sizes: Sequence[tuple[int, int]],
    look: Look,
    look_rng: np.random.Generator,
) -> Layout:
    """Hero pages in a row, side pages in a column to one side, then the camera (roll, keystone)."""
    gap = int(look_rng.integers(24, 70))
    hero_pos, x = [], 0.0
    for w, h in hero_sizes:  # heroes in a row, slightly staggered
        hero_pos.append((x + w / 2, float(look_rng.integers(0, 50)) + h / 2))
        x += w + gap
    extents = []
    for (w, h), angle in zip(side_sizes, look.side_angles, strict=False):
        corners = rect((0, 0), (w, h), angle)
        extents.append(
            (
                max(p[0] for p in corners) - min(p[0] for p in corners),
                max(p[1] for p in corners) - min(p[1] for p in corners),
            )
        )
    column = max(e[0] for e in extents)
    hero_h = max(y + h / 2 for (_, y), (_, h) in zip(hero_pos, hero_sizes, strict=False))
    left = look_rng.random() < 0.5
    side_pos, y = [], float(look_rng.integers(0, 60))
    for _, eh in extents:
        side_pos.append((column / 2 if left else x + column / 2, y + eh / 2))
        y += eh + gap
    if left:
        hero_pos = [(hx + column + gap, hy) for hx, hy in hero_pos]
    width, height = x + column, max(hero_h, y)
    # The camera: roll about the centre, then one side of the frame foreshortened.
    frame = rect((width / 2, height / 2), (int(width), int(height)), look.tilt)
    k = look.keystone
    side = look.keystone_side
    a, b = side, (side + 1) % 4  # the corners of the shortened side move towards each other
    frame[a], frame[b] = (
        (frame[a][0] * (1 - k / 2) + frame[b][0] * k / 2, frame[a][1] * (1 - k / 2) + frame[b][1] * k / 2),
        (frame[b][0] * (1 - k / 2) + frame[a][0] * k / 2, frame[b][1] * (1 - k / 2) + frame[a][1] * k / 2),
    )
    camera = perspective_coeffs([(0, 0), (width, 0), (width, height), (0, height)], frame)
    margins = [int(v) for v in look_rng.integers(30, 110, size=4)]
    min_x, min_y = min(p[0] for p in frame), min(p[1] for p in frame)
    size = (
        int(max(p[0] for p in frame) - min_x) + margins[0] + margins[2],
        int(max(p[1] for p in frame) - min_y) + margins[1] + margins[3],
    )
    offset = (margins[0] - min_x, margins[1] - min_y)
    return Layout(hero_pos, side_pos, list(side_sizes), camera, offset, size, (width, height))


def scatter_decoy_papers(
    canvas: Image.Image, layout: Layout, look: Look, look_rng: np.random.Generator, how: str = "pillow"
) -> None:
    """Other papers on the desk (digit-free notes), partly under the key pages (``how``: see ``warp``)."""
    width, height = layout.desk
    for _ in range(look.decoys):
        dw, dh = int(look_rng.integers(180, 420)), int(look_rng.integers(140, 360))
        center = (float(look_rng.uniform(0, width)), float(look_rng.uniform(0, height)))
        note = notes_page((dw, dh), int(look_rng.integers(12, 20)), (250, 250, 245), (50, 50, 70), look_rng)
        corners = [layout.shot(p) for p in rect(center, (dw, dh), float(look_rng.uniform(-30, 30)))]
        paste(canvas, note, corners, how)


def page_corners(
    draw: ImageDraw.ImageDraw, layout: Layout, look: Look, i: int, hero_size: tuple[int, int]
) -> tuple[list[Point], list[Point]]:
    """The i-th hero and side pages' corners on the flat desk; draws their shadows (and a monitor's bezel)."""
    hero = rect(layout.hero_pos[i], hero_size)
    side = rect(layout.side_pos[i], layout.side_sizes[i], look.side_angles[i])
    if look.screen:  # a monitor's bezel around the hero page
        w, h = hero_size
        draw.polygon([layout.shot(p) for p in rect(layout.hero_pos[i], (w + 36, h + 36))], fill=(25, 25, 30))
    for corners in (side,) if look.screen else (hero, side):  # a shadow under each paper
        draw.polygon([(q[0] + 6, q[1] + 8) for q in (layout.shot(p) for p in corners)], fill=(40, 35, 30))
    return hero, side
