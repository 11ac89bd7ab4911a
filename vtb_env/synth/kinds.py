"""The document kinds a scene can be (menu, timetable, receipt, lab report, map, ...): where their facts come
from, how the values read, how they change over time; grouped by domain (``DOMAIN_KINDS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


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


def _money(v: float) -> str:
    return f"${v:,.2f}"


def clock_text(v: float) -> str:
    """Minutes since midnight as the clock shows them (``HH:MM``, past midnight wrapping round)."""
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
    # v3 (twins 3.1) also names these nine; before, only its decoy reports printed them
    "Ferritin": ("ng/mL", 24.0, 336.0, 1.0),
    "Magnesium": ("mg/dL", 1.7, 2.2, 0.1),
    "Albumin": ("g/dL", 3.4, 5.4, 0.1),
    "Bilirubin": ("mg/dL", 0.1, 1.2, 0.1),
    "Phosphate": ("mg/dL", 2.5, 4.5, 0.1),
    "Chloride": ("mmol/L", 96.0, 106.0, 1.0),
    "Iron": ("ug/dL", 60.0, 170.0, 1.0),
    "Lactate": ("mmol/L", 0.5, 2.2, 0.1),
    "Lipase": ("U/L", 10.0, 140.0, 1.0),
}
FIRST_LAB_TESTS = tuple(LAB_TESTS)[:10]  # the lab kind's labels (v1, v2); v3's vocabulary adds the others


def _lab_value(rng: np.random.Generator, label: str) -> float:
    _unit, low, high, step = LAB_TESTS[label]
    span = high - low
    value = float(rng.uniform(low - 0.25 * span, high + 0.25 * span))
    return round(round(value / step) * step, 1)


def positive_lab_value(rng: np.random.Generator, label: str) -> float:
    """v3: as ``_lab_value``, never below the test's step (v1/v2 could draw a negative ALT)."""
    _unit, low, high, step = LAB_TESTS[label]
    span = high - low
    value = float(rng.uniform(max(step, low - 0.25 * span), high + 0.25 * span))
    return round(round(value / step) * step, 1)


def _lab_fmt(v: float) -> str:
    return f"{v:.1f}"


def lab_extra(label: str) -> str:
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
            clock_text,
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
            FIRST_LAB_TESTS,
            _lab_value,
            _lab_fmt,
            "the {label} result",
            "",
            _lab_evolve,
            header=("Test", "Result"),
            extra=lab_extra,
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
