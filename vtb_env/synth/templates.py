"""The wording of every question the synthetic tasks ask, as ``str.format`` templates.

One home for the prompts: ``categories`` fills them in, and the OCR baseline
(``vtb_agents.ocr_baseline``, a solver for exactly these tasks) is tested against every template
here, so a change of wording that its rules no longer understand fails a test instead of
silently lowering its scores.
"""

from __future__ import annotations

import numpy as np


class Wording:
    """Picks the wording of each question: always the first (generators v1 and v2) or one drawn from
    the pair's own generator (v3). A blueprint is built once per pair, so both twins get the same prompt
    and the wording carries no label."""

    def __init__(self, rng: np.random.Generator | None = None) -> None:
        self.rng = rng

    def __call__(self, wordings: tuple[str, ...], **fields: object) -> str:
        index = 0 if self.rng is None else int(self.rng.integers(len(wordings)))
        return wordings[index].format(**fields)


# Every question type has several wordings (a tuple; the first is v1's and v2's). Each keeps every fact
# the question needs; none is first person unless it names its subject (a ticket, a holding, an order).

# --- region switch: the entries are spread over two regions of one image ----------------------
ROUTE = (
    "Following the marked route on this map, how far is it from {start} to {end}?",
    "Along the route marked on this map, what is the distance from {start} to {end}?",
    "How long is the marked route on this map from {start} to {end}?",
)
RIDE_SPLIT = (
    "The departures are split over two boards in this photo. How many minutes does the ride from {a} to {b} take?",
    "This photo shows the departures on two boards. How long does the ride from {a} to {b} take, in minutes?",
    "Two boards in this photo share the departures. How many minutes is the ride between {a} and {b}?",
)
RESULTS_SPLIT = (
    "The report is split over two pages in this photo. What are the {a} and {b} results?",
    "This report runs over two pages in the photo. Give the {a} and {b} results.",
    "The lab report in this photo is split across two pages. What values do the {a} and {b} results show?",
)
TOTAL_SPLIT = (
    "The {what} is split into two parts in this photo. What is the total of {a} and {b}?",
    "This {what} appears in two parts in the photo. What do {a} and {b} add up to?",
    "The {what} in this photo is split in two. What is the combined value of {a} and {b}?",
)
DIFFERENCE_SPLIT = (
    "The {what} is split into two parts in this photo. What is the difference between {a} and {b}?",
    "This {what} appears in two parts in the photo. How big is the difference between {a} and {b}?",
    "The {what} in this photo is split in two. By how much do {a} and {b} differ?",
)

# --- hybrid: reading plus a lookup or a calculation -------------------------------------------
WEATHER = (
    "I travelled with this train ticket. What was the maximum temperature at my destination on the day of travel?",
    "This is my train ticket. What maximum temperature did the weather archive record at my destination on the "
    "travel date?",
    "Using this train ticket, find the highest temperature reached at its destination on the date of travel.",
)
DIVIDEND = (
    "Using the company's published annual dividend per share, how much dividend income will my {ticker} "
    "holding in this statement pay over a year?",
    "At the company's published annual dividend per share, how much will the {ticker} holding in this statement "
    "earn in dividends in a year?",
    "This statement lists a {ticker} holding. At the published annual dividend per share, what is the yearly "
    "dividend income from it?",
)
ORDER = (
    "I want {qa} {unit} of {a} and {qb} {unit} of {b} at the prices shown, plus a {pct}% {extra}. What is the total?",
    "What is the total for {qa} {unit} of {a} and {qb} {unit} of {b} at the prices shown, with a {pct}% {extra} added?",
    "At the prices shown, how much do {qa} {unit} of {a} and {qb} {unit} of {b} come to once a {pct}% {extra} "
    "is added?",
)
SPEED = (
    "The track from {a} to {b} is {km} km long. What is the train's average speed between them, in km/h?",
    "Between {a} and {b} the track is {km} km long. At what average speed in km/h does the train cover it?",
    "The line from {a} to {b} measures {km} km. What average speed (km/h) does the train make between them?",
)
SHARE = (
    "What share of the combined total of {a} and {b} belongs to {a}, in percent (one decimal)?",
    "Of the combined total of {a} and {b}, what percentage is {a}'s (one decimal)?",
    "What percentage of the combined total of {a} and {b} does {a} account for, to one decimal?",
)
LIMIT = (
    "Express the {test} result as a percentage of the upper limit of its reference range (one decimal).",
    "What percentage of the upper limit of its reference range is the {test} result (one decimal)?",
    "How large is the {test} result relative to the upper limit of its reference range, in percent to one decimal?",
)
CYCLING = (
    "Cycling at {speed} km/h along the marked route, how many minutes does it take from {start} to {end}?",
    "Riding a bike at {speed} km/h along the marked route, how many minutes is it from {start} to {end}?",
    "At a cycling speed of {speed} km/h, how many minutes does the marked route take from {start} to {end}?",
)
MEAN = (
    "What is the mean of {a}, {b} and {c}?",
    "What is the average of {a}, {b} and {c}?",
    "Taking {a}, {b} and {c} together, what is their mean value?",
)

# --- hybrid, generator v3: more lookups (no twin: the prompt shows that a lookup is needed) --------
WEATHER_LOW = (
    "I travelled with this train ticket. What was the minimum temperature at my destination on the day of travel?",
    "This is my train ticket. How cold did it get at my destination on the travel date (the day's minimum "
    "temperature)?",
    "Using this train ticket, find the lowest temperature recorded at its destination on the date of travel.",
)
RAIN = (
    "I travelled with this train ticket. How much precipitation fell at my destination on the day of travel, in mm?",
    "This is my train ticket. How many millimetres of precipitation did my destination get on the travel date?",
    "Using this train ticket, find the precipitation (mm) recorded at its destination on the date of travel.",
)
ELEVATION = (
    "Using the city guides, how many metres higher above sea level is the destination of this train ticket than "
    "its departure city (negative if it lies lower)?",
    "This train ticket runs between two cities. By how many metres does the destination's elevation exceed the "
    "departure city's, according to the city guides (negative if lower)?",
    "According to the city guides, what is the destination's elevation minus the departure city's elevation for "
    "this train ticket, in metres?",
)
FOUNDED = (
    'Which company is behind the largest holding in "{title}", and in which year was it founded?',
    'Find the holding with the most shares in "{title}": which company is it, and when was it founded?',
    'In "{title}", which company has the largest holding by shares, and what is its founding year?',
)

# --- hybrid, generator v3: computations naturally done in code (python_interpreter) ------------------
# A question about every entry names its document by its printed title: the photo also shows a
# look-alike decoy document of the same kind (generator v3), and "this statement" would not say which.
COMPOUND = (
    "If {phrase} rises by {pct}% a year, compounded, what will it be in {years} years?",
    "At {pct}% growth a year, compounded, what will {phrase} be after {years} years?",
    "What will {phrase} be in {years} years if it grows by {pct}% a year, compounded?",
)
MEDIAN = (
    'What is the median of all the {values} in "{title}"?',
    'Across every entry of "{title}", what is the median of the {values}?',
    'Taking all the {values} listed in "{title}", what is their median?',
)
STDEV = (
    'What is the sample standard deviation of all the {values} in "{title}", to two decimals?',
    'Across every entry of "{title}", what is the sample standard deviation of the {values} (two decimals)?',
    'To two decimals, how large is the sample standard deviation of the {values} in "{title}"?',
)
MILES = (
    "How long is the marked route on this map in miles (1 mile = 1.609344 km), to two decimals, from {start} to {end}?",
    "Converting with 1 mile = 1.609344 km, how many miles (two decimals) is the marked route from {start} to {end}?",
    "In miles (1 mile = 1.609344 km, two decimals), what is the length of the marked route from {start} to {end}?",
)

# --- multi-turn: a value first, then questions that build on it ---------------------------------
VALUE = (
    "What is {phrase} in this {what}?",
    "In this {what}, what is {phrase}?",
    "Please read {phrase} from this {what}.",
)
CHANGED_SINCE = (
    "Here is {later}. By how much has {phrase} changed since the previous image?",
    "Here is {later}. How much has {phrase} changed since the previous image?",
    "This is {later}. What is the change in {phrase} compared with the previous image?",
)
CHANGED_MOST = (
    "And here is one more, {later}. Which {row} changed the most upwards from the first image to this one, "
    "and by how much?",
    "One more image: {later}. Which {row} rose the most between the first image and this one, and by how much?",
    "Here is a third image, {later}. Compared with the first image, which {row} had the largest increase, "
    "and how large was it?",
)
IN_RANGE = (
    "Is that within the reference range? If not, how far outside it is it?",
    "Does that fall inside the reference range? If not, by how much does it miss it?",
    "Compared with its reference range, is that value normal? If it is outside, how far outside?",
)
HIGHEST = (  # {highest}: "club with the most points" (v1's wording), {top}: "the club with the most points"
    "Which {row} is {highest}?",
    "Looking at every entry, which one is {top}?",
    "Which entry is {top}?",
)
LATEST = (
    "Which stop has the latest departure, and when is it?",
    "Which stop has the last departure of the line, and at what time?",
    "Looking at every stop, which one has the latest departure, and when?",
)
MORE_THAN_THAT = (
    "How much more is that than the {a}?",
    "By how much does that exceed the {a}?",
    "What is the difference between that and the {a}?",
)
MINUTES_AFTER = (
    "How many minutes after {a} is that?",
    "How many minutes later than {a} is that?",
    "How long after the departure at {a} is that, in minutes?",
)

# --- follow-up: an underspecified question, the clarifying question it deserves, the user's reply ---
VAGUE = {  # scene kind: (wordings of the underspecified question, clarifying question, supplied fact)
    "menu": (
        (
            "What will my dinner cost from this menu?",
            "How much will my dinner cost on this menu?",
            "What does my dinner cost at these menu prices?",
        ),
        "Which dishes are you ordering?",
        "I'm having the {a} and the {b}.",
    ),
    "receipt": (
        (
            "How much did I pay for the two items I returned?",
            "What did the two items I returned cost me on this receipt?",
            "How much money do I get back for the two items I returned?",
        ),
        "Which two items did you return?",
        "The {a} and the {b}.",
    ),
    "quotes": (
        (
            "What was the last price of the stock I own?",
            "At what price did the stock I own last trade?",
            "What is the latest quoted price of my stock?",
        ),
        "Which ticker do you own?",
        "I own {a}.",
    ),
    "portfolio": (
        (
            "How many shares of my favourite company do I hold?",
            "How many shares do I own in my favourite company?",
            "How many of my favourite company's shares are in my account?",
        ),
        "Which company do you mean?",
        "I mean {a}.",
    ),
    "timetable": (
        (
            "How long is my ride on this line?",
            "How many minutes does my ride on this line take?",
            "How long will my trip on this line take?",
        ),
        "At which stops do you get on and off?",
        "I get on at {a} and off at {b}.",
    ),
    "scoreboard": (
        (
            "How far behind the leader is my team?",
            "How many points behind the leader is my team?",
            "What is my team's deficit behind the leader?",
        ),
        "Which team is yours?",
        "My team is the {a}.",
    ),
    "league": (
        (
            "How many points behind the top club is my club?",
            "How far behind the top club is my club?",
            "By how many points does my club trail behind the top club?",
        ),
        "Which club do you support?",
        "I support {a}.",
    ),
    "lab": (
        ("Is my result normal?", "Is my result within the normal range?", "Is my lab result okay?"),
        "Which test result do you mean?",
        "I mean my {a} result.",
    ),
    "chart": (
        (
            "What value did our condition get?",
            "What did our condition score on this chart?",
            "How high did our condition come out on this chart?",
        ),
        "Which bar is your condition?",
        "Ours is {a}.",
    ),
    "measurements": (
        (
            "What is the reading for my specimen?",
            "What did my specimen read?",
            "What reading did my specimen give?",
        ),
        "Which specimen is yours?",
        "Mine is {a}.",
    ),
    "map": (
        (
            "How far is it to where I'm going?",
            "How far is it on this map to where I'm going?",
            "How far do I have to go to get where I'm going?",
        ),
        "Where are you starting from and where are you going?",
        "From {a} to {b}.",
    ),
}

# The missing detail a clarifying question must ask for (any one phrase), by scene kind: the exact
# check of a follow-up's first turn requires one. None occurs in the vague question, and a generic
# "which one do you mean?" names none of them.
CLARIFY_DETAIL = {
    "menu": ("dish", "dishes", "ordering", "order", "ordered", "having"),
    "receipt": ("which two", "which items", "what items", "which products", "which ones did you return"),
    "quotes": ("ticker", "which stock", "what stock", "which company", "which share", "symbol"),
    "portfolio": ("which company", "what company", "which stock", "what stock", "ticker", "which holding"),
    "timetable": ("stop", "stops", "station", "stations", "get on", "get off", "board", "boarding"),
    "scoreboard": ("which team", "what team", "your team", "which side", "team is yours"),
    "league": ("which club", "what club", "your club", "which team", "what team", "support"),
    "lab": ("which test", "what test", "which result", "what result", "which value", "which measurement"),
    "chart": ("which bar", "what bar", "which condition", "what condition", "your condition", "which group"),
    "measurements": ("which specimen", "what specimen", "your specimen", "which sample", "specimen is yours"),
    "map": ("starting", "start", "from where", "where from", "origin", "leaving from", "setting off"),
}
