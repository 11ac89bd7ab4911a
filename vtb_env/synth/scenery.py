"""Generator v3's photographic look: typefaces, procedural surfaces, lens and light, and the camera
moving between snapshots.

``Style`` (typeface and surface) is drawn once per pair, so both twins and every snapshot of a task
share it; ``Lens`` (depth of field, vignetting, colour temperature) and the viewpoint are drawn per
picture from the look's generator, the same for both twins. Surfaces are fractal value noise and
simple periodic patterns in numpy, blurred and resized with Pillow (whose output does not depend on
the CPU's SIMD, unlike OpenCV's), so the pixels stay a pure function of the seed.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from vtb_env.synth.desk import CLUTTER_WORDS, Look, Point, background, perspective_coeffs, warp
from vtb_env.synth.render import FACES, font, text_width

SURFACES = ("wood", "fabric", "marble", "concrete", "carpet", "paper", "wall")
SMALL_PRINT_FACES = frozenset({"source-sans"})  # faces whose small print (9 px tried) the OCR reads flattened
HELDOUT_FACES = frozenset({"caladea"})  # the train split never prints in these
HELDOUT_SURFACES = frozenset({"marble"})  # nor shows these


@dataclass(frozen=True)
class Style:
    """What a pair's pictures share: the typeface of the large prints (and of the small ones when it
    is a ``SMALL_PRINT_FACES`` face, else Source Sans Pro) and the surface the pages lie on."""

    face: str
    surface: str

    @property
    def small_face(self) -> str:
        return self.face if self.face in SMALL_PRINT_FACES else "source-sans"


def choose_style(rng: np.random.Generator, split: str = "all") -> Style:
    """A typeface and a surface; ``train`` never draws the held-out ones, ``heldout`` only those."""
    faces, surfaces = sorted(FACES), list(SURFACES)
    if split == "train":
        faces, surfaces = (
            [f for f in faces if f not in HELDOUT_FACES],
            [s for s in surfaces if s not in HELDOUT_SURFACES],
        )
    elif split == "heldout":
        faces, surfaces = sorted(HELDOUT_FACES), sorted(HELDOUT_SURFACES)
    return Style(str(faces[int(rng.integers(0, len(faces)))]), str(surfaces[int(rng.integers(0, len(surfaces)))]))


@dataclass(frozen=True)
class Lens:
    """The camera's optics and the light's colour for one picture."""

    blur: float  # depth of field: the background's blur radius, px
    vignette: float  # darkening at the corners (0..0.25: the side pages lie there)
    temperature: float  # -1 cool (blue) .. +1 warm (orange)

    def names(self) -> list[str]:
        out = ["depth_of_field"] * (self.blur >= 1) + ["vignette"] * (self.vignette >= 0.1)
        return out + (["warm_light"] if self.temperature > 0.4 else ["cool_light"] if self.temperature < -0.4 else [])


def choose_lens(rng: np.random.Generator) -> Lens:
    return Lens(
        blur=round(float(rng.uniform(0.0, 3.0)), 1),
        vignette=round(float(rng.uniform(0.0, 0.25)), 2),
        temperature=round(float(rng.uniform(-1.0, 1.0)), 2),
    )


def fractal_noise(rng: np.random.Generator, shape: tuple[int, int], cells: int = 3, octaves: int = 5) -> np.ndarray:
    """Value noise in [0, 1] of ``shape`` (h, w): ``octaves`` random grids, each twice as fine, smoothly
    interpolated and summed with halving weights (clouds, stains, marble turbulence). Drawn at a quarter
    of the size and enlarged: it holds no detail finer than that, and it is 16 times cheaper."""
    h, w = shape
    sh, sw = max(2, -(-h // 4)), max(2, -(-w // 4))
    out = np.zeros((sh, sw), np.float32)
    weight, total = 1.0, 0.0
    for octave in range(octaves):
        n = cells * 2**octave
        gh, gw = max(2, round(n * sh / max(sh, sw)) + 2), max(2, round(n * sw / max(sh, sw)) + 2)
        grid = rng.random((gh, gw)).astype(np.float32)
        out += weight * _smooth_resize(grid, sh, sw)
        total += weight
        weight *= 0.5
    out = (out - out.min()) / max(1e-6, float(out.max() - out.min()))
    return np.asarray(Image.fromarray(out, "F").resize((w, h), Image.Resampling.BILINEAR), np.float32)


def _smooth_resize(grid: np.ndarray, h: int, w: int) -> np.ndarray:
    """Interpolate a coarse grid to (h, w) with smoothstep weights (no blocky edges)."""
    ys, xs = np.linspace(0, grid.shape[0] - 1.001, h), np.linspace(0, grid.shape[1] - 1.001, w)
    y0, x0 = ys.astype(int), xs.astype(int)
    ty, tx = ys - y0, xs - x0
    ty, tx = (ty * ty * (3 - 2 * ty))[:, None], (tx * tx * (3 - 2 * tx))[None, :]
    top = grid[y0][:, x0] * (1 - tx) + grid[y0][:, x0 + 1] * tx
    bottom = grid[y0 + 1][:, x0] * (1 - tx) + grid[y0 + 1][:, x0 + 1] * tx
    return (top * (1 - ty) + bottom * ty).astype(np.float32)


def _colour(rng: np.random.Generator, low: Sequence[int], high: Sequence[int]) -> np.ndarray:
    return rng.integers(list(low), list(high)).astype(np.float32)


def surface(kind: str, rng: np.random.Generator, size: tuple[int, int]) -> Image.Image:
    """A table top or floor of ``kind`` (``SURFACES`` but ``wall``, which ``desk.background`` draws)."""
    w, h = size
    yy, xx = (a.astype(np.float32) for a in np.ogrid[0:h, 0:w])
    folds = fractal_noise(rng, (h, w), cells=2, octaves=4)  # low-frequency shading of every surface
    if kind == "wood":  # rings bent by noise, fine grain along the board
        base = _colour(rng, (120, 75, 40), (190, 135, 90))
        angle = float(rng.uniform(-0.15, 0.15))
        along = yy * math.cos(angle) + xx * math.sin(angle)
        rings = np.sin(along / float(rng.uniform(9, 22)) + 6.0 * fractal_noise(rng, (h, w), 2, 4)) * 0.5 + 0.5
        grain = _smooth_resize(rng.random((h // 2 + 2, 8)).astype(np.float32), h, w)  # streaks along the board
        shade = 0.78 + 0.14 * rings + 0.08 * grain + 0.1 * (folds - 0.5)
    elif kind == "fabric":  # a woven cloth: threads in two directions, creases
        base = _colour(rng, (40, 40, 60), (200, 190, 210))
        period = float(rng.uniform(3.0, 6.0))
        weave = np.sin(2 * np.pi * xx / period) * np.sin(2 * np.pi * yy / period)
        fibres = rng.random((h, w)).astype(np.float32)
        shade = 0.85 + 0.06 * weave + 0.02 * (fibres - 0.5) + 0.25 * (folds - 0.5)
    elif kind == "marble":  # pale stone with dark veins
        base = _colour(rng, (200, 200, 195), (245, 245, 240))
        angle = float(rng.uniform(0, np.pi))
        phase = (xx * math.cos(angle) + yy * math.sin(angle)) / float(rng.uniform(60, 140))
        veins = np.abs(np.sin(np.pi * (phase + 3.0 * fractal_noise(rng, (h, w), 3, 5))))
        shade = 0.72 + 0.28 * veins**0.35 + 0.05 * (folds - 0.5)
    elif kind == "concrete":  # grey, mottled, with pits
        base = np.full(3, float(rng.integers(120, 190)), np.float32) + _colour(rng, (0, 0, 0), (12, 12, 12))
        pits = (rng.random((h, w)) < 0.004).astype(np.float32)
        grit = rng.random((h, w)).astype(np.float32)
        shade = 0.85 + 0.25 * (folds - 0.5) + 0.03 * (grit - 0.5) - 0.3 * pits
    elif kind == "carpet":  # dense coloured pile
        base = _colour(rng, (40, 30, 30), (170, 140, 140))
        tufts = rng.random((h, w)).astype(np.float32)
        pile = (tufts + np.roll(tufts, 1, axis=0) + np.roll(tufts, 1, axis=1)) / 3  # tufts of a few fibres
        shade = 0.8 + 0.18 * (pile - 0.5) + 0.2 * (folds - 0.5)
    elif kind == "paper":  # a large blank sheet (kraft or white) over a darker table
        table, sheet = _colour(rng, (60, 50, 40), (130, 110, 90)), _colour(rng, (190, 160, 120), (250, 245, 235))
        x0, y0 = w * float(rng.uniform(-0.2, 0.25)), h * float(rng.uniform(-0.2, 0.25))
        mask = Image.new("L", size, 0)
        ImageDraw.Draw(mask).polygon(_rotated_rect((x0 + w * 0.55, y0 + h * 0.55), (w * 1.0, h * 0.95), rng), fill=255)
        m = np.asarray(mask.filter(ImageFilter.GaussianBlur(1.5)), np.float32)[..., None] / 255
        fibres = rng.random((h, w)).astype(np.float32)
        shade = (0.9 + 0.015 * (fibres - 0.5) + 0.12 * (folds - 0.5))[..., None]
        return _to_image((table * (1 - m) + sheet * m) * shade)
    else:
        raise ValueError(f"unknown surface {kind!r}; choose from {list(SURFACES)}")
    return _to_image(base[None, None, :] * shade[..., None])


def _rotated_rect(center: Point, size: tuple[float, float], rng: np.random.Generator) -> list[Point]:
    angle = math.radians(float(rng.uniform(-12, 12)))
    (cx, cy), (w, h) = center, size
    out = []
    for dx, dy in ((-w / 2, -h / 2), (w / 2, -h / 2), (w / 2, h / 2), (-w / 2, h / 2)):
        out.append((cx + dx * math.cos(angle) - dy * math.sin(angle), cy + dx * math.sin(angle) + dy * math.cos(angle)))
    return out


def _to_image(array: np.ndarray) -> Image.Image:
    return Image.fromarray(np.clip(array, 0, 255, out=array).astype(np.uint8), "RGB")


def clutter(canvas: Image.Image, rng: np.random.Generator, amount: int) -> None:
    """Mugs, phones, books and digit-free signs, each with a soft shadow under it (light from the top left)."""
    w, h = canvas.size
    shapes = []
    for _ in range(int(rng.integers(3, 6)) + 5 * amount):
        x, y = int(rng.integers(-40, w)), int(rng.integers(-40, h))
        box = (x, y, x + int(rng.integers(30, 180)), y + int(rng.integers(20, 140)))
        shapes.append((int(rng.integers(0, 3)), box, tuple(int(c) for c in rng.integers(20, 240, size=3))))
    shadow = Image.new("L", canvas.size, 0)
    pen = ImageDraw.Draw(shadow)
    lift = int(rng.integers(6, 16))
    for shape, (x0, y0, x1, y1), _ in shapes:
        moved = (x0 + lift, y0 + lift, x1 + lift, y1 + lift)
        (pen.ellipse if shape == 0 else pen.rectangle)(moved, fill=255)
    shadow = shadow.filter(ImageFilter.BoxBlur(lift)).point(lambda v: v * 45 // 100)
    canvas.paste(Image.new("RGB", canvas.size, (15, 12, 10)), (0, 0), shadow)
    draw = ImageDraw.Draw(canvas)
    for shape, (x0, y0, x1, y1), colour in shapes:
        if shape == 0:
            draw.ellipse((x0, y0, x1, y1), fill=colour)
        elif shape == 1:
            draw.rectangle((x0, y0, x1, y1), fill=colour)
        else:
            draw.line((x0, y0, x0 + 2 * (x1 - x0), y0 + (y1 - y0) // 3), fill=colour, width=int(rng.integers(4, 10)))
    for _ in range(int(rng.integers(1, 3)) + 3 * amount):
        word, px = str(rng.choice(CLUTTER_WORDS)), int(rng.integers(14, 34))
        x, y = int(rng.integers(0, max(1, w - text_width(word, px, True)))), int(rng.integers(0, max(1, h - px)))
        draw.text((x, y), word, font=font(px, True), fill=tuple(int(c) for c in rng.integers(0, 256, size=3)))


def defocus(canvas: Image.Image, lens: Lens, rng: np.random.Generator) -> Image.Image:
    """Depth of field: the surface blurs towards one edge (the pages, pasted later, stay in focus)."""
    if lens.blur < 0.5:
        return canvas
    w, h = canvas.size
    half = canvas.resize((w // 2, h // 2), Image.Resampling.BILINEAR)  # blur at half size: 4 times cheaper
    blurred = half.filter(ImageFilter.GaussianBlur(lens.blur / 2)).resize((w, h), Image.Resampling.BILINEAR)
    ramp = np.linspace(0.0, 1.0, h if rng.random() < 0.5 else w, dtype=np.float32)
    ramp = ramp[::-1] if rng.random() < 0.5 else ramp
    mask = np.broadcast_to(ramp[:, None] if ramp.size == h else ramp[None, :], (h, w))
    return Image.composite(blurred, canvas, Image.fromarray((np.clip(0.3 + mask, 0, 1) * 255).astype(np.uint8)))


def light(canvas: Image.Image, lens: Lens) -> Image.Image:
    """Colour temperature and vignetting over the whole picture."""
    array = np.asarray(canvas, dtype=np.float32)
    h, w = array.shape[:2]
    y2 = ((np.arange(h, dtype=np.float32) - h / 2) / (h / 2)) ** 2
    x2 = ((np.arange(w, dtype=np.float32) - w / 2) / (w / 2)) ** 2
    falloff = 1 - np.float32(lens.vignette) * np.clip((y2[:, None] + x2[None, :]) / 2, 0, 1)
    tint = np.array([1 + 0.07 * lens.temperature, 1.0, 1 - 0.09 * lens.temperature], np.float32)
    array *= falloff[..., None]  # in place: no second picture-sized array
    array *= tint
    return _to_image(array)


_ROOMS: OrderedDict[tuple, tuple[Image.Image, dict]] = OrderedDict()  # the last few rooms drawn


def room(style: Style, look: Look, lens: Lens, size: tuple[int, int], rng: np.random.Generator) -> Image.Image:
    """The surface (or wall), its clutter and the depth of field, before any paper lies on it.

    A pure function of its arguments and ``rng``'s state, memoised: both twins, and every snapshot of
    a temporal task, draw the same room from the same state (the generator's state after it is restored
    too, so a cached room and a drawn one leave ``rng`` alike)."""
    key = (style.surface, look, lens, size, repr(rng.bit_generator.state))
    if key in _ROOMS:
        image, state = _ROOMS[key]
        rng.bit_generator.state = state
        return image.copy()
    if look.setting == "wall":
        canvas = background(rng, size, look)
    else:
        canvas = surface(style.surface, rng, size)
        clutter(canvas, rng, look.clutter)
    canvas = defocus(canvas, lens, rng)
    _ROOMS[key] = (canvas.copy(), rng.bit_generator.state)
    while len(_ROOMS) > 4:
        _ROOMS.popitem(last=False)
    return canvas


def viewpoint(
    rng: np.random.Generator, size: tuple[int, int], pad: int, pages: Sequence[Sequence[Point]]
) -> tuple[float, ...] | None:
    """The camera moved between snapshots: a quad of the padded canvas (shift, roll, zoom, keystone)
    that the picture of ``size`` shows; every page's corners (``pages``, on the padded canvas) stay in
    view with a margin. Returns PIL PERSPECTIVE data (picture -> padded canvas); None when no move
    keeps every page in view (the camera stays where it was)."""
    w, h = size
    picture = [(0, 0), (w, 0), (w, h), (0, h)]
    for strength in (1.0, 0.7, 0.45, 0.25, 0.1):
        zoom = 1 + strength * float(rng.uniform(-0.08, 0.12))
        roll = math.radians(strength * float(rng.uniform(-5, 5)))
        shift = (strength * pad * float(rng.uniform(-0.9, 0.9)), strength * pad * float(rng.uniform(-0.9, 0.9)))
        keystone, side = strength * float(rng.uniform(0, 0.07)), int(rng.integers(0, 4))
        cx, cy = pad + w / 2 + shift[0], pad + h / 2 + shift[1]
        quad = []
        for dx, dy in ((-w / 2, -h / 2), (w / 2, -h / 2), (w / 2, h / 2), (-w / 2, h / 2)):
            dx, dy = dx / zoom, dy / zoom
            quad.append(
                [cx + dx * math.cos(roll) - dy * math.sin(roll), cy + dx * math.sin(roll) + dy * math.cos(roll)]
            )
        a, b = quad[side], quad[(side + 1) % 4]  # one side of the view nearer: it spans more of the canvas
        for p, q in ((a, b), (b, a)):
            p[0], p[1] = p[0] + (p[0] - q[0]) * keystone / 2, p[1] + (p[1] - q[1]) * keystone / 2
        if not all(0 <= x <= w + 2 * pad and 0 <= y <= h + 2 * pad for x, y in quad):
            continue
        coeffs = perspective_coeffs(picture, [(x, y) for x, y in quad])
        seen = [to_picture(coeffs, p) for page in pages for p in page]
        if all(12 <= x <= w - 12 and 12 <= y <= h - 12 for x, y in seen):
            return coeffs
    return None


def view(canvas: Image.Image, size: tuple[int, int], coeffs: Sequence[float]) -> Image.Image:
    """The picture the camera takes of the padded canvas."""
    return warp(canvas, size, coeffs, "linear")  # the room: no print to read (pages are pasted after)


def to_picture(coeffs: Sequence[float], point: Point) -> Point:
    """Where a point of the padded canvas lands in the picture (the inverse of ``coeffs``)."""
    a, b, c, d, e, f, g, h = coeffs
    matrix = np.linalg.inv(np.array([[a, b, c], [d, e, f], [g, h, 1.0]]))
    x, y, z = matrix @ np.array([point[0], point[1], 1.0])
    return (float(x / z), float(y / z))
