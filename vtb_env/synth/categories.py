"""The five task categories as blueprints: questions, golden answers and exact rubrics.

A blueprint holds only facts and words; how its images look (tool-required or
tool-redundant) is decided later in ``twins``, so both renderings share every question.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from vtb_env.synth import reference_data as ref
from vtb_env.synth import templates as prompts
from vtb_env.synth.scenes import DOMAIN_KINDS, LAB_TESTS, Entry, Scene, make_scene, make_ticket


@dataclass(frozen=True)
class RubricSpec:
    description: str
    weight: int
    categories: tuple[str, ...]
    check: dict[str, Any]
    critical: bool = False


@dataclass(frozen=True)
class Ask:
    """One turn: its prompt, golden answer, rubrics, what must be read and what comes after."""

    prompt: str
    golden: str
    rubrics: tuple[RubricSpec, ...]
    new_states: tuple[int, ...] = ()  # scene states whose image arrives with this turn
    reads: tuple[tuple[int, str], ...] = ()  # (state, label) facts to read from the images
    steps: tuple[str, ...] = ()  # reasoning key steps after the reading
    tool_calls: tuple[dict[str, Any], ...] = ()  # non-vision reference calls (lookup, calculator)


@dataclass(frozen=True)
class Blueprint:
    domain: str
    category: str
    variant: str
    states: tuple[Scene, ...]
    asks: tuple[Ask, ...]
    split: bool = False  # the first image splits its entries over two distant panels
    needs_lookup: bool = False  # a fact comes from the corpus or weather archive


# --- wording ---------------------------------------------------------------------------------

ROW_WORDS = {  # kind: (row noun, "highest ..." phrase)
    "menu": ("dish", "the most expensive dish"),
    "receipt": ("item", "the most expensive item"),
    "quotes": ("ticker", "the ticker with the highest last price"),
    "portfolio": ("ticker", "the holding with the most shares"),
    "scoreboard": ("team", "the team with the highest score"),
    "league": ("club", "the club with the most points"),
    "chart": ("bar", "the tallest bar"),
    "measurements": ("specimen", "the specimen with the highest reading"),
    "map": ("segment", "the longest segment of the route"),
    "timetable": ("stop", "the stop with the latest departure"),
    "lab": ("test", "the test with the highest value"),
}


def say(scene: Scene, value: float) -> str:
    unit = scene.kind.unit
    if unit == "$":
        return f"${value:,.2f}"
    if unit == "%":
        return f"{value:.1f}%"
    if unit in ("minutes", "points", "shares", "km"):
        return f"{value:g} {unit}"
    return f"{value:g}"


def number(value: float, tol: float = 0.011) -> dict[str, Any]:
    return {"type": "number", "value": round(float(value), 4), "abs_tol": tol}


def text(*any_of: str, none_of: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "text", "any_of": list(any_of), "none_of": list(none_of)}


def read_rubric(scene: Scene, entry: Entry) -> RubricSpec:
    check = (
        text(entry.text)
        if scene.kind.name == "timetable"
        else number(entry.value, 0.006 if scene.kind.unit == "$" else 0.05)
    )
    return RubricSpec(
        f"The response reads {scene.kind.phrase(entry.label)} as {entry.text}.", 3, ("visual understanding",), check
    )


def final_rubric(what: str, value: float, shown: str, tol: float = 0.011) -> RubricSpec:
    return RubricSpec(
        f"The response states that {what} is {shown}.", 5, ("truthfulness", "reasoning"), number(value, tol), True
    )


def label_rubric(what: str, label: str, others: list[str]) -> RubricSpec:
    return RubricSpec(
        f"The response identifies {label} as {what}.",
        5,
        ("visual understanding", "truthfulness"),
        text(label, none_of=tuple(o for o in others if o != label and label not in o)),
        True,
    )


def calculator(expression: str, purpose: str) -> dict[str, Any]:
    return {"tool": "calculator", "arguments": {"expression": expression}, "purpose": purpose}


def _pick(rng: np.random.Generator, entries: tuple[Entry, ...], k: int) -> list[Entry]:
    return [entries[int(i)] for i in sorted(rng.choice(len(entries), size=k, replace=False))]


def _n_entries(difficulty: float, rng: np.random.Generator) -> int:
    return int(5 + round(3 * difficulty) + rng.integers(0, 2))


# --- region switch ---------------------------------------------------------------------------


def region_switch(rng: np.random.Generator, domain: str, difficulty: float) -> Blueprint:
    kind = str(rng.choice(DOMAIN_KINDS[domain]))
    scene = make_scene(kind, rng, _n_entries(difficulty, rng))
    entries, half = scene.entries, len(scene.entries) // 2
    if kind == "map":
        total = sum(e.value for e in entries)
        start, end = entries[0].label.split(" to ")[0], entries[-1].label.split(" to ")[1]
        prompt = prompts.ROUTE.format(start=start, end=end)
        parts = " + ".join(e.text for e in entries)
        golden = f"Adding the segment lengths along the route ({parts}) gives {total:g} km from {start} to {end}."
        return Blueprint(
            domain,
            "region_switch_qa",
            "route_sum",
            (scene,),
            (
                Ask(
                    prompt,
                    golden,
                    (
                        final_rubric(f"the route from {start} to {end}", total, f"{total:g} km", 0.5),
                        *(read_rubric(scene, e) for e in (entries[0], entries[-1])),
                    ),
                    new_states=(0,),
                    reads=tuple((0, e.label) for e in entries),
                    steps=("Add the lengths of all route segments.", f"State the total distance of {total:g} km."),
                ),
            ),
        )
    a = entries[int(rng.integers(0, half))]
    b = entries[int(rng.integers(half, len(entries)))]
    pa, pb = scene.kind.phrase(a.label), scene.kind.phrase(b.label)
    if kind == "timetable":
        value, what = b.value - a.value, f"the travel time from {a.label} to {b.label}"
        prompt = prompts.RIDE_SPLIT.format(a=a.label, b=b.label)
        golden = f"It departs {a.label} at {a.text} and {b.label} at {b.text}, so the ride takes {value:g} minutes."
    elif kind == "lab":
        value, what = a.value + b.value, ""
        prompt = prompts.RESULTS_SPLIT.format(a=a.label, b=b.label)
        golden = f"The {a.label} result is {a.text} and the {b.label} result is {b.text}."
    elif scene.kind.summable:
        value, what = a.value + b.value, f"the total of {pa} and {pb}"
        prompt = prompts.TOTAL_SPLIT.format(what=scene.kind.what, a=pa, b=pb)
        golden = f"{pa[0].upper() + pa[1:]} is {a.text} and {pb} is {b.text}; together that is {say(scene, value)}."
    else:
        value, what = abs(a.value - b.value), f"the difference between {pa} and {pb}"
        prompt = prompts.DIFFERENCE_SPLIT.format(what=scene.kind.what, a=pa, b=pb)
        golden = f"{pa[0].upper() + pa[1:]} is {a.text} and {pb} is {b.text}; the difference is {value:.2f}."
    rubrics = [read_rubric(scene, a), read_rubric(scene, b)]
    if kind == "lab":
        rubrics = [RubricSpec(r.description, 5, r.categories, r.check, True) for r in rubrics]
    else:
        rubrics.insert(
            0,
            final_rubric(
                what, value, say(scene, value) if kind != "chart" and kind != "measurements" else f"{value:.2f}"
            ),
        )
    steps = () if kind == "lab" else (f"Combine the two values to get {what}.",)
    return Blueprint(
        domain,
        "region_switch_qa",
        "two_regions",
        (scene,),
        (Ask(prompt, golden, tuple(rubrics), (0,), ((0, a.label), (0, b.label)), steps + ("State the answer.",)),),
        split=True,
    )


# --- hybrid tool reasoning -------------------------------------------------------------------


def hybrid(rng: np.random.Generator, domain: str, difficulty: float) -> Blueprint:
    if domain == "Generalist" and rng.random() < 0.5:
        return _hybrid_weather(rng)
    if domain == "Finance" and rng.random() < 0.5:
        return _hybrid_corpus(rng, difficulty)
    return _hybrid_calculator(rng, domain, difficulty)


def _hybrid_weather(rng: np.random.Generator) -> Blueprint:
    ticket = make_ticket(rng, ref.WEATHER_DATES)
    city, date = ticket.fields["To"], ticket.fields["Date"]
    record = ref.weather_on(city, date)
    t_max = record["temperature_max_c"]
    prompt = prompts.WEATHER
    golden = (
        f"The ticket is to {city} on {date}. "
        f"The weather archive reports a maximum temperature of {t_max:.1f} °C in {city} that day."
    )
    others = [c for c in ref.CITIES if c != city]
    rubrics = (
        final_rubric(f"the maximum temperature in {city} on {date}", t_max, f"{t_max:.1f} °C", 0.05),
        RubricSpec(
            f"The response identifies the destination as {city}.",
            4,
            ("visual understanding",),
            text(city, none_of=tuple(others)),
            True,
        ),
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


def _hybrid_corpus(rng: np.random.Generator, difficulty: float) -> Blueprint:
    scene = make_scene("portfolio", rng, _n_entries(difficulty, rng))
    entry = scene.entries[int(rng.integers(0, len(scene.entries)))]
    name, _sector, dividend = ref.COMPANIES[entry.label]
    income = round(entry.value * dividend, 2)
    prompt = prompts.DIVIDEND.format(ticker=entry.label)
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
        {
            "tool": "web_search",
            "arguments": {"query": f"{entry.label} {name} annual dividend per share", "num_results": 5},
            "purpose": "Find the company's dividend page.",
        },
        {
            "tool": "browser_get_page_text",
            "arguments": {"url": ref.company_url(entry.label)},
            "purpose": "Read the annual dividend per share.",
        },
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


def _hybrid_calculator(rng: np.random.Generator, domain: str, difficulty: float) -> Blueprint:
    kind = str(rng.choice([k for k in DOMAIN_KINDS[domain] if k != "portfolio"] or DOMAIN_KINDS[domain]))
    scene = make_scene(kind, rng, _n_entries(difficulty, rng))
    a, b, c = _pick(rng, scene.entries, 3)
    if kind in ("menu", "receipt", "quotes"):
        qa, qb, pct = int(rng.integers(2, 6)), int(rng.integers(1, 5)), int(rng.choice([5, 8, 10, 12, 15, 18, 20]))
        extra = {"menu": "tip", "receipt": "sales tax", "quotes": "broker commission"}[kind]
        unit = {"menu": "order", "receipt": "units", "quotes": "shares"}[kind]
        value = round((qa * a.value + qb * b.value) * (1 + pct / 100), 2)
        prompt = prompts.ORDER.format(qa=qa, unit=unit, a=a.label, qb=qb, b=b.label, pct=pct, extra=extra)
        expression = f"({qa} * {a.value:.2f} + {qb} * {b.value:.2f}) * (1 + {pct}/100)"
        golden = (
            f"{a.label} costs {a.text} and {b.label} costs {b.text}; "
            f"({qa} x {a.text} + {qb} x {b.text}) plus {pct}% comes to ${value:,.2f}."
        )
        reads, what, shown = (a, b), "the total", f"${value:,.2f}"
    elif kind == "timetable":
        a, b = sorted((a, c), key=lambda e: e.value)
        km = int(rng.integers(8, 60))
        value = round(km / ((b.value - a.value) / 60), 1)
        prompt = prompts.SPEED.format(a=a.label, b=b.label, km=km)
        expression = f"{km} / (({b.value - a.value:g}) / 60)"
        golden = (
            f"It leaves {a.label} at {a.text} and {b.label} at {b.text}: "
            f"{b.value - a.value:g} minutes for {km} km, about {value:.1f} km/h."
        )
        reads, what, shown = (a, b), "the average speed", f"{value:.1f} km/h"
    elif kind in ("scoreboard", "league"):
        value = round(100 * a.value / (a.value + b.value), 1)
        prompt = prompts.SHARE.format(a=a.label, b=b.label)
        expression = f"100 * {a.value:g} / ({a.value:g} + {b.value:g})"
        golden = f"{a.label} has {a.text} and {b.label} has {b.text}, so {a.label}'s share is {value:.1f}%."
        reads, what, shown = (a, b), f"{a.label}'s share", f"{value:.1f}%"
    elif kind == "lab":
        high = LAB_TESTS[a.label][2]
        value = round(100 * a.value / high, 1)
        prompt = prompts.LIMIT.format(test=a.label)
        expression = f"100 * {a.value:g} / {high:g}"
        golden = (
            f"The {a.label} result is {a.text} and the upper limit is {high:g}, so it is {value:.1f}% of the limit."
        )
        reads, what, shown = (a,), "the percentage of the upper limit", f"{value:.1f}%"
    elif kind == "map":
        speed = int(rng.choice([12, 15, 18, 20, 24]))
        total = sum(e.value for e in scene.entries)
        value = round(total / speed * 60, 1)
        start, end = scene.entries[0].label.split(" to ")[0], scene.entries[-1].label.split(" to ")[1]
        prompt = prompts.CYCLING.format(speed=speed, start=start, end=end)
        expression = f"({' + '.join(f'{e.value:g}' for e in scene.entries)}) / {speed} * 60"
        legs = " + ".join(f"{e.value:g} km" for e in scene.entries)
        golden = f"The route is {legs} = {total:g} km long; at {speed} km/h that takes {value:.1f} minutes."
        reads, what, shown = tuple(scene.entries), "the cycling time", f"{value:.1f} minutes"
    else:  # chart, measurements: a mean of three readings
        value = round((a.value + b.value + c.value) / 3, 2)
        prompt = prompts.MEAN.format(
            a=scene.kind.phrase(a.label), b=scene.kind.phrase(b.label), c=scene.kind.phrase(c.label)
        )
        expression = f"({a.value:g} + {b.value:g} + {c.value:g}) / 3"
        golden = f"The three values are {a.text}, {b.text} and {c.text}; their mean is {value:.2f}."
        reads, what, shown = (a, b, c), "the mean", f"{value:.2f}"
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
    )
    return Blueprint(scene.kind.domain, "hybrid_tool_reasoning", "calculator", (scene,), (ask,))


# --- follow-up -------------------------------------------------------------------------------


def follow_up(rng: np.random.Generator, domain: str, difficulty: float) -> Blueprint:
    kind = str(rng.choice(DOMAIN_KINDS[domain]))
    scene = make_scene(kind, rng, _n_entries(difficulty, rng))
    vague, clarify, supply = prompts.VAGUE[kind]
    entries = scene.entries
    a, b = _pick(rng, entries, 2)
    if kind in ("scoreboard", "league"):
        leader = max(entries, key=lambda e: e.value)
        a = next(e for e in entries if e is not leader) if a is leader else a
        value, reads = leader.value - a.value, (a, leader)
        answer = (
            f"The {a.label} have {a.text}; the leader, {leader.label}, has {leader.text}, "
            f"so they are {value:g} points behind."
        )
    elif kind == "map":
        i = int(rng.integers(0, len(entries) - 1))
        a, b = entries[i], entries[i + 1]
        start, end = a.label.split(" to ")[0], b.label.split(" to ")[1]
        value, reads = a.value + b.value, (a, b)
        answer = f"From {start} to {end} the route has {a.text} and {b.text}, {value:g} km in total."
        supply = supply.format(a=start, b=end)
    elif kind == "timetable":
        value, reads = b.value - a.value, (a, b)
        answer = f"It departs {a.label} at {a.text} and {b.label} at {b.text}: the ride takes {value:g} minutes."
    elif kind in ("menu", "receipt"):
        value, reads = a.value + b.value, (a, b)
        answer = f"The {a.label} is {a.text} and the {b.label} is {b.text}, {say(scene, value)} in total."
    elif kind == "lab":
        _unit, low, high, _step = LAB_TESTS[a.label]
        verdict = "below" if a.value < low else "above" if a.value > high else "within"
        value, reads = a.value, (a,)
        answer = f"Your {a.label} result is {a.text}, which is {verdict} the reference range of {low:g}-{high:g}."
    else:
        value, reads = a.value, (a,)
        answer = f"{scene.kind.phrase(a.label)[0].upper() + scene.kind.phrase(a.label)[1:]} is {a.text}."
    supply = supply.format(a=a.label, b=b.label) if "{" in supply else supply
    tol = 0.006 if scene.kind.unit == "$" else 0.05
    wrong_guesses = tuple(sorted({e.text for e in entries} | {say(scene, value)}))
    asks = {"type": "clarify", "asks_for": list(prompts.CLARIFY_DETAIL[kind]), "echo_of": vague}
    first = Ask(
        f"{vague}",
        f"I can see the {scene.kind.what}, but I need one detail first: {clarify}",
        (
            RubricSpec(
                "The response asks a clarifying question instead of guessing a value.",
                5,
                ("instruction following",),
                {**asks, "none_of": list(wrong_guesses)},
                True,
            ),
            RubricSpec("The response asks which entry the user means.", 3, ("instruction following",), asks),
        ),
        new_states=(0,),
        steps=("Notice that the question does not say which entry is meant.", "Ask for it."),
    )
    rubrics = [final_rubric("the answer", value, say(scene, value), tol)]
    if kind == "lab":
        rubrics.append(
            RubricSpec(
                f"The response says the result is {verdict} the reference range.",
                4,
                ("truthfulness",),
                text(verdict, none_of=tuple(v for v in ("below", "above", "within") if v != verdict)),
                True,
            )
        )
    rubrics += [read_rubric(scene, e) for e in reads if e.value != value]
    second = Ask(
        supply,
        answer,
        tuple(rubrics),
        (),
        tuple((0, e.label) for e in reads),
        ("Use the supplied detail to find the right entries.", "State the answer."),
        (calculator(f"{reads[-1].value:g} - {reads[0].value:g}", "Compute the difference."),)
        if kind in ("scoreboard", "league", "timetable")
        else (),
    )
    return Blueprint(scene.kind.domain, "follow_up_test", "clarify_then_answer", (scene,), (first, second))


# --- temporal --------------------------------------------------------------------------------

TEMPORAL_KINDS = {
    "Generalist": ("menu", "timetable"),
    "Finance": ("quotes", "portfolio"),
    "Sports": ("scoreboard", "league"),
    "Medical": ("lab",),
    "STEM": ("chart", "measurements"),
}
LATER = {
    "menu": "the same menu a year later",
    "timetable": "the updated departure board",
    "quotes": "the board a week later",
    "portfolio": "the statement a quarter later",
    "scoreboard": "the scoreboard at the next break",
    "league": "the table a few rounds later",
    "lab": "the report from the follow-up visit",
    "chart": "the chart after a repeat run",
    "measurements": "the table after drying",
}


def temporal(rng: np.random.Generator, domain: str, difficulty: float) -> Blueprint:
    kind = str(rng.choice(TEMPORAL_KINDS[domain]))
    n_images = 3 if rng.random() < 0.5 else 2
    scene = make_scene(kind, rng, 4 + int(round(difficulty)))
    states, tries = [scene], 0
    while len(states) < n_images:
        tries += 1
        # A value the kind's rule cannot move (a lab value of 0.3 stays 0.3 after rounding) would loop forever:
        # after 100 tries every value moves by distinct steps instead.
        nxt = states[-1].evolved(rng) if tries <= 100 else states[-1].stepped(tries - 100)
        growth = [n.value - f.value for n, f in zip(nxt.entries, scene.entries, strict=False)]
        if len(set(growth)) == len(growth) and all(
            n.value != o.value for n, o in zip(nxt.entries, states[-1].entries, strict=False)
        ):
            states.append(nxt)
    a = scene.entries[int(rng.integers(0, len(scene.entries)))]
    phrase = scene.kind.phrase(a.label)
    a1 = states[1].entry(a.label)
    delta = a1.value - a.value
    tol = 0.006 if scene.kind.unit == "$" else 0.05
    asks = [
        Ask(
            prompts.VALUE.format(phrase=phrase, what=scene.kind.what),
            f"{phrase[0].upper() + phrase[1:]} is {a.text}.",
            (
                final_rubric(phrase, a.value, a.text, tol)
                if kind != "timetable"
                else RubricSpec(
                    f"The response states that {phrase} is {a.text}.", 5, ("visual understanding",), text(a.text), True
                ),
            ),
            (0,),
            ((0, a.label),),
            ("State the value.",),
        ),
        Ask(
            prompts.CHANGED_SINCE.format(later=LATER[kind], phrase=phrase),
            f"It went from {a.text} to {a1.text}, {'an increase' if delta > 0 else 'a decrease'} of {abs(delta):.2f}.",
            (
                final_rubric(f"the change of {phrase}", abs(delta), f"{abs(delta):.2f}", tol),
                RubricSpec(
                    f"The response says the value {'increased' if delta > 0 else 'decreased'}.",
                    3,
                    ("reasoning",),
                    text(
                        *(
                            ("increase", "increased", "rose", "up")
                            if delta > 0
                            else ("decrease", "decreased", "fell", "down")
                        )
                    ),
                ),
            ),
            (1,),
            ((1, a.label),),
            ("Compare the new value with the previous one.", "State the change and its direction."),
            (calculator(f"{a1.value:g} - {a.value:g}", "Compute the change."),),
        ),
    ]
    if n_images == 3:
        last = states[2]
        growth = {e.label: last.entry(e.label).value - e.value for e in scene.entries}
        best = max(growth, key=growth.get)
        labels = [e.label for e in scene.entries]
        asks.append(
            Ask(
                prompts.CHANGED_MOST.format(later=LATER[kind], row=ROW_WORDS[kind][0]),
                f"{best} rose the most: from {scene.entry(best).text} to {last.entry(best).text}, +{growth[best]:.2f}.",
                (
                    label_rubric(f"the {ROW_WORDS[kind][0]} with the largest increase", best, labels),
                    final_rubric("its increase", growth[best], f"{growth[best]:.2f}", tol),
                ),
                (2,),
                tuple((0, e.label) for e in scene.entries) + tuple((2, e.label) for e in scene.entries),
                ("Compute each entry's change between the first and last image.", "Pick the largest increase."),
                (
                    calculator(
                        f"{last.entry(best).value:g} - {scene.entry(best).value:g}", "Compute the largest increase."
                    ),
                ),
            )
        )
    return Blueprint(
        scene.kind.domain, "temporal_visual_reasoning", f"{n_images}_snapshots", tuple(states), tuple(asks)
    )


# --- progressive -----------------------------------------------------------------------------


def progressive(rng: np.random.Generator, domain: str, difficulty: float) -> Blueprint:
    kind = str(rng.choice([k for k in DOMAIN_KINDS[domain] if k != "lab"] or ("lab",)))
    scene = make_scene(kind, rng, _n_entries(difficulty, rng))
    entries, labels = scene.entries, [e.label for e in scene.entries]
    top = max(entries, key=lambda e: e.value)
    a = next(e for e in _pick(rng, entries, 2) if e is not top)
    phrase = scene.kind.phrase(a.label)
    tol = 0.006 if scene.kind.unit == "$" else 0.05
    if kind == "lab":
        _unit, low, high, _step = LAB_TESTS[a.label]
        verdict = "below" if a.value < low else "above" if a.value > high else "within"
        gap = round(low - a.value if verdict == "below" else a.value - high if verdict == "above" else 0.0, 1)
        second = Ask(
            prompts.IN_RANGE,
            f"The reference range is {low:g}-{high:g}, so {a.text} is {verdict} it" + (f" by {gap:g}." if gap else "."),
            (
                RubricSpec(
                    f"The response says the result is {verdict} the range.",
                    5,
                    ("truthfulness",),
                    text(verdict, none_of=tuple(v for v in ("below", "above", "within") if v != verdict)),
                    True,
                ),
                *((final_rubric("the distance outside the range", gap, f"{gap:g}", 0.05),) if gap else ()),
            ),
            (),
            ((0, a.label),),
            ("Compare the result with its reference range.", "State the verdict."),
        )
        asks = [second]
    else:
        diff = top.value - a.value
        shown = say(scene, diff) if kind != "timetable" else f"{diff:g} minutes"
        asks = [
            Ask(
                prompts.HIGHEST.format(row=ROW_WORDS[kind][0], highest=ROW_WORDS[kind][1].split(" ", 1)[1])
                if kind != "timetable"
                else prompts.LATEST,
                f"{top.label} is {ROW_WORDS[kind][1]}, with {top.text}.",
                (label_rubric(ROW_WORDS[kind][1], top.label, labels), read_rubric(scene, top)),
                (),
                tuple((0, e.label) for e in entries),
                ("Compare all entries.", f"Name {top.label}."),
            ),
            Ask(
                prompts.MORE_THAN_THAT.format(a=a.label)
                if kind != "timetable"
                else prompts.MINUTES_AFTER.format(a=a.label),
                f"{top.text} versus {a.text}: a difference of {shown}.",
                (final_rubric("the difference", diff, shown, tol),),
                (),
                ((0, top.label), (0, a.label)),
                ("Subtract the two values.", "State the difference."),
                (calculator(f"{top.value:g} - {a.value:g}", "Compute the difference."),),
            ),
        ]
    first = Ask(
        prompts.VALUE.format(phrase=phrase, what=scene.kind.what),
        f"{phrase[0].upper() + phrase[1:]} is {a.text}.",
        (
            RubricSpec(
                f"The response states that {phrase} is {a.text}.",
                5,
                ("visual understanding",),
                text(a.text) if kind == "timetable" else number(a.value, tol),
                True,
            ),
        ),
        (0,),
        ((0, a.label),),
        ("State the value.",),
    )
    return Blueprint(scene.kind.domain, "progressive_visual_reasoning", kind, (scene,), (first, *asks))


BUILDERS: dict[str, Callable[[np.random.Generator, str, float], Blueprint]] = {
    "region_switch_qa": region_switch,
    "hybrid_tool_reasoning": hybrid,
    "follow_up_test": follow_up,
    "temporal_visual_reasoning": temporal,
    "progressive_visual_reasoning": progressive,
}
