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
WEATHER_DATES: tuple[str, ...] = tuple((dt.date(2024, 3, 1) + dt.timedelta(days=i)).isoformat() for i in range(31))

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


@lru_cache(maxsize=1)
def weather_records() -> tuple[dict[str, Any], ...]:
    """Daily weather for every city and day of March 2024 (synthetic but plausible)."""
    records = []
    for index, (city, (lat, lon, mean_max, aliases)) in enumerate(CITIES.items()):
        rng = np.random.default_rng([20240301, index])
        for day, date in enumerate(WEATHER_DATES):
            t_max = round(mean_max + 0.08 * day + float(rng.normal(0, 2.5)), 1)
            t_min = round(t_max - float(rng.uniform(4, 10)), 1)
            rain = round(max(0.0, float(rng.normal(0, 5))), 1)
            wind = round(float(rng.uniform(5, 45)), 1)
            conditions = (
                "rain" if rain > 4 else "light rain" if rain > 0 else ("sunny" if rng.random() < 0.5 else "cloudy")
            )
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
    return tuple(records)


def weather_on(city: str, date: str) -> dict[str, Any]:
    for record in weather_records():
        if record["location"] == city and record["date"] == date:
            return record
    raise KeyError(f"no weather for {city} on {date}")


def company_url(ticker: str) -> str:
    return f"https://markets.example.org/companies/{ticker.lower()}"


def corpus_documents() -> tuple[dict[str, str], ...]:
    """Company profiles (with dividends) plus a few distractor pages."""
    docs = []
    for ticker, (name, sector, dividend) in COMPANIES.items():
        quarterly = dividend / 4
        docs.append(
            {
                "url": company_url(ticker),
                "title": f"{name} ({ticker}) company profile and dividend history",
                "text": (
                    f"{name} (ticker {ticker}) is a listed company in the {sector} sector. "
                    f"Dividend policy: the board pays a quarterly dividend of ${quarterly:.4f} per share, "
                    f"an annual dividend of ${dividend:.2f} per share for fiscal year 2023. "
                    "The company has paid a dividend every year since 2011. "
                    f"Investor relations: ir@{ticker.lower()}.example.org."
                ),
            }
        )
    for city, (lat, lon, mean_max, _aliases) in CITIES.items():
        docs.append(
            {
                "url": f"https://travel.example.org/guides/{city.lower()}",
                "title": f"{city} travel guide",
                "text": (
                    f"{city} lies at {lat:.2f} N, {lon:.2f} E. "
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
