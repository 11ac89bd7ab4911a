"""Rules for computations over what was read (generator v3's Python tasks): compound growth of one
value, the median or sample standard deviation of every value in a document. The baseline computes
them itself; the route in miles is the route rule's."""

from __future__ import annotations

import re
import statistics

from vtb_agents.ocr_baseline.episode import EpisodeView
from vtb_agents.ocr_baseline.questions import Question
from vtb_agents.ocr_baseline.solving import Missing, Named, Outcome, fmt, on_named, titled_rows


@on_named(1)
def compound_rule(ep: EpisodeView, q: Question, named: Named) -> Outcome:
    (row,) = named.rows[:1]
    pct, years = re.search(r"(\d+(?:\.\d+)?)%", q.low), re.search(r"(\d+) years", q.low)
    if not pct or not years:
        return f"{row.label} is {row.text}, but the question gives no growth rate and period I can read."
    value = row.value * (1 + float(pct.group(1)) / 100) ** int(years.group(1))
    shown = f"${value:,.2f}" if row.text.startswith("$") else f"{value:.2f}"
    return f"{row.label} is {row.text}; after {years.group(1)} years at {pct.group(1)}% a year it is {shown}."


def _values(ep: EpisodeView, q: Question) -> list[float] | Missing:
    rows = titled_rows(ep, q)
    return rows if isinstance(rows, Missing) else [r.value for r in rows]


def median_rule(ep: EpisodeView, q: Question) -> Outcome:
    values = _values(ep, q)
    if isinstance(values, Missing):
        return values
    median = statistics.median(values)
    shown = f"${median:,.2f}" if "price" in q.low or "amount" in q.low else fmt(round(median, 2))
    return f"Across the {len(values)} entries read, the median is {shown}."


def stdev_rule(ep: EpisodeView, q: Question) -> Outcome:
    values = _values(ep, q)
    if isinstance(values, Missing):
        return values
    return f"Across the {len(values)} entries read, the sample standard deviation is {statistics.stdev(values):.2f}."
