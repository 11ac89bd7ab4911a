"""Page-only policies: they see every page a turn shows and never read the question (issue 31, rule 6).

    .venv/bin/python scripts/bench_page_only.py --seeds 501,502,503,504,505,506,507,508 --pairs 240

Each policy answers from the documents the generator drew (their rows' labels and printed values, no
picture rendered, no OCR: a perfect reader), and the real exact checks grade it against each turn's
world, with the rubrics the generator writes (``bind_giveaways``). Per policy: the mean rubric score
(Met weight over total weight, per task) and the tasks passed (every critical rubric Met).

Two families, and what docs/rewards.md says of each:

- **transcriptions** (every row of a page or of all pages, with names or values alone, as a table, a list or
  in parentheses; every row's change; the sum of every row): rule 6 and the claim model hold them to 0 by
  construction (working commits to nothing; a statement of every row states rivals);
- **guesses** (one row; the largest row; every row one sentence each, which commits to the first; a table
  and the first row as the answer; the first row's change; the largest rise; a lab test's first row against
  its range; one guess per page kind): right when the guessed row or question is the asked one, at the
  chance the question distribution gives.
"""

from __future__ import annotations

import argparse
from typing import Callable

from vtb_env.synth.scenes import Entry, Scene
from vtb_env.synth.stream import build_blueprint
from vtb_env.synth.world import bind_giveaways, turn_worlds
from vtb_rewards.checks import run_check

Policy = Callable[[list[Scene]], str]  # the pages shown so far -> the answer


def _named(rows) -> str:
    return " ".join(f"{e.label} {e.text}" for e in rows)


def _sort_key(scene: Scene) -> Callable[[Entry], float]:
    if scene.kind.name == "timetable":
        return lambda e: int(e.text.split(":")[0]) * 60 + int(e.text.split(":")[1])
    return lambda e: e.value


def _largest(scene: Scene) -> Entry:
    return scene.entries[0] if scene.kind.name == "ticket" else max(scene.entries, key=_sort_key(scene))


def _changes(before: Scene, after: Scene) -> list[tuple[Entry, Entry, float]]:
    earlier = {e.label: e for e in before.entries}
    if before.kind.name in ("ticket", "timetable"):
        return []
    pairs = [(earlier[e.label], e) for e in after.entries if e.label in earlier]
    return [(a, b, round(b.value - a.value, 4)) for a, b in pairs]


def _say_change(change: tuple[Entry, Entry, float]) -> str:
    a, b, delta = change
    return f"{b.label} {'increased' if delta > 0 else 'decreased'} from {a.text} to {b.text}, by {abs(delta):g}."


def _largest_change(pages: list[Scene], since_first: bool = False) -> str:
    if len(pages) < 2:
        return _named([_largest(pages[-1])])
    changes = _changes(pages[0] if since_first else pages[-2], pages[-1])
    return _say_change(max(changes, key=lambda c: c[2])) if changes else ""


def _first_change(pages: list[Scene]) -> str:
    if len(pages) < 2:
        return _named(pages[-1].entries[:1])
    changes = _changes(pages[-2], pages[-1])
    return _say_change(changes[0]) if changes else ""


def _lab_first_verdict(pages: list[Scene]) -> str:
    row = pages[-1].entries[0]
    if "(" not in row.extra:
        return _named([row])
    low, high = (float(x) for x in row.extra.split("(")[1].rstrip(")").split("-"))
    verdict = "within" if low <= row.value <= high else ("below" if row.value < low else "above")
    return f"{row.label} {row.text} is {verdict} the range {row.extra}."


def _by_page(pages: list[Scene]) -> str:
    """One guess per page kind, the question never read: a ticket's destination and date, the largest rise on
    a new snapshot, the sum of a map, else the largest row."""
    page = pages[-1]
    if page.fields:
        return f"{page.fields['To']} on {page.fields['Date']}"
    if len(pages) >= 2:
        return _largest_change(pages, since_first=True)
    if page.kind.style == "map":
        return " + ".join(e.text for e in page.entries) + f" = {sum(e.value for e in page.entries):g}"
    return _named([_largest(page)])


TRANSCRIPTIONS: dict[str, Policy] = {
    "every page, named": lambda pages: " ".join(_named(p.entries) for p in pages),
    "every page, values": lambda pages: " ".join(e.text for p in pages for e in p.entries),
    "the last page, 'label: value' lines": lambda pages: "\n".join(f"{e.label}: {e.text}" for e in pages[-1].entries),
    "every row's change": lambda pages: (
        " ".join(_say_change(c) for c in _changes(pages[-2], pages[-1]))
        if len(pages) >= 2
        else _named(pages[-1].entries)
    ),
    "every page as a markdown table": lambda pages: "\n".join(
        f"| {e.label} | {e.text} |" for p in pages for e in p.entries
    ),
    "every row as a bullet": lambda pages: "\n".join(f"- {e.label}: {e.text}" for p in pages for e in p.entries),
    "every row in parentheses": lambda pages: ", ".join(f"{e.label} ({e.text})" for p in pages for e in p.entries),
    "the sum of every row": lambda pages: (
        " + ".join(e.text for e in pages[-1].entries) + f" = {sum(e.value for e in pages[-1].entries):g}"
    ),
}
GUESSES: dict[str, Policy] = {
    "the first row": lambda pages: _named(pages[-1].entries[:1]),
    "the second row": lambda pages: _named(pages[-1].entries[1:2]),
    "the largest row": lambda pages: _named([_largest(pages[-1])]),
    "one sentence per row (the first row first)": lambda pages: " ".join(
        f"{e.label} is {e.text}." for e in pages[-1].entries
    ),
    "a table, then the first row as the answer": lambda pages: (
        "\n".join(f"| {e.label} | {e.text} |" for e in pages[-1].entries)
        + f"\n\nAnswer: {_named(pages[-1].entries[:1])}"
    ),
    "the first row's change": _first_change,
    "the largest rise since the first page": lambda pages: _largest_change(pages, since_first=True),
    "a lab's first row against its range": _lab_first_verdict,
    "one guess per page kind": _by_page,
}


def play(policies: dict[str, Policy], seeds: list[int], pairs: int) -> dict[str, tuple[float, int, int]]:
    """``{policy: (mean rubric score, tasks passed, tasks)}`` over the v3 pairs ``seeds`` x ``pairs``."""
    totals = {name: [0.0, 0, 0] for name in policies}
    for seed in seeds:
        for index in range(pairs):
            blueprint = build_blueprint(seed, index, generator="v3")
            worlds = turn_worlds(blueprint)
            checks = bind_giveaways(blueprint, worlds)
            for name, policy in policies.items():
                pages: list[Scene] = []
                met = weight = 0.0
                passed = True
                for ask, world, turn_checks in zip(blueprint.asks, worlds, checks, strict=True):
                    pages += [blueprint.states[state] for state in ask.new_states]
                    answer = policy(pages)
                    for rubric, check in zip(ask.rubrics, turn_checks, strict=True):
                        ok = run_check(check, answer, world)
                        met, weight = met + rubric.weight * ok, weight + rubric.weight
                        passed = passed and (ok or not rubric.critical)
                row = totals[name]
                row[0], row[1], row[2] = row[0] + met / weight, row[1] + passed, row[2] + 1
    return {name: (score / n, passes, n) for name, (score, passes, n) in totals.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="501,502,503,504,505,506,507,508")
    parser.add_argument("--pairs", type=int, default=240)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    print("| family | page-only policy | rubric score | tasks passed |\n|---|---|---:|---:|")
    for family, policies in (("transcription", TRANSCRIPTIONS), ("guess", GUESSES)):
        for name, (score, passes, n) in play(policies, seeds, args.pairs).items():
            print(f"| {family} | {name} | {score:.3f} | {passes} of {n} |")


if __name__ == "__main__":
    main()
