"""The offline documents and weather archive that hybrid tasks look facts up in.

Both are generated deterministically here and written to ``vtb_env/data/corpus/corpus.jsonl``
(lines ``{"url", "title", "text"}``) and ``vtb_env/data/weather/weather.jsonl`` (one line per
city and day); the search and weather tools serve them. Golden answers are computed from the
same functions, so tasks and tools always agree.
"""

from __future__ import annotations

import datetime as dt
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
CORPUS_PATH = DATA_DIR / "corpus" / "corpus.jsonl"
WEATHER_PATH = DATA_DIR / "weather" / "weather.jsonl"

# city: (latitude, longitude, March mean max temperature in C, aliases)
CITIES: dict[str, tuple[float, float, float, tuple[str, ...]]] = {
    "Lisbon": (38.72, -9.14, 18.0, ("Lisboa", "Lisbon, Portugal")),
    "Madrid": (40.42, -3.70, 16.0, ("Madrid, Spain",)),
    "Vienna": (48.21, 16.37, 11.0, ("Wien", "Vienna, Austria")),
    "Oslo": (59.91, 10.75, 4.0, ("Oslo, Norway",)),
    "Dublin": (53.35, -6.26, 10.0, ("Baile Atha Cliath", "Dublin, Ireland")),
    "Prague": (50.08, 14.44, 9.0, ("Praha", "Prague, Czechia")),
    "Zurich": (47.38, 8.54, 10.0, ("Zuerich", "Zurich, Switzerland")),
    "Warsaw": (52.23, 21.01, 7.0, ("Warszawa", "Warsaw, Poland")),
    "Athens": (37.98, 23.73, 17.0, ("Athina", "Athens, Greece")),
    "Helsinki": (60.17, 24.94, 1.0, ("Helsingfors", "Helsinki, Finland")),
}
# Cities added with generator v3 (v1 and v2 tickets and rubrics name only ``CITIES``).
EXTRA_CITIES: dict[str, tuple[float, float, float, tuple[str, ...]]] = {
    "Berlin": (52.52, 13.40, 9.0, ("Berlin, Germany",)),
    "Rome": (41.90, 12.50, 17.0, ("Roma", "Rome, Italy")),
    "Amsterdam": (52.37, 4.90, 10.0, ("Amsterdam, Netherlands",)),
    "Copenhagen": (55.68, 12.57, 6.0, ("Kobenhavn", "Copenhagen, Denmark")),
    "Budapest": (47.50, 19.04, 12.0, ("Budapest, Hungary",)),
    "Brussels": (50.85, 4.35, 11.0, ("Bruxelles", "Brussels, Belgium")),
}
ALL_CITIES = {**CITIES, **EXTRA_CITIES}
# city: (population in thousands, elevation above sea level in metres), for the city guides
CITY_FACTS: dict[str, tuple[int, int]] = {
    "Lisbon": (545, 45),
    "Madrid": (3340, 657),
    "Vienna": (1980, 190),
    "Oslo": (709, 23),
    "Dublin": (592, 20),
    "Prague": (1357, 235),
    "Zurich": (434, 408),
    "Warsaw": (1863, 100),
    "Athens": (643, 70),
    "Helsinki": (664, 17),
    "Berlin": (3755, 34),
    "Rome": (2748, 21),
    "Amsterdam": (921, -2),
    "Copenhagen": (660, 14),
    "Budapest": (1706, 102),
    "Brussels": (1222, 28),
}
MARCH = tuple((dt.date(2024, 3, 1) + dt.timedelta(days=i)).isoformat() for i in range(31))
APRIL = tuple((dt.date(2024, 4, 1) + dt.timedelta(days=i)).isoformat() for i in range(30))
WEATHER_DATES: tuple[str, ...] = MARCH  # the dates of v1 and v2 tickets
ALL_WEATHER_DATES: tuple[str, ...] = MARCH + APRIL  # v3 tickets

# ticker: (company name, sector, annual dividend per share in USD)
COMPANIES: dict[str, tuple[str, str, float]] = {
    "NRTH": ("Northwind Holdings", "logistics", 1.24),
    "BLUX": ("Bluxome Energy", "utilities", 2.10),
    "KEMP": ("Kemper Robotics", "industrial automation", 0.36),
    "ORVA": ("Orvala Foods", "consumer staples", 1.68),
    "TAVI": ("Tavistock Pharma", "pharmaceuticals", 2.85),
    "MERO": ("Meridian Optics", "semiconductors", 0.52),
    "QUIL": ("Quill & Page Media", "publishing", 0.90),
    "SANK": ("Sankey Water", "utilities", 1.46),
    "VELT": ("Veltro Motors", "automotive", 0.75),
    "ZORA": ("Zora Telecom", "telecommunications", 1.92),
}
# ticker: (year founded, headquarters city, employees), in the company profiles (generator v3 asks for them)
COMPANY_FACTS: dict[str, tuple[int, str, int]] = {
    "NRTH": (1987, "Rotterdam", 12400),
    "BLUX": (1952, "Lyon", 8300),
    "KEMP": (2004, "Munich", 3150),
    "ORVA": (1968, "Porto", 21700),
    "TAVI": (1979, "Basel", 15200),
    "MERO": (1996, "Eindhoven", 6900),
    "QUIL": (1923, "Edinburgh", 2400),
    "SANK": (1961, "Leeds", 4800),
    "VELT": (1935, "Turin", 33600),
    "ZORA": (1999, "Vilnius", 9100),
}
# Companies that appear in no picture: more pages for a search to rank (ticker: name, sector, dividend, facts)
OTHER_COMPANIES: dict[str, tuple[str, str, float, tuple[int, str, int]]] = {
    "HALD": ("Haldane Shipping", "logistics", 0.88, (1911, "Bergen", 5600)),
    "CIRR": ("Cirrus Air Components", "aerospace", 0.64, (1983, "Toulouse", 7400)),
    "FENX": ("Fenix Renewables", "utilities", 1.12, (2009, "Seville", 2100)),
    "MOSA": ("Mosaic Retail Group", "retail", 1.30, (1974, "Antwerp", 18800)),
    "PELL": ("Pellucid Diagnostics", "medical devices", 0.40, (2001, "Uppsala", 1900)),
    "TRAM": ("Tramontane Rail", "transport", 0.95, (1946, "Marseille", 11300)),
}


@lru_cache(maxsize=1)
def weather_records() -> tuple[dict[str, Any], ...]:
    """Daily weather for every city and day of March and April 2024 (synthetic but plausible); the
    records of ``CITIES`` in March are the first generators' (same seeds), April is 4 C warmer."""
    records = []
    for month, dates, warmer in ((20240301, MARCH, 0.0), (20240401, APRIL, 4.0)):
        for index, (city, place) in enumerate(ALL_CITIES.items()):
            records += _month(np.random.default_rng([month, index]), city, place, dates, warmer)
    return tuple(records)


def _month(
    rng: np.random.Generator, city: str, place: tuple[float, float, float, tuple[str, ...]], dates, warmer: float
) -> list[dict[str, Any]]:
    lat, lon, mean_max, aliases = place
    records = []
    for day, date in enumerate(dates):
        t_max = round(mean_max + warmer + 0.08 * day + float(rng.normal(0, 2.5)), 1)
        t_min = round(t_max - float(rng.uniform(4, 10)), 1)
        rain = round(max(0.0, float(rng.normal(0, 5))), 1)
        wind = round(float(rng.uniform(5, 45)), 1)
        conditions = "rain" if rain > 4 else "light rain" if rain > 0 else ("sunny" if rng.random() < 0.5 else "cloudy")
        records.append(
            {
                "location": city,
                "aliases": list(aliases),
                "lat": lat,
                "lon": lon,
                "date": date,
                "temperature_max_c": t_max,
                "temperature_min_c": t_min,
                "precipitation_mm": rain,
                "wind_speed_max_kmh": wind,
                "conditions": conditions,
            }
        )
    return records


def weather_on(city: str, date: str) -> dict[str, Any]:
    for record in weather_records():
        if record["location"] == city and record["date"] == date:
            return record
    raise KeyError(f"no weather for {city} on {date}")


def company_url(ticker: str) -> str:
    return f"https://markets.example.org/companies/{ticker.lower()}"


def city_url(city: str) -> str:
    return f"https://travel.example.org/guides/{city.lower()}"


def corpus_documents() -> tuple[dict[str, str], ...]:
    """Company profiles (dividend, founding year, headquarters, employees) and city guides (position,
    population, elevation, March climate)."""
    docs = []
    profiles = {t: (name, sector, dividend, COMPANY_FACTS[t]) for t, (name, sector, dividend) in COMPANIES.items()}
    for ticker, (name, sector, dividend, (founded, headquarters, employees)) in {
        **profiles,
        **OTHER_COMPANIES,
    }.items():
        quarterly = dividend / 4
        docs.append(
            {
                "url": company_url(ticker),
                "title": f"{name} ({ticker}) company profile and dividend history",
                "text": (
                    f"{name} (ticker {ticker}) is a listed company in the {sector} sector. "
                    f"The company was founded in {founded} and is headquartered in {headquarters}; "
                    f"it employs {employees:,} people. "
                    f"Dividend policy: the board pays a quarterly dividend of ${quarterly:.4f} per share, "
                    f"an annual dividend of ${dividend:.2f} per share for fiscal year 2023. "
                    "The company has paid a dividend every year since 2011. "
                    f"Investor relations: ir@{ticker.lower()}.example.org."
                ),
            }
        )
    for city, (lat, lon, mean_max, _aliases) in ALL_CITIES.items():
        population, elevation = CITY_FACTS[city]
        docs.append(
            {
                "url": city_url(city),
                "title": f"{city} travel guide",
                "text": (
                    f"{city} lies at {lat:.2f} N, {lon:.2f} E, at an elevation of {elevation} m above sea level, "
                    f"and has about {population:,} thousand inhabitants. "
                    f"In March, daytime highs average around {mean_max:.0f} C. "
                    f"Trains connect {city} with the other capitals of the EuroRail network several times a day."
                ),
            }
        )
    return tuple(docs)


def write_reference_data(data_dir: Path = DATA_DIR) -> tuple[Path, Path]:
    """(Re)write the corpus and weather archive; returns their paths."""
    corpus, weather = data_dir / "corpus" / "corpus.jsonl", data_dir / "weather" / "weather.jsonl"
    for path, rows in ((corpus, corpus_documents()), (weather, weather_records())):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows), encoding="utf-8"
        )
    return corpus, weather
