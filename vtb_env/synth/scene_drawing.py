"""How a content scene is drawn: a table (menus, receipts, boards, labs), a bar chart or a map, as a ``Panel``.

The facts come from ``scenes`` (drawn first, from a fact RNG); drawing them at any text size keeps a
tool-required task and its tool-redundant twin on exactly the same facts.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from PIL import Image, ImageDraw

from vtb_env.synth.render import RGB, Box, Panel, text_box, text_width
from vtb_env.synth.scenes import Entry, Scene, route_towns

STYLES: dict[str, tuple[RGB, RGB, RGB]] = {  # background, text, accent
    "menu": ((250, 243, 224), (60, 40, 25), (150, 60, 30)),
    "timetable": ((255, 214, 0), (20, 20, 20), (0, 60, 140)),
    "receipt": ((252, 252, 248), (30, 30, 30), (90, 90, 90)),
    "quotes": ((15, 20, 30), (235, 240, 245), (80, 220, 120)),
    "portfolio": ((245, 248, 255), (25, 35, 60), (40, 80, 160)),
    "scoreboard": ((10, 10, 10), (255, 190, 40), (240, 240, 240)),
    "league": ((235, 245, 235), (20, 50, 20), (20, 110, 40)),
    "lab": ((255, 255, 255), (20, 20, 40), (0, 90, 130)),
    "measurements": ((248, 248, 248), (20, 20, 20), (120, 30, 120)),
    "ticket": ((230, 240, 255), (10, 30, 70), (200, 30, 50)),
    "chart": ((255, 255, 255), (30, 30, 30), (60, 110, 200)),
    "map": ((226, 238, 214), (40, 40, 40), (200, 120, 40)),
}


def render(
    scene: Scene,
    px: int,
    entries: Sequence[Entry] | None = None,
    rng: np.random.Generator | None = None,
    *,
    printable: bool = False,
    pale: bool = False,
    fit_header: bool = False,
) -> Panel:
    """Draw ``scene`` (or a subset of its entries) with body text of ``px`` pixels.

    ``printable`` draws dark-themed documents (scoreboards, quote boards) dark-on-light, as a
    clear printout would show them; ``pale`` also mixes paper colours three quarters of the way to white
    (Tesseract binarises colour pictures per channel: dark blue ink on saturated yellow vanishes).
    ``fit_header`` (v3, whose typefaces differ in width) also makes the label column as wide as its header.
    """
    rows = tuple(entries) if entries is not None else scene.entries
    style = scene.kind.style
    if style == "chart":
        return _render_chart(scene, rows, px)
    if style == "map":
        return _render_map(scene, rows, px, rng or np.random.default_rng(0))
    return _render_table(scene, rows, px, printable, pale, fit_header)


def _render_table(
    scene: Scene, rows: Sequence[Entry], px: int, printable: bool = False, pale: bool = False, fit_header: bool = False
) -> Panel:
    background, ink, accent = STYLES[scene.kind.name]
    if printable and sum(background) < 384:
        background, ink, accent = (255, 255, 255), background, (60, 60, 60)
    if pale:
        background = tuple((c + 3 * 255) // 4 for c in background)  # type: ignore[assignment]
    pad, line = px, int(px * 1.8)
    label_w = max(text_width(e.label, px) for e in rows)
    if fit_header:
        label_w = max(label_w, text_width(scene.kind.header[0], px, bold=True))
    value_w = max(text_width(e.text, px, bold=True) for e in rows)
    extra_w = max((text_width(e.extra, px) for e in rows), default=0)
    gap = 2 * px
    width = max(
        pad * 2 + label_w + gap + value_w + (gap + extra_w if extra_w else 0),
        text_width(scene.title, int(px * 1.3), True) + 2 * pad,
    )
    header = any(scene.kind.header)
    height = pad * 2 + int(px * 2.2) + (line if header else 0) + line * len(rows)
    image = Image.new("RGB", (width, height), background)
    draw = ImageDraw.Draw(image)
    text_box(draw, (pad, pad), scene.title, int(px * 1.3), accent, bold=True)
    y = pad + int(px * 2.2)
    value_x = pad + label_w + gap
    if header:
        text_box(draw, (pad, y), scene.kind.header[0], px, accent, bold=True)
        text_box(draw, (value_x, y), scene.kind.header[1], px, accent, bold=True)
        y += line
    boxes: dict[str, Box] = {}
    for entry in rows:
        left = text_box(draw, (pad, y), entry.label, px, ink)
        right = text_box(draw, (value_x, y), entry.text, px, ink, bold=True)
        if entry.extra:
            right = text_box(draw, (value_x + value_w + gap, y), entry.extra, px, ink)
        boxes[entry.label] = (left[0], min(left[1], right[1]), right[2], max(left[3], right[3]))
        y += line
    return Panel(image, boxes, background)


def _render_chart(scene: Scene, rows: Sequence[Entry], px: int) -> Panel:
    background, ink, accent = STYLES["chart"]
    bar_w, gap, plot_h = 3 * px, 2 * px, 15 * px
    width = 2 * px + len(rows) * (bar_w + gap) + 2 * px
    width = max(width, text_width(scene.title, int(px * 1.3), True) + 4 * px)
    height = 3 * px + plot_h + 4 * px
    image = Image.new("RGB", (width, height), background)
    draw = ImageDraw.Draw(image)
    text_box(draw, (px, px // 2), scene.title, int(px * 1.3), ink, bold=True)
    base = 3 * px + plot_h
    top = max(e.value for e in rows)
    boxes: dict[str, Box] = {}
    for i, entry in enumerate(rows):
        x = 2 * px + i * (bar_w + gap)
        bar_top = base - int((plot_h - 2 * px) * entry.value / top)
        draw.rectangle((x, bar_top, x + bar_w, base), fill=accent)
        value_x = x + (bar_w - text_width(entry.text, px, True)) // 2
        vbox = text_box(draw, (value_x, bar_top - int(px * 1.9)), entry.text, px, ink, bold=True)
        text_box(draw, (x + (bar_w - text_width(entry.label, px)) // 2, base + px // 2), entry.label, px, ink)
        boxes[entry.label] = vbox  # the bar's printed value
    draw.line((px, base, width - px, base), fill=ink, width=max(1, px // 8))
    return Panel(image, boxes, background)


def _overlaps(box: Box, others: Sequence[Box]) -> bool:
    return any(box[0] < o[2] and o[0] < box[2] and box[1] < o[3] and o[1] < box[3] for o in others)


def _crosses(box: Box, segments: Sequence[tuple[tuple[int, int], tuple[int, int]]]) -> bool:
    """Does any route segment pass through ``box``? (sampled along each segment)"""
    for (ax, ay), (bx, by) in segments:
        steps = max(2, int(math.hypot(bx - ax, by - ay) // 2))
        for i in range(steps + 1):
            x, y = ax + (bx - ax) * i / steps, ay + (by - ay) * i / steps
            if box[0] <= x <= box[2] and box[1] <= y <= box[3]:
                return True
    return False


def _place(
    size: tuple[int, int],
    centers: Sequence[tuple[float, float]],
    taken: list[Box],
    bounds: Box,
    segments: Sequence[tuple[tuple[int, int], tuple[int, int]]] = (),
) -> Box:
    """The first candidate box (centred on ``centers``) inside ``bounds`` that overlaps no taken box
    and no route segment; the first candidate when none is free. The chosen box is taken."""
    w, h = size
    boxes = [(int(cx - w / 2), int(cy - h / 2), int(cx - w / 2) + w, int(cy - h / 2) + h) for cx, cy in centers]
    inside = [b for b in boxes if b[0] >= bounds[0] and b[1] >= bounds[1] and b[2] <= bounds[2] and b[3] <= bounds[3]]
    free = [b for b in inside if not _overlaps(b, taken) and not _crosses(b, segments)]
    chosen = (free or [b for b in inside if not _overlaps(b, taken)] or inside or boxes)[0]
    taken.append(chosen)
    return chosen


def _render_map(scene: Scene, rows: Sequence[Entry], px: int, rng: np.random.Generator) -> Panel:
    """A winding route with town names and segment distances; no label overlaps another label,
    a town or (where there is room) the route, so every label reads on its own."""
    background, ink, accent = STYLES["map"]
    width, height = 34 * px, 24 * px
    image = Image.new("RGB", (width, height), background)
    draw = ImageDraw.Draw(image)
    for _ in range(6):  # lakes and woods
        x, y = int(rng.integers(0, width)), int(rng.integers(0, height))
        r = int(rng.integers(2 * px, 5 * px))
        draw.ellipse((x - r, y - r, x + r, y + r), fill=(170, 205, 235) if rng.random() < 0.5 else (190, 220, 170))
    title = text_box(draw, (px, px // 2), scene.title, int(px * 1.3), ink, bold=True)
    towns = route_towns(rows)
    n = len(towns)
    points = []
    for i in range(n):  # a winding route across the map
        x = 3 * px + int((width - 8 * px) * i / max(1, n - 1))
        y = 5 * px + int(rng.integers(0, height - 10 * px))
        points.append((x, y))
    segments = list(zip(points, points[1:], strict=False))
    for a, b in segments:
        draw.line((a, b), fill=accent, width=max(2, px // 4))
    r = max(3, px // 3)
    taken: list[Box] = [(title[0], title[1], title[2] + px, title[3] + px // 2)]
    taken += [(x - r, y - r, x + r, y + r) for x, y in points]
    bounds = (0, 0, width, height)
    pad = max(2, px // 3)  # clear space around every label
    for name, (x, y) in zip(towns, points, strict=False):
        draw.ellipse((x - r, y - r, x + r, y + r), fill=ink)
        w, h = text_width(name, px, True) + 2 * pad, int(px * 1.3) + 2 * pad
        offsets = [
            (0, h / 2 + r),
            (0, -h / 2 - r),
            (w / 2 + r, 0),
            (-w / 2 - r, 0),
            (0, h / 2 + r + px),
            (0, -h / 2 - r - px),
        ]
        box = _place((w, h), [(x + dx, y + dy) for dx, dy in offsets], taken, bounds, segments)
        text_box(draw, (box[0] + pad, box[1] + pad), name, px, ink, bold=True)
    boxes: dict[str, Box] = {}
    for entry, (a, b) in zip(rows, segments, strict=False):
        w, h = text_width(entry.text, px, True) + 2 * pad, int(px * 1.3) + 2 * pad
        length = max(1.0, math.hypot(b[0] - a[0], b[1] - a[1]))
        nx, ny = -(b[1] - a[1]) / length, (b[0] - a[0]) / length  # unit normal of the segment
        reach = abs(nx) * w / 2 + abs(ny) * h / 2 + max(2, px // 4)  # half-extent of the box along the normal
        centers = [
            (
                a[0] + (b[0] - a[0]) * t + nx * side * (reach + extra),
                a[1] + (b[1] - a[1]) * t + ny * side * (reach + extra),
            )
            for extra in (0, px, 2 * px, 4 * px)
            for t in (0.5, 0.35, 0.65, 0.2, 0.8)
            for side in (1, -1)
        ]
        box = _place((w, h), centers, taken, bounds, segments)
        draw.rectangle(box, fill=(255, 255, 255))
        boxes[entry.label] = text_box(draw, (box[0] + pad, box[1] + pad), entry.text, px, ink, bold=True)
    return Panel(image, boxes, background)
