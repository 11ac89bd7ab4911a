"""The question rules: each kind of question the synthetic tasks ask, solved from what was read.

A rule is a cue on the question's words (which kind it is) and a solver. The solver returns an
``Outcome``: the answer text, the action that makes the tool call it still needs (a lookup), or
``Missing``: what it could not read yet and in which images (the agent then repairs those images
with the vision tool, or admits the failure). The first rule whose cue matches solves the
question; a single-value lookup is the default.

The cues are keyed to the wording of the synthetic tasks (``vtb_env.synth.templates``): this is a
solver for those tasks, not a general reader of questions.
"""

from __future__ import annotations

import difflib
import re
from typing import Mapping, Sequence

from vtb_agents.ocr_baseline import compute_rules, lookup_rules
from vtb_agents.ocr_baseline.episode import EpisodeView
from vtb_agents.ocr_baseline.questions import Question, named_rows
from vtb_agents.ocr_baseline.reading import Row, label_key, map_distances, parse_number
from vtb_agents.ocr_baseline.solving import (
    Missing,
    Named,
    Outcome,
    Rule,
    clarified_text,
    find_named,
    fmt,
    fmt_change,
    is_clock,
    is_money,
    on_named,
    read_table,
    say,
)

_ORDER = re.compile(r"(\d+) \w+ of (.+?) and (\d+) \w+ of (.+?) .*?(\d+(?:\.\d+)?)% (?:tip|sales tax|broker)")
_SPEED = re.compile(r"(\d+(?:\.\d+)?) km\b.*average speed")
_FROM_TO = re.compile(r"from ([a-z][a-z ]+?) to ([a-z][a-z ]+?)[?.,]")
_WHICH_TOP = re.compile(r"(?:^|[.,:] )which .*\b(highest|most|tallest|longest|latest|last)\b")
_THAT = re.compile(
    r"how much more is that than|does that exceed|between that and|how many minutes (?:after|later than) .+ is that"
    r"|how long after .+ is that"
)
_CHANGED_MOST = re.compile(r"changed the most|rose the most|largest increase")
_CHANGED_SINCE = re.compile(r"changed since|change in .+ compared with")
_LAB = re.compile(r"reference range|result normal|my .+ result")
KM_PER_MILE = 1.609344
NOISE = 0.3  # OCR confidence below which a row may be noise read as an entry
_BEHIND = re.compile(r"behind the (leader|top)")


def solve(ep: EpisodeView, q: Question) -> Outcome:
    """The outcome of the rule for the question's kind."""
    return rule_for(q).solve(ep, q)


# --- the rules ----------------------------------------------------------------------------------


@on_named(2)
def order_rule(ep: EpisodeView, q: Question, named: Named) -> Outcome:
    a, b = named.rows
    m = _ORDER.search(q.low)
    assert m is not None  # the cue matched
    qa, qb, pct = int(m.group(1)), int(m.group(3)), float(m.group(5))
    total = (qa * a.value + qb * b.value) * (1 + pct / 100)
    return (
        f"{a.label} costs {a.text} and {b.label} costs {b.text}; "
        f"({qa} x {a.text} + {qb} x {b.text}) plus {pct:g}% is ${total:,.2f}."
    )


@on_named(2)
def speed_rule(ep: EpisodeView, q: Question, named: Named) -> Outcome:
    a, b = named.rows
    minutes = abs(b.value - a.value)
    if not minutes:
        return named.table.missing("two different departure times")
    m = _SPEED.search(q.low)
    assert m is not None  # the cue matched
    speed = float(m.group(1)) / (minutes / 60)
    return (
        f"It leaves {a.label} at {a.text} and {b.label} at {b.text}: "
        f"{fmt(minutes)} minutes, an average speed of {speed:.1f} km/h."
    )


@on_named(2)
def share_rule(ep: EpisodeView, q: Question, named: Named) -> Outcome:
    a, b = named.rows
    share = 100 * a.value / (a.value + b.value)
    return f"{a.label} has {a.text} and {b.label} has {b.text}, so {a.label}'s share is {share:.1f}%."


@on_named(1)
def limit_rule(ep: EpisodeView, q: Question, named: Named) -> Outcome:
    (a,) = named.rows
    if len(a.extra) < 2:
        return named.table.missing("the reference range")
    high = a.extra[-1]
    return (
        f"The {a.label} result is {a.text} and the upper limit is {fmt(high)}, "
        f"so it is {100 * a.value / high:.1f}% of the limit."
    )


def route_rule(ep: EpisodeView, q: Question) -> Outcome:
    m = _FROM_TO.search(q.low)
    assert m is not None  # the cue matched
    names = tuple(ep.in_view())
    readings = [map_distances(words) for n in names for words in ep.word_sets(n)]
    towns, distances = max(readings, key=lambda r: (len(r[1]) > 0) * (len(r[0]) + len(r[1])), default=([], []))
    if not distances:
        return Missing("the distances on the map", names)
    xs = {t.lower(): x for t, x in towns}
    start, end = _close(m.group(1), xs), _close(m.group(2), xs)
    if start is None or end is None:
        return Missing("the towns on the map", names)
    lo, hi = sorted((xs[start], xs[end]))
    chosen = sorted({(x, d) for x, d in distances if lo <= x <= hi})
    if not chosen:
        return Missing("the segments of the route", names)
    total = sum(d for _x, d in chosen)
    speed = re.search(r"(\d+(?:\.\d+)?) km/h", q.low)
    parts = " + ".join(f"{fmt(d)} km" for _x, d in chosen)
    if "mile" in q.low:
        return f"The route is {parts} = {fmt(total)} km, which is {total / KM_PER_MILE:.2f} miles."
    if speed:
        return (
            f"The route is {parts} = {fmt(total)} km; "
            f"at {speed.group(1)} km/h that takes {total / float(speed.group(1)) * 60:.1f} minutes."
        )
    return f"Adding the segments along the route ({parts}) gives {fmt(total)} km."


def _close(name: str, known: Mapping[str, float]) -> str | None:
    hit = difflib.get_close_matches(name.strip(), list(known), n=1, cutoff=0.75)
    return hit[0] if hit else None


def change_most_rule(ep: EpisodeView, q: Question) -> Outcome:
    first = read_table(ep, ep.image_for_turn(len([n for n in ep.turn_originals if n]) - 1))
    last = read_table(ep, ep.current())
    # The document the dialogue has been about, not a look-alike decoy that stays the same in every picture.
    before = document_rows(ep, first.images, ep.dialogue) or first.rows
    after = document_rows(ep, last.images, ep.dialogue) or last.rows
    pairs = [(a.value - b.value, a, b) for a in after for b in before if label_key(a.label) == label_key(b.label)]
    if len(pairs) < min(len(before), len(after)) or len(pairs) < 2:
        return Missing("every entry in both images", first.images + last.images)
    growth, a, b = max(pairs, key=lambda p: p[0])
    return f"{a.label} rose the most: from {b.text} to {a.text}, {growth:+.2f}."


@on_named(1)
def changed_since_rule(ep: EpisodeView, q: Question, named: Named) -> Outcome:
    (now,) = named.rows
    earlier = read_table(ep, ep.image_for_turn(1))
    before = next((r for r in named_rows(q.text, earlier.rows)), None)
    if before is None:  # memory: the value the agent stated last turn
        said = re.findall(r"\d{1,2}:\d{2}|[-−]?\d[\d,]*(?:\.\d+)?", q.previous_answer)
        value = parse_number(said[-1].replace(",", "")) if said else None
        if value is None:
            return Missing("the earlier value", earlier.images + tuple(ep.current()))
        before = Row(now.label, said[-1], value)
    delta = now.value - before.value
    direction = "an increase" if delta > 0 else "a decrease" if delta < 0 else "no change"
    return f"It went from {before.text} to {now.text}, {direction} of {fmt_change(delta)}."


def highest_rule(ep: EpisodeView, q: Question) -> Outcome:
    table = read_table(ep, ep.in_view())
    rows = document_rows(ep, ep.in_view(), q.previous_answer) or table.rows
    if len(rows) < 3:
        return table.missing("the entries to compare")
    top = max(plausible(rows), key=lambda r: r.value)
    return f"{top.label} is the highest, with {top.text}."


def plausible(rows: Sequence[Row]) -> list[Row]:
    """Rows fit to be a top entry: not OCR noise read as a row ("fergie: 92"), unless that is all there is.
    A row two readings agree on is no noise, however low Tesseract's confidence in small print."""
    kept = [r for r in rows if r.confidence >= NOISE or r.votes >= 2]
    return kept or list(rows)


def document_rows(ep: EpisodeView, names: Sequence[str], context: str) -> list[Row]:
    """The rows of the one document the dialogue is about: of the readings (the original image, each
    repaired region) that hold an entry named in ``context``, the one with the most rows; [] when none does.
    A photo can show other documents of the same kind (a second menu, an older chart)."""
    holding = [r for n in names for r in ep.region_readings(n) if context and named_rows(context, r.rows)]
    return max(holding, key=lambda r: len(r.rows)).rows if holding else []


def that_rule(ep: EpisodeView, q: Question) -> Outcome:
    table = read_table(ep, ep.in_view())
    other = named_rows(q.text, table.rows)
    that = [r for r in named_rows(q.previous_answer, table.rows) if r not in other]
    if not other or not that:
        return table.missing("the entries being compared")
    a, b = that[0], other[0]
    diff = a.value - b.value
    unit = " minutes" if is_clock([a, b]) else ""
    return f"{a.text} versus {b.text}: a difference of {fmt(round(diff, 2))}{unit}."


def lab_range_rule(ep: EpisodeView, q: Question) -> Outcome:
    table = read_table(ep, ep.in_view())
    found = (
        named_rows(q.prompt, table.rows) or named_rows(q.previous_answer, table.rows) or named_rows(q.text, table.rows)
    )
    if not found:
        return table.missing("the test result")
    row = found[0]
    if len(row.extra) < 2:
        return table.missing("the reference range")
    low, high = row.extra[0], row.extra[-1]
    verdict = "below" if row.value < low else "above" if row.value > high else "within"
    gap = low - row.value if verdict == "below" else row.value - high if verdict == "above" else 0.0
    tail = f" by {fmt(round(gap, 1))}" if gap else ""
    return (
        f"The {row.label} result is {row.text}; "
        f"the reference range is {fmt(low)}-{fmt(high)}, so it is {verdict} the range{tail}."
    )


@on_named(1, in_reply=True)
def behind_rule(ep: EpisodeView, q: Question, named: Named) -> Outcome:
    a = named.rows[0]
    rows = document_rows(ep, ep.in_view(), clarified_text(q) or q.text) or named.table.rows  # not a decoy's
    leader = max(plausible(rows), key=lambda r: r.value)
    return (
        f"The {a.label} have {a.text}; the leader, {leader.label}, has {leader.text}, "
        f"so they are {fmt(leader.value - a.value)} points behind."
    )


def _two_values_kind(low: str) -> str | None:
    if re.search(r"mean of|average of|their mean", low):
        return "mean"
    if re.search(r"\bride\b|get on at", low):
        return "ride"
    if re.search(r"difference|differ\b", low):
        return "diff"
    if re.search(r"total|cost|returned|combined|add up", low):
        return "sum"
    return "both" if re.search(r"what are the .+ and .+|the .+ and .+ results", low) else None


def two_values_rule(ep: EpisodeView, q: Question) -> Outcome:
    """Totals, differences, rides, means and "what are A and B"."""
    kind = _two_values_kind(q.low)
    named = find_named(ep, q, 3 if kind == "mean" else 2, text=clarified_text(q))
    if isinstance(named, Missing):
        return named
    found = named.rows
    if kind == "mean":
        a, b, c = found[:3]
        mean = (a.value + b.value + c.value) / 3
        return f"The three values are {a.text}, {b.text} and {c.text}; their mean is {mean:.2f}."
    a, b = found[:2]
    if kind == "both":
        return f"The {a.label} result is {a.text} and the {b.label} result is {b.text}."
    if kind == "ride":
        return (
            f"It departs {a.label} at {a.text} and {b.label} at {b.text}, "
            f"so the ride takes {fmt(abs(b.value - a.value))} minutes."
        )
    if kind == "diff":
        return f"{say(a)} and {say(b)}; the difference is {abs(a.value - b.value):.2f}."
    return f"{say(a)} and {say(b)}; together that is {fmt(a.value + b.value, is_money(found))}."


@on_named(1, in_reply=True)
def lookup_rule(ep: EpisodeView, q: Question, named: Named) -> Outcome:
    """A single entry's value (the default question)."""
    row = named.rows[0]
    return f"{row.label} is {row.text}."


LOOKUP = Rule("lookup", lambda low: True, lookup_rule)
RULES: tuple[Rule, ...] = (  # in order: the first whose cue matches the question solves it
    Rule("weather", lookup_rules.weather_cue, lookup_rules.weather_rule),
    Rule(
        "elevation",
        lambda low: "ticket" in low and bool(re.search(r"elevation|sea level", low)),
        lookup_rules.elevation_rule,
    ),
    Rule("dividend", lambda low: "dividend" in low, lookup_rules.dividend_rule),
    Rule("founded", lambda low: "founded" in low or "founding year" in low, lookup_rules.founded_rule),
    Rule("compound", lambda low: "compounded" in low, compute_rules.compound_rule),
    Rule("median", lambda low: "median" in low, compute_rules.median_rule),
    Rule("stdev", lambda low: "standard deviation" in low, compute_rules.stdev_rule),
    Rule("order", lambda low: bool(_ORDER.search(low)), order_rule),
    Rule("speed", lambda low: bool(_SPEED.search(low)), speed_rule),
    Rule("share", lambda low: "of the combined total" in low, share_rule),
    Rule("limit", lambda low: "upper limit" in low, limit_rule),
    Rule(
        "route",
        lambda low: bool(("route" in low or "how far" in low) and _FROM_TO.search(low)) and "ride" not in low,
        route_rule,
    ),
    Rule("change_most", lambda low: bool(_CHANGED_MOST.search(low)), change_most_rule),
    Rule("changed_since", lambda low: bool(_CHANGED_SINCE.search(low)), changed_since_rule),
    Rule("highest", lambda low: bool(_WHICH_TOP.search(low)) and "changed" not in low, highest_rule),
    Rule("that", lambda low: bool(_THAT.search(low)), that_rule),
    Rule("lab_range", lambda low: bool(_LAB.search(low)) and "upper limit" not in low, lab_range_rule),
    Rule("behind", lambda low: bool(_BEHIND.search(low)), behind_rule),
    Rule("two_values", lambda low: _two_values_kind(low) is not None, two_values_rule),
)


def rule_for(q: Question) -> Rule:
    """The rule that answers ``q``: the first whose cue matches, else the single-value lookup."""
    return next((rule for rule in RULES if rule.cue(q.low)), LOOKUP)
