"""The task categories as blueprints: questions, golden answers and exact rubrics.

A blueprint holds only facts and words; how its images look (tool-required or
tool-redundant) is decided later in ``twins``, so both renderings share every question.
The hybrid category lives in ``hybrids`` (with its lookups and computations), the temporal one in
``temporal`` (with the kinds that change over time and how prompts name the later snapshot).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from vtb_env.synth import templates as prompts
from vtb_env.synth.blueprints import (
    ROW_WORDS,
    Ask,
    Blueprint,
    Options,
    RubricSpec,
    calculator,
    final_rubric,
    label_rubric,
    n_entries,
    number,
    pick,
    read_rubric,
    running_sums,
    say,
    text,
)
from vtb_env.synth.hybrids import hybrid
from vtb_env.synth.kinds import DOMAIN_KINDS, LAB_TESTS
from vtb_env.synth.scenes import make_scene, route_towns
from vtb_env.synth.temporal import temporal

# --- region switch ---------------------------------------------------------------------------


def region_switch(rng: np.random.Generator, domain: str, difficulty: float, options: Options) -> Blueprint:
    kind = str(rng.choice(DOMAIN_KINDS[domain]))
    scene = make_scene(options.kind(kind), rng, n_entries(difficulty, rng))
    entries, half = scene.entries, len(scene.entries) // 2
    if kind == "map":
        if options.answerable:  # v3: a stretch of the route, never all of it (the page alone would answer that)
            first = int(rng.integers(0, len(entries) - 2))
            last = int(rng.integers(first + 2, len(entries) - (first == 0)))
            entries = entries[first : last + 1]
        total = sum(e.value for e in entries)
        start, *_, end = route_towns(entries)
        prompt = options.wording(prompts.ROUTE, start=start, end=end)
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
                    working=running_sums([e.value for e in entries]),
                ),
            ),
        )
    a = entries[int(rng.integers(0, half))]
    b = entries[int(rng.integers(half, len(entries)))]
    pa, pb = scene.kind.phrase(a.label), scene.kind.phrase(b.label)
    if kind == "timetable":
        value, what = b.value - a.value, f"the travel time from {a.label} to {b.label}"
        prompt = options.wording(prompts.RIDE_SPLIT, a=a.label, b=b.label)
        golden = f"It departs {a.label} at {a.text} and {b.label} at {b.text}, so the ride takes {value:g} minutes."
    elif kind == "lab":
        value, what = a.value + b.value, ""
        prompt = options.wording(prompts.RESULTS_SPLIT, a=a.label, b=b.label)
        golden = f"The {a.label} result is {a.text} and the {b.label} result is {b.text}."
    elif scene.kind.summable:
        value, what = a.value + b.value, f"the total of {pa} and {pb}"
        prompt = options.wording(prompts.TOTAL_SPLIT, what=scene.kind.what, a=pa, b=pb)
        golden = f"{pa[0].upper() + pa[1:]} is {a.text} and {pb} is {b.text}; together that is {say(scene, value)}."
    else:
        value, what = abs(a.value - b.value), f"the difference between {pa} and {pb}"
        prompt = options.wording(prompts.DIFFERENCE_SPLIT, what=scene.kind.what, a=pa, b=pb)
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


# --- follow-up -------------------------------------------------------------------------------


def follow_up(rng: np.random.Generator, domain: str, difficulty: float, options: Options) -> Blueprint:
    kind = str(rng.choice(DOMAIN_KINDS[domain]))
    scene = make_scene(options.kind(kind), rng, n_entries(difficulty, rng))
    wordings, clarify, supply = prompts.VAGUE[kind]
    vague = options.wording(wordings)
    entries = scene.entries
    a, b = pick(rng, entries, 2)
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
        start, end = a.towns[0], b.towns[-1]
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


# --- progressive -----------------------------------------------------------------------------


def progressive(rng: np.random.Generator, domain: str, difficulty: float, options: Options) -> Blueprint:
    kind = str(rng.choice([k for k in DOMAIN_KINDS[domain] if k != "lab"] or ("lab",)))
    scene = make_scene(options.kind(kind), rng, n_entries(difficulty, rng))
    entries, labels = scene.entries, [e.label for e in scene.entries]
    top = max(entries, key=lambda e: e.value)
    a = next(e for e in pick(rng, entries, 2) if e is not top)
    phrase = scene.kind.phrase(a.label)
    tol = 0.006 if scene.kind.unit == "$" else 0.05
    if kind == "lab":
        _unit, low, high, _step = LAB_TESTS[a.label]
        verdict = "below" if a.value < low else "above" if a.value > high else "within"
        gap = round(low - a.value if verdict == "below" else a.value - high if verdict == "above" else 0.0, 1)
        second = Ask(
            options.wording(prompts.IN_RANGE),
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
                options.wording(
                    prompts.HIGHEST,
                    row=ROW_WORDS[kind][0],
                    highest=ROW_WORDS[kind][1].split(" ", 1)[1],
                    top=ROW_WORDS[kind][1],
                )
                if kind != "timetable"
                else options.wording(prompts.LATEST),
                f"{top.label} is {ROW_WORDS[kind][1]}, with {top.text}.",
                (label_rubric(ROW_WORDS[kind][1], top.label, labels), read_rubric(scene, top)),
                (),
                tuple((0, e.label) for e in entries),
                ("Compare all entries.", f"Name {top.label}."),
            ),
            Ask(
                options.wording(prompts.MORE_THAN_THAT, a=a.label)
                if kind != "timetable"
                else options.wording(prompts.MINUTES_AFTER, a=a.label),
                f"{top.text} versus {a.text}: a difference of {shown}.",
                (final_rubric("the difference", diff, shown, tol),),
                (),
                ((0, top.label), (0, a.label)),
                ("Subtract the two values.", "State the difference."),
                (calculator(f"{top.value:g} - {a.value:g}", "Compute the difference."),),
            ),
        ]
    first = Ask(
        options.wording(prompts.VALUE, phrase=phrase, what=scene.kind.what),
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


BUILDERS: dict[str, Callable[[np.random.Generator, str, float, Options], Blueprint]] = {
    "region_switch_qa": region_switch,
    "hybrid_tool_reasoning": hybrid,
    "follow_up_test": follow_up,
    "temporal_visual_reasoning": temporal,
    "progressive_visual_reasoning": progressive,
}
