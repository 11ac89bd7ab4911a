"""``historical_weather``: the weather at a place ON THE DATE asked (the official toolkit ignored the date).

Offline default: the bundled archive ``vtb_env/data/weather/*.jsonl`` (one line per place and day:
``{"location","aliases","lat","lon","date","temperature_max_c","temperature_min_c","precipitation_mm",
"wind_speed_max_kmh","conditions"}``). Online: Open-Meteo's geocoding and historical archive APIs
(no key). Both go through the record/replay cache when one is configured.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Protocol

import httpx

from vtb_env.tools.base import Tool, ToolContext, ToolResult
from vtb_env.tools.cache import CacheMiss, ReplayCache
from vtb_env.tools.schemas import HISTORICAL_WEATHER
from vtb_env.tools.web_online import deadline_client

DEFAULT_ARCHIVE = Path(__file__).resolve().parent.parent / "data" / "weather"
GEOCODING_URL = "https://geocoding-api.open-meteo.com/v1/search"
ARCHIVE_URL = "https://archive-api.open-meteo.com/v1/archive"
_COORDINATES = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*$")
NEAREST_KM = 50.0  # coordinates match an archived place this close

# WMO weather interpretation codes (Open-Meteo's ``weather_code``), grouped.
_WMO = {
    0: "clear sky",
    1: "mainly clear",
    2: "partly cloudy",
    3: "overcast",
    45: "fog",
    48: "depositing rime fog",
    51: "light drizzle",
    53: "drizzle",
    55: "dense drizzle",
    56: "freezing drizzle",
    57: "freezing drizzle",
    61: "light rain",
    63: "rain",
    65: "heavy rain",
    66: "freezing rain",
    67: "freezing rain",
    71: "light snow",
    73: "snow",
    75: "heavy snow",
    77: "snow grains",
    80: "rain showers",
    81: "rain showers",
    82: "violent rain showers",
    85: "snow showers",
    86: "heavy snow showers",
    95: "thunderstorm",
    96: "thunderstorm with hail",
    99: "thunderstorm with heavy hail",
}


class WeatherUnavailable(LookupError):
    """No record for this place or date; the message says what is known."""


class WeatherBackend(Protocol):
    """Where ``historical_weather`` looks a day up: the bundled archive or Open-Meteo."""

    def lookup(self, location: str, date: str) -> dict[str, Any]: ...


def normalize_place(name: str) -> str:
    return " ".join(re.findall(r"\w+", name.lower()))


def _distance_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    a = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(math.radians(lon2 - lon1) / 2) ** 2
    return 6371.0 * 2 * math.asin(math.sqrt(a))


class WeatherArchive:
    """The bundled offline archive (plus user folders of the same JSONL format)."""

    def __init__(self, folders: Iterable[str | os.PathLike] = (DEFAULT_ARCHIVE,)):
        self._records: dict[tuple[str, str], dict[str, Any]] = {}
        self._names: dict[str, str] = {}  # normalized name or alias -> canonical location
        self._places: dict[str, tuple[float, float]] = {}
        for folder in folders:
            for path in sorted(Path(folder).glob("*.jsonl")) if os.path.isdir(folder) else ():
                with open(path, encoding="utf-8") as f:
                    for line in f:
                        if line.strip():
                            self.add(json.loads(line))

    def add(self, record: Mapping[str, Any]) -> None:
        place = record["location"]
        for name in [place, *record.get("aliases", [])]:
            self._names.setdefault(normalize_place(name), place)
        self._places[place] = (float(record["lat"]), float(record["lon"]))
        self._records[(place, record["date"])] = dict(record)

    def resolve(self, location: str) -> str:
        coordinates = _COORDINATES.match(location)
        if coordinates:
            lat, lon = float(coordinates.group(1)), float(coordinates.group(2))
            best = min(self._places, key=lambda p: _distance_km(lat, lon, *self._places[p]), default=None)
            if best is not None and _distance_km(lat, lon, *self._places[best]) <= NEAREST_KM:
                return best
            raise WeatherUnavailable(f"the offline archive has no place within {NEAREST_KM:.0f} km of {location}")
        key = normalize_place(location)
        for candidate in (key, normalize_place(location.split(",")[0])):
            if candidate in self._names:
                return self._names[candidate]
        known = ", ".join(sorted(self._places)[:20])
        raise WeatherUnavailable(f"the offline archive has no place named {location!r}; places: {known}")

    def lookup(self, location: str, date: str) -> dict[str, Any]:
        place = self.resolve(location)
        record = self._records.get((place, date))
        if record is None:
            dates = sorted(d for p, d in self._records if p == place)
            span = f"{dates[0]} to {dates[-1]}" if dates else "none"
            raise WeatherUnavailable(f"the offline archive has no record for {place} on {date} (dates held: {span})")
        record = dict(record)
        record.pop("aliases", None)
        return record


class OpenMeteo:
    """Open-Meteo: geocoding for names, the ERA5-based archive for daily values (no key needed)."""

    def __init__(self, *, geocoding_url: str = GEOCODING_URL, archive_url: str = ARCHIVE_URL, timeout_s: float = 15.0):
        self.geocoding_url, self.archive_url, self.timeout_s = geocoding_url, archive_url, timeout_s

    def lookup(self, location: str, date: str) -> dict[str, Any]:
        try:
            return self._lookup(location, date)
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise WeatherUnavailable(f"Open-Meteo failed: {type(exc).__name__}: {exc}") from None

    def _lookup(self, location: str, date: str) -> dict[str, Any]:
        coordinates = _COORDINATES.match(location)
        if coordinates:
            lat, lon, name = float(coordinates.group(1)), float(coordinates.group(2)), location.strip()
        else:
            found = self._get(self.geocoding_url, {"name": location.split(",")[0].strip(), "count": 1}).get("results")
            if not found:
                raise WeatherUnavailable(f"Open-Meteo knows no place named {location!r}")
            place = found[0]
            lat, lon = place["latitude"], place["longitude"]
            name = ", ".join(p for p in (place.get("name"), place.get("admin1"), place.get("country")) if p)
        daily = self._get(
            self.archive_url,
            {
                "latitude": lat,
                "longitude": lon,
                "start_date": date,
                "end_date": date,
                "timezone": "auto",
                "daily": "temperature_2m_max,temperature_2m_min,precipitation_sum,wind_speed_10m_max,weather_code",
            },
        )["daily"]
        if not daily.get("time") or daily["temperature_2m_max"][0] is None:
            raise WeatherUnavailable(f"Open-Meteo has no data for {name} on {date}")
        code = daily["weather_code"][0]
        return {
            "location": name,
            "lat": lat,
            "lon": lon,
            "date": date,
            "temperature_max_c": daily["temperature_2m_max"][0],
            "temperature_min_c": daily["temperature_2m_min"][0],
            "precipitation_mm": daily["precipitation_sum"][0],
            "wind_speed_max_kmh": daily["wind_speed_10m_max"][0],
            "conditions": _WMO.get(code, f"WMO code {code}"),
        }

    def _get(self, url: str, params: Mapping[str, Any]) -> dict[str, Any]:
        with deadline_client(self.timeout_s) as client:  # a dripping server cannot hold the call past timeout_s
            response = client.get(url, params=dict(params))
        if response.status_code == 400:  # Open-Meteo explains bad requests (e.g. dates out of range)
            raise WeatherUnavailable(f"Open-Meteo: {response.json().get('reason', response.text)}")
        response.raise_for_status()
        return response.json()


class HistoricalWeather(Tool):
    """``historical_weather``: one day's weather at a place, from its backend, through the cache."""

    name = "historical_weather"
    schema = HISTORICAL_WEATHER

    def __init__(self, backend: WeatherBackend, cache: ReplayCache | None = None):
        self.backend, self.cache = backend, cache

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        location, date = arguments["location"].strip(), arguments["date"].strip()
        try:
            day = dt.date.fromisoformat(date)
        except ValueError:
            return ToolResult.failure(f"historical_weather: date must be YYYY-MM-DD, got {date!r}")
        if day >= dt.date.today():
            return ToolResult.failure(f"historical_weather: {date} is not in the past")
        if not location:
            return ToolResult.failure("historical_weather: the location is empty")
        key = {"location": normalize_place(location) if not _COORDINATES.match(location) else location, "date": date}
        try:
            record = (
                self.backend.lookup(location, date)
                if self.cache is None
                else self.cache.through("historical_weather", key, lambda: self.backend.lookup(location, date))
            )
        except (WeatherUnavailable, CacheMiss) as exc:
            return ToolResult.failure(f"historical_weather: {exc}")
        return ToolResult(text=json.dumps(record, ensure_ascii=False))
