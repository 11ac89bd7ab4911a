"""Hybrid tasks of generator v3 that look facts up: weather variables at a ticket's destination, the
elevation of its two cities (city guides, by web search), the founding year of a statement's
largest holding (company profiles). Every fact comes from ``reference_data``, which also writes the
corpus and weather archive the offline tools serve, so golden answers and tools always agree.

Lookup tasks have no tool-redundant twin (no rendering makes a lookup unnecessary).
"""

from __future__ import annotations

import numpy as np

from vtb_env.synth import reference_data as ref
from vtb_env.synth import templates as prompts
from vtb_env.synth.blueprints import (
    Ask,
    Blueprint,
    Options,
    RubricSpec,
    calculator,
    final_rubric,
    n_entries,
    page_lookup,
    text,
)
from vtb_env.synth.scenes import Scene, make_scene, make_ticket


def cities(options: Options) -> tuple[str, ...]:
    """The cities tickets travel between (v3 adds six and April)."""
    return tuple(ref.ALL_CITIES if options.richer else ref.CITIES)


def ticket(rng: np.random.Generator, options: Options) -> Scene:
    if not options.richer:
        return make_ticket(rng, ref.WEATHER_DATES)
    return make_ticket(rng, ref.ALL_WEATHER_DATES, cities(options))


def city_rubric(role: str, city: str, options: Options, printed: tuple[str, ...] = ()) -> RubricSpec:
    """The ticket's ``city`` named, and no other city but those the ticket prints beside it (``printed``, v3:
    "from Vienna to Oslo" names the destination; a page read whole is bound to the answer, docs/rewards.md)."""
    others = tuple(c for c in cities(options) if c != city and c not in printed)
    return RubricSpec(
        f"The response identifies the {role} as {city}.", 4, ("visual understanding",), text(city, none_of=others), True
    )


def ticket_lookup(rng: np.random.Generator, options: Options) -> Blueprint:
    """A weather variable at the destination on the travel date, or the two cities' elevation difference."""
    scene = ticket(rng, options)
    what = str(rng.choice(["minimum temperature", "precipitation", "elevation"]))
    if what == "elevation":
        return _elevation(scene, options)
    city, date = scene.fields["To"], scene.fields["Date"]
    record = ref.weather_on(city, date)
    field, template, unit = {
        "minimum temperature": ("temperature_min_c", prompts.WEATHER_LOW, "°C"),
        "precipitation": ("precipitation_mm", prompts.RAIN, "mm"),
    }[what]
    value = record[field]
    golden = (
        f"The ticket is to {city} on {date}. The weather archive reports {what} of {value:.1f} {unit} there that day."
    )
    rubrics = (
        final_rubric(f"the {what} in {city} on {date}", value, f"{value:.1f} {unit}", 0.05),
        city_rubric("destination", city, options, (scene.fields["From"],) if options.answerable else ()),
        RubricSpec(f"The response identifies the travel date as {date}.", 3, ("visual understanding",), text(date)),
    )
    call = {
        "tool": "historical_weather",
        "arguments": {"location": city, "date": date},
        "purpose": f"Look up the {what} at the destination on the travel date.",
    }
    ask = Ask(
        options.wording(template),
        golden,
        rubrics,
        (0,),
        ((0, "To"), (0, "Date")),
        (f"Look up the historical weather for {city} on {date}.", f"Report the {what}, {value:.1f} {unit}."),
        (call,),
    )
    variant = "weather_" + ("min" if field == "temperature_min_c" else "rain")
    return Blueprint("Generalist", "hybrid_tool_reasoning", variant, (scene,), (ask,), needs_lookup=True)


def _elevation(scene: Scene, options: Options) -> Blueprint:
    origin, destination = scene.fields["From"], scene.fields["To"]
    low, high = ref.CITY_FACTS[origin][1], ref.CITY_FACTS[destination][1]
    difference = high - low
    where = f"{abs(difference)} m {'higher' if difference >= 0 else 'lower'}"
    golden = (
        f"The ticket runs from {origin} ({low} m above sea level) to {destination} ({high} m), "
        f"so the destination lies {where}: a difference of {difference:+d} m."
    )
    rubrics = (
        final_rubric(f"the elevation difference from {origin} to {destination}", difference, f"{difference:+d} m", 0.5),
        RubricSpec(
            f"The response identifies the destination as {destination}.",
            4,
            ("visual understanding",),
            text(destination, none_of=tuple(c for c in cities(options) if c not in (origin, destination))),
            True,
        ),
        RubricSpec(
            f"The response uses an elevation of {high} m for {destination}.", 3, ("truthfulness",), text(f"{high} m")
        ),
    )
    calls = []
    for city in (origin, destination):
        calls += page_lookup(
            f"{city} travel guide elevation",
            ref.city_url(city),
            f"Find the city guide of {city}.",
            f"Read the elevation of {city}.",
        )
    calls.append(calculator(f"{high} - ({low})", "Subtract the departure city's elevation."))
    ask = Ask(
        options.wording(prompts.ELEVATION),
        golden,
        rubrics,
        (0,),
        ((0, "From"), (0, "To")),
        (
            f"Look up the elevations in the city guides: {origin} {low} m, {destination} {high} m.",
            f"Subtract: {difference:+d} m.",
        ),
        tuple(calls),
    )
    return Blueprint("Generalist", "hybrid_tool_reasoning", "city_elevation", (scene,), (ask,), needs_lookup=True)


def founded(rng: np.random.Generator, difficulty: float, options: Options) -> Blueprint:
    """The largest holding of a statement (read every row) and its company's founding year (looked up)."""
    # tickers with a company profile (lookup tasks have no twin, so no shared vocabulary is needed)
    scene = make_scene("portfolio", rng, n_entries(difficulty, rng))
    top = max(scene.entries, key=lambda e: e.value)
    if sum(e.value == top.value for e in scene.entries) > 1:  # a tie names no single holding: break it
        entries = tuple(
            e if e is not top else type(e)(e.label, e.value + 1, f"{int(e.value) + 1}") for e in scene.entries
        )
        scene = Scene(scene.kind, scene.title, entries, scene.fields)
        top = max(scene.entries, key=lambda e: e.value)
    name = ref.COMPANIES[top.label][0]
    year = ref.COMPANY_FACTS[top.label][0]
    golden = (
        f"The largest holding is {top.label} ({name}) with {top.text} shares; "
        f"its company profile says it was founded in {year}."
    )
    others = tuple(e.label for e in scene.entries if e.label != top.label)
    rubrics = (
        final_rubric(f"the founding year of {name}", year, str(year), 0.5),
        RubricSpec(
            f"The response identifies {top.label} ({name}) as the largest holding.",
            4,
            ("visual understanding",),
            text(top.label, name, none_of=others),
            True,
        ),
    )
    calls = page_lookup(
        f"{top.label} {name} company profile founded",
        ref.company_url(top.label),
        "Find the company's profile.",
        "Read the founding year.",
    )
    ask = Ask(
        options.wording(prompts.FOUNDED, title=scene.title),
        golden,
        rubrics,
        (0,),
        tuple((0, e.label) for e in scene.entries),
        (
            f"The largest holding is {top.label} with {top.text} shares.",
            f"Its profile gives {year} as the founding year.",
        ),
        calls,
    )
    return Blueprint("Finance", "hybrid_tool_reasoning", "founded_lookup", (scene,), (ask,), needs_lookup=True)
