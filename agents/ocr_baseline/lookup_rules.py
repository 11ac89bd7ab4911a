"""Rules for questions whose answer needs a lookup: the weather at a ticket's destination, a company's
dividend or founding year, the elevation of a ticket's two cities (generator v3 adds the last ones)."""

from __future__ import annotations

import json
import re

from vtb_agents.ocr_baseline.episode import EpisodeView
from vtb_agents.ocr_baseline.questions import Question
from vtb_agents.ocr_baseline.reading import group_lines
from vtb_agents.ocr_baseline.solving import Missing, Named, Outcome, on_named, titled_rows

# What the weather question asks for, by its words: (archive field, how the answer names it, unit)
_WEATHER_FIELDS = (
    (re.compile(r"minimum|lowest|how cold"), "temperature_min_c", "a minimum temperature", "°C"),
    (re.compile(r"precipitation|\brain"), "precipitation_mm", "precipitation", "mm"),  # not "train ticket"
    (re.compile(r""), "temperature_max_c", "a maximum temperature", "°C"),
)


def weather_field(low: str) -> tuple[str, str, str]:
    """The archive field a weather question asks for, how the answer names it, and its unit."""
    return next((f, w, u) for cue, f, w, u in _WEATHER_FIELDS if cue.search(low))


def weather_cue(low: str) -> bool:
    return "ticket" in low and bool(re.search(r"temperature|precipitation|how (?:cold|warm)", low))


def ticket_text(ep: EpisodeView) -> str:
    """Every line read on the images in view (a ticket's fields)."""
    names = ep.in_view()
    return "\n".join(
        " ".join(w.text for w in line) for n in names for words in ep.word_sets(n) for line in group_lines(words)
    )


def weather_rule(ep: EpisodeView, q: Question) -> Outcome:
    text = ticket_text(ep)
    city = re.search(r"\bTo:?\s+([A-Z][a-z]+)", text)
    date = re.search(r"\b(\d{4}-\d{2}-\d{2})\b", text)
    if not city or not date:
        return Missing("the destination and date", tuple(ep.in_view()))
    field, what, unit = weather_field(q.low)
    if "historical_weather" not in ep.offered:
        return f"The ticket is to {city.group(1)} on {date.group(1)}, but I have no weather archive to look up {what}."
    arguments = {"location": city.group(1), "date": date.group(1)}
    result = ep.lookup("historical_weather", arguments)
    if result is None:
        return ep.call("historical_weather", arguments)
    found = re.search(rf'"{field}":\s*(-?[\d.]+)', result)
    if not found:
        return f"The ticket is to {city.group(1)} on {date.group(1)}; the weather archive had no {what} for that day."
    return (
        f"The ticket is to {city.group(1)} on {date.group(1)}. The weather archive reports {what} of "
        f"{float(found.group(1)):.1f} {unit} there that day."
    )


def page_fact(ep: EpisodeView, query: str, title: str, pattern: str) -> str | Outcome:
    """``pattern``'s first group on the page whose search result title holds ``title`` (searching and
    opening it first); an Action while a call is still needed, "" when the fact is not found."""
    search = {"query": query, "num_results": 5}
    found = ep.lookup("web_search", search)
    if found is None:
        return ep.call("web_search", search)
    try:
        results = json.loads(found).get("results", [])
    except (ValueError, AttributeError):
        results = []
    url = next((r.get("url") for r in results if title in str(r.get("title", ""))), None)
    if url is None:
        return ""
    page = ep.lookup("browser_get_page_text", {"url": url}) if "browser_get_page_text" in ep.offered else ""
    if page is None:
        return ep.call("browser_get_page_text", {"url": url})
    fact = re.search(pattern, page + " " + json.dumps(results))  # a snippet may hold it when no page can be opened
    return fact.group(1) if fact else ""


def elevation_rule(ep: EpisodeView, q: Question) -> Outcome:
    """The destination's elevation minus the departure city's, from the two city guides."""
    text = ticket_text(ep)
    cities = [re.search(rf"\b{field}:?\s+([A-Z][a-z]+)", text) for field in ("From", "To")]
    if not all(cities):
        return Missing("the departure city and destination", tuple(ep.in_view()))
    origin, destination = (m.group(1) for m in cities if m)
    if "web_search" not in ep.offered:
        return f"The ticket runs from {origin} to {destination}, but I have no way to look up their elevations."
    heights = []
    for city in (origin, destination):
        fact = page_fact(ep, f"{city} travel guide elevation", f"{city} travel guide", r"elevation of (-?\d+) m")
        if not isinstance(fact, str):
            return fact
        if not fact:
            return f"The ticket runs from {origin} to {destination}, but I found no elevation for {city}."
        heights.append(int(fact))
    low, high = heights
    difference = high - low
    return (
        f"{origin} lies at {low} m and {destination} at {high} m above sea level, so the destination lies "
        f"{abs(difference)} m {'higher' if difference >= 0 else 'lower'}: a difference of {difference:+d} m."
    )


def founded_rule(ep: EpisodeView, q: Question) -> Outcome:
    """The statement's largest holding (every row read) and its company's founding year."""
    rows = titled_rows(ep, q)
    if isinstance(rows, Missing):
        return rows
    top = max(rows, key=lambda r: r.value)
    if "web_search" not in ep.offered:
        return f"The largest holding is {top.label} with {top.text} shares, but I cannot look up its founding year."
    fact = page_fact(ep, f"{top.label} company profile founded", f"({top.label})", r"founded in (\d{4})")
    if not isinstance(fact, str):
        return fact
    if not fact:
        return f"The largest holding is {top.label} with {top.text} shares; I found no founding year for it."
    return (
        f"The largest holding is {top.label} with {top.text} shares; its company profile says it was founded in {fact}."
    )


@on_named(1)
def dividend_rule(ep: EpisodeView, q: Question, named: Named) -> Outcome:
    (row,) = named.rows  # more than one named entry is an error the agent reports (see OcrBaselineAgent.act)
    ticker = row.label
    if "web_search" not in ep.offered:
        return f"The statement shows {row.text} shares of {ticker}, but I have no way to look up its dividend."
    fact = page_fact(
        ep, f"{ticker} annual dividend per share", f"({ticker})", r"annual dividend of \$([\d.]+) per share"
    )
    if not isinstance(fact, str):
        return fact
    if not fact:
        return f"The statement shows {row.text} shares of {ticker}, but I found no annual dividend figure."
    dividend = float(fact)
    income = row.value * dividend
    return (
        f"The statement shows {row.text} shares of {ticker}; "
        f"at ${dividend:.2f} a year per share that is ${income:,.2f} a year."
    )
