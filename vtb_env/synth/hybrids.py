"""The hybrid category: facts read from the image combined with a calculation or a lookup."""

from __future__ import annotations

import numpy as np

from vtb_env.synth import lookups
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
    number,
    page_lookup,
    pick,
    read_rubric,
    running_sums,
    text,
)
from vtb_env.synth.computed import python_task
from vtb_env.synth.kinds import DOMAIN_KINDS, LAB_TESTS
from vtb_env.synth.scenes import make_scene, route_towns

LOOKUP_SHARE = 0.6  # v3: of Generalist and Finance hybrids (v1, v2: 0.5); lookups have no twin (see docs/synth.md)
PYTHON_SHARE = 0.5  # v3: of the other hybrids, computations done in code (python_interpreter)


def hybrid(rng: np.random.Generator, domain: str, difficulty: float, options: Options) -> Blueprint:
    if options.richer:
        return _hybrid_v3(rng, domain, difficulty, options)
    if domain == "Generalist" and rng.random() < 0.5:
        return _hybrid_weather(rng, options)
    if domain == "Finance" and rng.random() < 0.5:
        return _hybrid_corpus(rng, difficulty, options)
    return _hybrid_calculator(rng, domain, difficulty, options)


def _hybrid_v3(rng: np.random.Generator, domain: str, difficulty: float, options: Options) -> Blueprint:
    """v3: more kinds of lookups (weather variables, city and company facts) and Python computations."""
    if domain == "Generalist" and rng.random() < LOOKUP_SHARE:
        return lookups.ticket_lookup(rng, options) if rng.random() < 0.75 else _hybrid_weather(rng, options)
    if domain == "Finance" and rng.random() < LOOKUP_SHARE:
        return (
            lookups.founded(rng, difficulty, options)
            if rng.random() < 0.5
            else _hybrid_corpus(rng, difficulty, options)
        )
    if rng.random() < PYTHON_SHARE:
        computed = python_task(rng, domain, difficulty, options)
        if computed is not None:
            return computed
    return _hybrid_calculator(rng, domain, difficulty, options)


def _hybrid_weather(rng: np.random.Generator, options: Options) -> Blueprint:
    ticket = lookups.ticket(rng, options)
    city, date = ticket.fields["To"], ticket.fields["Date"]
    record = ref.weather_on(city, date)
    t_max = record["temperature_max_c"]
    prompt = options.wording(prompts.WEATHER)
    golden = (
        f"The ticket is to {city} on {date}. "
        f"The weather archive reports a maximum temperature of {t_max:.1f} °C in {city} that day."
    )
    origin = (ticket.fields["From"],) if options.answerable else ()
    rubrics = (
        final_rubric(f"the maximum temperature in {city} on {date}", t_max, f"{t_max:.1f} °C", 0.05),
        lookups.city_rubric("destination", city, options, origin),
        RubricSpec(f"The response identifies the travel date as {date}.", 3, ("visual understanding",), text(date)),
    )
    call = {
        "tool": "historical_weather",
        "arguments": {"location": city, "date": date},
        "purpose": "Look up the weather at the destination on the travel date.",
    }
    ask = Ask(
        prompt,
        golden,
        rubrics,
        (0,),
        ((0, "To"), (0, "Date")),
        (f"Look up the historical weather for {city} on {date}.", f"Report the maximum temperature, {t_max:.1f} °C."),
        (call,),
    )
    return Blueprint("Generalist", "hybrid_tool_reasoning", "weather_lookup", (ticket,), (ask,), needs_lookup=True)


def _hybrid_corpus(rng: np.random.Generator, difficulty: float, options: Options) -> Blueprint:
    # tickers with a company profile (lookup tasks have no twin, so no shared vocabulary is needed)
    scene = make_scene("portfolio", rng, n_entries(difficulty, rng))
    entry = scene.entries[int(rng.integers(0, len(scene.entries)))]
    name, _sector, dividend = ref.COMPANIES[entry.label]
    income = round(entry.value * dividend, 2)
    prompt = options.wording(prompts.DIVIDEND, ticker=entry.label)
    golden = (
        f"The statement shows {entry.text} shares of {entry.label} ({name}). "
        f"Its annual dividend is ${dividend:.2f} per share, "
        f"so the holding pays {entry.text} x ${dividend:.2f} = ${income:,.2f} a year."
    )
    rubrics = (
        final_rubric(f"the annual dividend income from {entry.label}", income, f"${income:,.2f}", 0.011),
        read_rubric(scene, entry),
        RubricSpec(
            f"The response uses an annual dividend of ${dividend:.2f} per share.",
            3,
            ("truthfulness",),
            number(dividend, 0.006),
        ),
    )
    calls = (
        *page_lookup(
            f"{entry.label} {name} annual dividend per share",
            ref.company_url(entry.label),
            "Find the company's dividend page.",
            "Read the annual dividend per share.",
        ),
        calculator(f"{int(entry.value)} * {dividend:.2f}", "Multiply shares by the dividend per share."),
    )
    ask = Ask(
        prompt,
        golden,
        rubrics,
        (0,),
        ((0, entry.label),),
        (f"Look up the annual dividend of {name}: ${dividend:.2f} per share.", f"Multiply to get ${income:,.2f}."),
        calls,
    )
    return Blueprint("Finance", "hybrid_tool_reasoning", "corpus_lookup", (scene,), (ask,), needs_lookup=True)


def _hybrid_calculator(rng: np.random.Generator, domain: str, difficulty: float, options: Options) -> Blueprint:
    kind = str(rng.choice([k for k in DOMAIN_KINDS[domain] if k != "portfolio"] or DOMAIN_KINDS[domain]))
    scene = make_scene(options.kind(kind), rng, n_entries(difficulty, rng))
    a, b, c = pick(rng, scene.entries, 3)
    if kind in ("menu", "receipt", "quotes"):
        qa, qb, pct = int(rng.integers(2, 6)), int(rng.integers(1, 5)), int(rng.choice([5, 8, 10, 12, 15, 18, 20]))
        extra = {"menu": "tip", "receipt": "sales tax", "quotes": "broker commission"}[kind]
        unit = {"menu": "order", "receipt": "units", "quotes": "shares"}[kind]
        value = round((qa * a.value + qb * b.value) * (1 + pct / 100), 2)
        prompt = options.wording(prompts.ORDER, qa=qa, unit=unit, a=a.label, qb=qb, b=b.label, pct=pct, extra=extra)
        expression = f"({qa} * {a.value:.2f} + {qb} * {b.value:.2f}) * (1 + {pct}/100)"
        golden = (
            f"{a.label} costs {a.text} and {b.label} costs {b.text}; "
            f"({qa} x {a.text} + {qb} x {b.text}) plus {pct}% comes to ${value:,.2f}."
        )
        subtotal = qa * a.value + qb * b.value
        reads, what, shown = (a, b), "the total", f"${value:,.2f}"
        working: tuple[float, ...] = (subtotal * pct / 100, subtotal * (1 + pct / 100))
    elif kind == "timetable":
        a, b = sorted((a, c), key=lambda e: e.value)
        km = int(rng.integers(8, 60))
        value = round(km / ((b.value - a.value) / 60), 1)
        prompt = options.wording(prompts.SPEED, a=a.label, b=b.label, km=km)
        expression = f"{km} / (({b.value - a.value:g}) / 60)"
        golden = (
            f"It leaves {a.label} at {a.text} and {b.label} at {b.text}: "
            f"{b.value - a.value:g} minutes for {km} km, about {value:.1f} km/h."
        )
        reads, what, shown = (a, b), "the average speed", f"{value:.1f} km/h"
        working = (km / (b.value - a.value),)  # km per minute
    elif kind in ("scoreboard", "league"):
        value = round(100 * a.value / (a.value + b.value), 1)
        prompt = options.wording(prompts.SHARE, a=a.label, b=b.label)
        expression = f"100 * {a.value:g} / ({a.value:g} + {b.value:g})"
        golden = f"{a.label} has {a.text} and {b.label} has {b.text}, so {a.label}'s share is {value:.1f}%."
        reads, what, shown = (a, b), f"{a.label}'s share", f"{value:.1f}%"
        working = (a.value / (a.value + b.value), 100 * b.value / (a.value + b.value))
    elif kind == "lab":
        high = LAB_TESTS[a.label][2]
        value = round(100 * a.value / high, 1)
        prompt = options.wording(prompts.LIMIT, test=a.label)
        expression = f"100 * {a.value:g} / {high:g}"
        golden = (
            f"The {a.label} result is {a.text} and the upper limit is {high:g}, so it is {value:.1f}% of the limit."
        )
        reads, what, shown = (a,), "the percentage of the upper limit", f"{value:.1f}%"
        working = (a.value / high,)
    elif kind == "map":
        speed = int(rng.choice([12, 15, 18, 20, 24]))
        total = sum(e.value for e in scene.entries)
        value = round(total / speed * 60, 1)
        start, *_, end = route_towns(scene.entries)
        prompt = options.wording(prompts.CYCLING, speed=speed, start=start, end=end)
        expression = f"({' + '.join(f'{e.value:g}' for e in scene.entries)}) / {speed} * 60"
        legs = " + ".join(f"{e.value:g} km" for e in scene.entries)
        golden = f"The route is {legs} = {total:g} km long; at {speed} km/h that takes {value:.1f} minutes."
        reads, what, shown = tuple(scene.entries), "the cycling time", f"{value:.1f} minutes"
        working = (*running_sums([e.value for e in scene.entries]), total / speed)
    else:  # chart, measurements: a mean of three readings
        value = round((a.value + b.value + c.value) / 3, 2)
        prompt = options.wording(
            prompts.MEAN, a=scene.kind.phrase(a.label), b=scene.kind.phrase(b.label), c=scene.kind.phrase(c.label)
        )
        expression = f"({a.value:g} + {b.value:g} + {c.value:g}) / 3"
        golden = f"The three values are {a.text}, {b.text} and {c.text}; their mean is {value:.2f}."
        reads, what, shown = (a, b, c), "the mean", f"{value:.2f}"
        working = (a.value + c.value, b.value + c.value)
    tol = 0.011 if kind in ("menu", "receipt", "quotes", "chart", "measurements") else 0.06
    rubrics = (final_rubric(what, value, shown, tol), *(read_rubric(scene, e) for e in reads[:2]))
    ask = Ask(
        prompt,
        golden,
        rubrics,
        (0,),
        tuple((0, e.label) for e in reads),
        (f"Compute {expression}.", f"State {what}: {shown}."),
        (calculator(expression, f"Compute {what}."),),
        working=working,
    )
    return Blueprint(scene.kind.domain, "hybrid_tool_reasoning", "calculator", (scene,), (ask,))
