"""Hybrid tasks of generator v3 whose calculation is naturally done in code: compound growth over
several years, the median or sample standard deviation of every value in a document, a route's
length converted to miles. The reference trajectory calls ``python_interpreter`` with code that
prints the golden value; the generator computes it with the same expression, so the sandbox's
output and the golden answer agree to the last digit.

These tasks keep their tool-redundant twin: the calculation (at most nine values, one formula) is
within reach of careful text-only reasoning, as a calculator task's is, so the image alone decides
the mode label (the seeds' mode-selection section: a task solvable by text reasoning alone is
tool-redundant). The twin's reference trajectory is empty, like a calculator task's.
"""

from __future__ import annotations

import statistics
from dataclasses import replace

import numpy as np

from vtb_env.synth import templates as prompts
from vtb_env.synth.blueprints import Ask, Blueprint, Options, final_rubric, n_entries, read_rubric, running_sums
from vtb_env.synth.kinds import DOMAIN_KINDS
from vtb_env.synth.scenes import Scene, make_scene, route_towns

PYTHON_TOOL = "python_interpreter"
KM_PER_MILE = 1.609344
# kind: the computation asked of it, and how the prompt names its values
COMPUTATIONS: dict[str, tuple[str, str]] = {
    "menu": ("compound", ""),
    "quotes": ("compound", ""),
    "receipt": ("median", "amounts"),
    "portfolio": ("median", "share counts"),
    "measurements": ("median", "readings"),
    "scoreboard": ("stdev", "scores"),
    "league": ("stdev", "points"),
    "chart": ("stdev", "bar values"),
    "map": ("miles", ""),
}


def python_call(code: str, purpose: str) -> dict[str, object]:
    return {"tool": PYTHON_TOOL, "arguments": {"code": code}, "purpose": purpose}


def python_task(rng: np.random.Generator, domain: str, difficulty: float, options: Options) -> Blueprint | None:
    """A computation on values read from one document of the domain; None when the domain has no such kind."""
    kinds = [k for k in DOMAIN_KINDS[domain] if k in COMPUTATIONS]
    if not kinds:
        return None
    kind = str(rng.choice(kinds))
    scene = make_scene(options.kind(kind), rng, n_entries(difficulty, rng))
    how, values = COMPUTATIONS[kind]
    if how == "compound":
        return _compound(rng, scene, options)
    if how == "median" and len(scene.entries) % 2:  # an even count: the median is no value the page prints
        scene = replace(scene, entries=scene.entries[:-1])
    numbers = [e.value for e in scene.entries]
    listing = "values = [" + ", ".join(repr(v) for v in numbers) + "]"
    if how == "median":
        value = statistics.median(numbers)
        middle = sorted(numbers)[(len(numbers) - 1) // 2 : len(numbers) // 2 + 1]
        working: tuple[float, ...] = (*middle, sum(middle), len(numbers))
        code = f"import statistics\n{listing}\nprint(statistics.median(values))"
        prompt, what = (
            options.wording(prompts.MEDIAN, values=values, title=scene.title),
            f"the median of the {values}",
        )
    elif how == "stdev":
        value = round(statistics.stdev(numbers), 2)
        mean = statistics.mean(numbers)
        squares = [(x - mean) ** 2 for x in numbers]
        working = (
            *running_sums(numbers), len(numbers), len(numbers) - 1, mean, *(x - mean for x in numbers), *squares,
            *running_sums(squares), statistics.variance(numbers), statistics.stdev(numbers),
        )  # fmt: skip
        code = f"import statistics\n{listing}\nprint(round(statistics.stdev(values), 2))"
        prompt = options.wording(prompts.STDEV, values=values, title=scene.title)
        what = f"the sample standard deviation of the {values}"
    else:  # miles: the whole route
        value = round(sum(numbers) / KM_PER_MILE, 2)
        working = (*running_sums(numbers), sum(numbers) / KM_PER_MILE)
        code = f"{listing}\nprint(round(sum(values) / {KM_PER_MILE}, 2))"
        start, *_, end = route_towns(scene.entries)
        prompt, what = options.wording(prompts.MILES, start=start, end=end), f"the route from {start} to {end} in miles"
    shown = f"${value:,.2f}" if scene.kind.unit == "$" else f"{value:g}"
    read = ", ".join(e.text for e in scene.entries)
    golden = f"The {len(numbers)} values are {read}; {what} is {shown}."
    # No rubric per value read: a list of nine values is what the checks refuse as a spray of candidates.
    return _blueprint(scene, prompt, golden, what, value, shown, scene.entries, code, working, rubric_reads=0)


def _compound(rng: np.random.Generator, scene: Scene, options: Options) -> Blueprint:
    entry = scene.entries[int(rng.integers(0, len(scene.entries)))]
    pct, years = int(rng.choice([3, 4, 5, 6, 8])), int(rng.integers(3, 11))
    value = round(entry.value * (1 + pct / 100) ** years, 2)
    factors = [(1 + pct / 100) ** year for year in range(1, years + 1)]
    working = (*factors, *(entry.value * f for f in factors), value - entry.value, pct / 100)
    code = f"price = {entry.value!r}\nprint(round(price * (1 + {pct} / 100) ** {years}, 2))"
    phrase = scene.kind.phrase(entry.label)
    prompt = options.wording(prompts.COMPOUND, phrase=phrase, pct=pct, years=years)
    golden = (
        f"{phrase[0].upper() + phrase[1:]} is {entry.text}; after {years} years at {pct}% a year it is ${value:,.2f}."
    )
    what, shown = f"{phrase} in {years} years", f"${value:,.2f}"
    return _blueprint(scene, prompt, golden, what, value, shown, (entry,), code, working)


def _blueprint(scene, prompt, golden, what, value, shown, reads, code, working, rubric_reads: int = 1) -> Blueprint:
    rubrics = (final_rubric(what, value, shown, 0.011), *(read_rubric(scene, e) for e in reads[:rubric_reads]))
    ask = Ask(
        prompt,
        golden,
        rubrics,
        (0,),
        tuple((0, e.label) for e in reads),
        ("Put the values read into a short program and run it.", f"State {what}: {shown}."),
        (python_call(code, f"Compute {what}."),),
        working=tuple(working),
    )
    return Blueprint(scene.kind.domain, "hybrid_tool_reasoning", "python", (scene,), (ask,))
