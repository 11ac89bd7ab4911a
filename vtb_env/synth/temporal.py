"""The temporal category: one document seen two or three times as its values change; questions about
a value, its change since the first snapshot and (with three) which entry rose the most.
"""

from __future__ import annotations

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
    text,
)
from vtb_env.synth.scenes import make_scene

TEMPORAL_KINDS = {  # per domain: the kinds whose values change over time
    "Generalist": ("menu", "timetable"),
    "Finance": ("quotes", "portfolio"),
    "Sports": ("scoreboard", "league"),
    "Medical": ("lab",),
    "STEM": ("chart", "measurements"),
}
LATER = {  # how a prompt names the later snapshot
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


def temporal(rng: np.random.Generator, domain: str, difficulty: float, options: Options) -> Blueprint:
    """A document of ``domain`` in two or three snapshots, each value moved by its kind's rule (module doc)."""
    kind = str(rng.choice(TEMPORAL_KINDS[domain]))
    n_images = 3 if rng.random() < 0.5 else 2
    scene = make_scene(options.kind(kind), rng, 4 + int(round(difficulty)))
    states, tries = [scene], 0
    while len(states) < n_images:
        tries += 1
        # A value the kind's rule cannot move (a lab value of 0.3 stays 0.3 after rounding) would loop forever:
        # after 100 tries every value moves by distinct steps instead.
        nxt = states[-1].evolved(rng) if tries <= 100 else states[-1].stepped(tries - 100)
        growth = [n.value - f.value for n, f in zip(nxt.entries, scene.entries, strict=False)]
        # v3: the third snapshot's question asks which entry rose the most, so some entry must have risen
        rose = not options.answerable or len(states) < 2 or max(growth) > 0
        if (
            rose
            and len(set(growth)) == len(growth)
            and all(n.value != o.value for n, o in zip(nxt.entries, states[-1].entries, strict=False))
        ):
            states.append(nxt)
    a = scene.entries[int(rng.integers(0, len(scene.entries)))]
    phrase = scene.kind.phrase(a.label)
    a1 = states[1].entry(a.label)
    delta = a1.value - a.value
    tol = 0.006 if scene.kind.unit == "$" else 0.05
    asks = [
        Ask(
            options.wording(prompts.VALUE, phrase=phrase, what=scene.kind.what),
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
            options.wording(prompts.CHANGED_SINCE, later=LATER[kind], phrase=phrase),
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
            working=(delta,),
        ),
    ]
    if n_images == 3:
        last = states[2]
        growth = {e.label: last.entry(e.label).value - e.value for e in scene.entries}
        best = max(growth, key=growth.get)
        labels = [e.label for e in scene.entries]
        asks.append(
            Ask(
                options.wording(prompts.CHANGED_MOST, later=LATER[kind], row=ROW_WORDS[kind][0]),
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
                working=tuple(growth.values()),
            )
        )
    return Blueprint(
        scene.kind.domain, "temporal_visual_reasoning", f"{n_images}_snapshots", tuple(states), tuple(asks)
    )
