"""Content scenes: the facts of a document (menu, receipt, timetable, ...) and how to draw it.

A scene's facts are drawn first from a fact RNG and rendered later at any text size, so a
tool-required task and its tool-redundant twin show exactly the same facts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np
from PIL import Image, ImageDraw

from vtb_env.synth.render import RGB, Box, Panel, text_box, text_width


@dataclass(frozen=True)
class Entry:
    """One labelled fact: ``text`` is what is printed, ``value`` the number it means."""

    label: str
    value: float
    text: str
    extra: str = ""


@dataclass(frozen=True)
class Kind:
    """A document type: where its facts come from, how they read, how they change over time."""

    name: str
    domain: str
    titles: tuple[str, ...]
    labels: tuple[str, ...]
    draw_value: Callable[[np.random.Generator, str], float]
    fmt: Callable[[float], str]
    noun: str  # "the price of {label}"
    unit: str  # how answers state a value: "$", "minutes", "points", ...
    evolve: Callable[[np.random.Generator, float], float]
    style: str = "table"  # table | chart | map
    header: tuple[str, str] = ("Item", "Value")
    extra: Callable[[str], str] | None = None
    summable: bool = True
    what: str = "document"  # how prompts name the document

    def phrase(self, label: str) -> str:
        return self.noun.format(label=label)


@dataclass(frozen=True)
class Scene:
    kind: Kind
    title: str
    entries: tuple[Entry, ...]
    fields: dict[str, str] = field(default_factory=dict)  # extra printed facts (tickets)

    def entry(self, label: str) -> Entry:
        return next(e for e in self.entries if e.label == label)

    def evolved(self, rng: np.random.Generator) -> "Scene":
        """The same document later: every value moves by the kind's rule."""
        entries = tuple(
            replace(e, value=(v := self.kind.evolve(rng, e.value)), text=self.kind.fmt(v)) for e in self.entries
        )
        return replace(self, entries=entries)

    def stepped(self, size: int) -> "Scene":
        """The same document later, every value up by a distinct multiple of ``size`` tenths."""
        entries = tuple(
            replace(e, value=(v := round(e.value + 0.1 * size * (i + 1), 2)), text=self.kind.fmt(v))
            for i, e in enumerate(self.entries)
        )
        return replace(self, entries=entries)


def _money(v: float) -> str:
    return f"${v:,.2f}"


def _clock(v: float) -> str:
    minutes = int(round(v)) % (24 * 60)
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _price(lo: float, hi: float, step: float = 0.25) -> Callable[[np.random.Generator, str], float]:
    return lambda rng, _label: round(float(rng.integers(int(lo / step), int(hi / step) + 1)) * step, 2)


def _integer(lo: int, hi: int) -> Callable[[np.random.Generator, str], float]:
    return lambda rng, _label: float(rng.integers(lo, hi + 1))


def _drift(rate: float, step: float) -> Callable[[np.random.Generator, float], float]:
    return lambda rng, v: round(max(step, v * (1 + float(rng.uniform(-rate, rate)))) / step) * step


def _grow(lo: int, hi: int) -> Callable[[np.random.Generator, float], float]:
    return lambda rng, v: v + float(rng.integers(lo, hi + 1))


LAB_TESTS: dict[str, tuple[str, float, float, float]] = {
    # name: (unit, low, high, step)  (reference range = low..high)
    "Hemoglobin": ("g/dL", 12.0, 17.5, 0.1),
    "Glucose": ("mg/dL", 70.0, 140.0, 1.0),
    "Creatinine": ("mg/dL", 0.6, 1.3, 0.1),
    "Sodium": ("mmol/L", 135.0, 145.0, 1.0),
    "Potassium": ("mmol/L", 3.5, 5.1, 0.1),
    "Platelets": ("x10^9/L", 150.0, 400.0, 1.0),
    "Cholesterol": ("mg/dL", 120.0, 200.0, 1.0),
    "ALT": ("U/L", 7.0, 56.0, 1.0),
    "Urea": ("mg/dL", 7.0, 20.0, 1.0),
    "Calcium": ("mg/dL", 8.6, 10.3, 0.1),
}


def _lab_value(rng: np.random.Generator, label: str) -> float:
    _unit, low, high, step = LAB_TESTS[label]
    span = high - low
    value = float(rng.uniform(low - 0.25 * span, high + 0.25 * span))
    return round(round(value / step) * step, 1)


def _lab_fmt(v: float) -> str:
    return f"{v:.1f}"


def _lab_extra(label: str) -> str:
    unit, low, high, step = LAB_TESTS[label]
    digits = 1 if step < 1 else 0
    return f"{unit}  ({low:.{digits}f}-{high:.{digits}f})"


def _lab_evolve(rng: np.random.Generator, v: float) -> float:
    return round(max(0.1, v * (1 + float(rng.uniform(-0.15, 0.15)))), 1)


TICKERS = ("NRTH", "BLUX", "KEMP", "ORVA", "TAVI", "MERO", "QUIL", "SANK", "VELT", "ZORA")  # quote boards, portfolios
TOWNS = ("Alder", "Birchley", "Cobham", "Dunmore", "Elmstead", "Fenwick", "Garston", "Hollins", "Ivybridge", "Kelso")

KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            "menu",
            "Generalist",
            ("Trattoria Lucca", "Harbour Bistro", "The Copper Pot", "Casa Verde", "Noodle Yard"),
            (
                "Margherita",
                "Carbonara",
                "Caesar salad",
                "Minestrone",
                "Lasagna",
                "Risotto",
                "Tiramisu",
                "Bruschetta",
                "Calzone",
                "Gnocchi",
                "Panna cotta",
                "Espresso",
            ),
            _price(4.5, 28.0),
            _money,
            "the price of the {label}",
            "$",
            _drift(0.12, 0.25),
            header=("Dish", "Price"),
            what="menu",
        ),
        Kind(
            "timetable",
            "Generalist",
            ("Regional line R4", "Coastal Express 12", "Valley line S2", "Night bus N7"),
            (
                "Central",
                "Museum",
                "Riverside",
                "Old Town",
                "University",
                "Harbour",
                "Airport",
                "Stadium",
                "Market",
                "Hospital",
                "Park Lane",
                "North Gate",
            ),
            _integer(0, 0),
            _clock,
            "the departure time at {label}",
            "minutes",
            _grow(0, 9),
            header=("Stop", "Departs"),
            summable=False,
            what="timetable",
        ),
        Kind(
            "receipt",
            "Finance",
            ("FreshMart #204", "Corner Grocer", "Hillside Market", "City Pharmacy"),
            (
                "Olive oil",
                "Coffee beans",
                "Cheddar",
                "Bread",
                "Apples",
                "Yogurt",
                "Salmon",
                "Rice",
                "Tomatoes",
                "Butter",
                "Eggs",
                "Oat milk",
            ),
            _price(0.99, 24.99, 0.01),
            _money,
            "the price of the {label}",
            "$",
            _drift(0.1, 0.01),
            header=("Item", "Amount"),
            what="receipt",
        ),
        Kind(
            "quotes",
            "Finance",
            ("Market close quotes", "Watchlist", "Exchange board"),
            TICKERS,
            _price(12.0, 380.0, 0.01),
            _money,
            "the last price of {label}",
            "$",
            _drift(0.08, 0.01),
            header=("Ticker", "Last"),
            what="quote board",
        ),
        Kind(
            "portfolio",
            "Finance",
            ("Brokerage statement", "Holdings summary"),
            TICKERS,
            _integer(12, 480),
            lambda v: f"{int(v)}",
            "the number of {label} shares held",
            "shares",
            _grow(0, 40),
            header=("Ticker", "Shares"),
            what="statement",
        ),
        Kind(
            "scoreboard",
            "Sports",
            ("City Basketball League", "Regional Cup", "Friday Night Hoops"),
            ("Falcons", "Rangers", "Comets", "Wolves", "Pirates", "Titans", "Hornets", "Vikings"),
            _integer(10, 96),
            lambda v: f"{int(v)}",
            "the score of the {label}",
            "points",
            _grow(2, 24),
            header=("Team", "Score"),
            what="scoreboard",
        ),
        Kind(
            "league",
            "Sports",
            ("League table", "Division standings", "Group stage"),
            (
                "Northside FC",
                "Riverton",
                "Ashford United",
                "Kingsbay",
                "Millbrook",
                "Oakvale",
                "Redcliff",
                "Stonebridge",
            ),
            _integer(10, 62),
            lambda v: f"{int(v)}",
            "the points of {label}",
            "points",
            _grow(0, 6),
            header=("Club", "Pts"),
            what="league table",
        ),
        Kind(
            "lab",
            "Medical",
            ("Clinical chemistry report", "Laboratory results", "Outpatient panel"),
            tuple(LAB_TESTS),
            _lab_value,
            _lab_fmt,
            "the {label} result",
            "",
            _lab_evolve,
            header=("Test", "Result"),
            extra=_lab_extra,
            summable=False,
            what="lab report",
        ),
        Kind(
            "chart",
            "STEM",
            ("Reaction yield by catalyst (%)", "Germination rate by medium (%)", "Efficiency by setup (%)"),
            ("C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8"),
            lambda rng, _l: round(float(rng.uniform(12, 96)), 1),
            lambda v: f"{v:.1f}",
            "the value of bar {label}",
            "%",
            _drift(0.1, 0.1),
            style="chart",
            summable=False,
            what="chart",
        ),
        Kind(
            "measurements",
            "STEM",
            ("Specimen masses (g)", "Sample lengths (mm)", "Lab bench readings"),
            ("S-1", "S-2", "S-3", "S-4", "S-5", "S-6", "S-7", "S-8", "S-9"),
            lambda rng, _l: round(float(rng.uniform(2, 250)), 2),
            lambda v: f"{v:.2f}",
            "the reading for {label}",
            "",
            _drift(0.05, 0.01),
            header=("Specimen", "Reading"),
            what="table",
        ),
        Kind(
            "map",
            "Generalist",
            ("Trail map", "County road map", "Cycling routes"),
            (),
            _integer(3, 48),
            lambda v: f"{int(v)} km",
            "the distance from {label}",
            "km",
            _grow(0, 0),
            style="map",
            what="map",
        ),
    )
}

DOMAIN_KINDS: dict[str, tuple[str, ...]] = {
    "Generalist": ("menu", "timetable", "map"),
    "Finance": ("receipt", "quotes", "portfolio"),
    "Sports": ("scoreboard", "league"),
    "Medical": ("lab",),
    "STEM": ("chart", "measurements"),
}


def make_scene(kind: str | Kind, rng: np.random.Generator, n_entries: int) -> Scene:
    """Draw a scene's facts: ``n_entries`` distinct labels with values (``kind``: a ``KINDS`` name or a Kind)."""
    kind = KINDS[kind] if isinstance(kind, str) else kind
    title = str(rng.choice(kind.titles))
    if kind.style == "map":
        towns = [str(t) for t in rng.permutation(TOWNS)[: n_entries + 1]]
        labels = [f"{a} to {b}" for a, b in zip(towns, towns[1:], strict=False)]
    else:
        labels = [str(label) for label in rng.permutation(kind.labels)[:n_entries]]
    if kind.name == "timetable":
        clock = float(rng.integers(6 * 12, 21 * 12)) * 5
        values = []
        for _ in labels:
            values.append(clock)
            clock += float(rng.integers(3, 15))
    else:
        values = [kind.draw_value(rng, label) for label in labels]
        # Distinct values keep every question's answer unique.
        while len(set(values)) < len(values):
            values = [kind.draw_value(rng, label) for label in labels]
    entries = tuple(
        Entry(label, v, kind.fmt(v), kind.extra(label) if kind.extra else "")
        for label, v in zip(labels, values, strict=False)
    )
    return Scene(kind, title, entries)


TICKET_CITIES = ("Lisbon", "Madrid", "Vienna", "Oslo", "Dublin", "Prague", "Zurich", "Warsaw", "Athens", "Helsinki")


def make_ticket(rng: np.random.Generator, dates: Sequence[str], cities: Sequence[str] = TICKET_CITIES) -> Scene:
    """A train ticket: its destination and date are the facts a weather lookup needs."""
    origin, destination = (str(c) for c in rng.permutation(list(cities))[:2])
    date = str(rng.choice(list(dates)))
    fields = {
        "From": origin,
        "To": destination,
        "Date": date,
        "Departs": _clock(float(rng.integers(6 * 12, 21 * 12)) * 5),
        "Coach": str(int(rng.integers(1, 12))),
        "Seat": f"{int(rng.integers(1, 80))}{'ABCD'[int(rng.integers(0, 4))]}",
    }
    entries = tuple(Entry(k, 0.0, v) for k, v in fields.items())
    ticket_kind = replace(KINDS["menu"], name="ticket", domain="Generalist", header=("", ""), what="ticket")
    return Scene(ticket_kind, "EuroRail e-ticket", entries, fields)


# ---------------------------------------------------------------------------------------------
# Drawing

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
    towns = [rows[0].label.split(" to ")[0]] + [e.label.split(" to ")[1] for e in rows]
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
