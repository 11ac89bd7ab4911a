"""The wording of every question the synthetic tasks ask, as ``str.format`` templates.

One home for the prompts: ``categories`` fills them in, and the OCR baseline
(``vtb_agents.ocr_baseline``, a solver for exactly these tasks) is tested against every template
here, so a change of wording that its rules no longer understand fails a test instead of
silently lowering its scores.
"""

from __future__ import annotations

# --- region switch: the entries are spread over two regions of one image ----------------------
ROUTE = "Following the marked route on this map, how far is it from {start} to {end}?"
RIDE_SPLIT = (
    "The departures are split over two boards in this photo. How many minutes does the ride from {a} to {b} take?"
)
RESULTS_SPLIT = "The report is split over two pages in this photo. What are the {a} and {b} results?"
TOTAL_SPLIT = "The {what} is split into two parts in this photo. What is the total of {a} and {b}?"
DIFFERENCE_SPLIT = "The {what} is split into two parts in this photo. What is the difference between {a} and {b}?"

# --- hybrid: reading plus a lookup or a calculation -------------------------------------------
WEATHER = "I travelled with this train ticket. What was the maximum temperature at my destination on the day of travel?"
DIVIDEND = (
    "Using the company's published annual dividend per share, how much dividend income will my {ticker} "
    "holding in this statement pay over a year?"
)
ORDER = (
    "I want {qa} {unit} of {a} and {qb} {unit} of {b} at the prices shown, plus a {pct}% {extra}. What is the total?"
)
SPEED = "The track from {a} to {b} is {km} km long. What is the train's average speed between them, in km/h?"
SHARE = "What share of the combined total of {a} and {b} belongs to {a}, in percent (one decimal)?"
LIMIT = "Express the {test} result as a percentage of the upper limit of its reference range (one decimal)."
CYCLING = "Cycling at {speed} km/h along the marked route, how many minutes does it take from {start} to {end}?"
MEAN = "What is the mean of {a}, {b} and {c}?"

# --- multi-turn: a value first, then questions that build on it ---------------------------------
VALUE = "What is {phrase} in this {what}?"
CHANGED_SINCE = "Here is {later}. By how much has {phrase} changed since the previous image?"
CHANGED_MOST = (
    "And here is one more, {later}. Which {row} changed the most upwards from the first image to this one, "
    "and by how much?"
)
IN_RANGE = "Is that within the reference range? If not, how far outside it is it?"
HIGHEST = "Which {row} is {highest}?"
LATEST = "Which stop has the latest departure, and when is it?"
MORE_THAN_THAT = "How much more is that than the {a}?"
MINUTES_AFTER = "How many minutes after {a} is that?"

# --- follow-up: an underspecified question, the clarifying question it deserves, the user's reply ---
VAGUE = {  # scene kind: (underspecified question, clarifying question, supplied fact)
    "menu": (
        "What will my dinner cost from this menu?",
        "Which dishes are you ordering?",
        "I'm having the {a} and the {b}.",
    ),
    "receipt": (
        "How much did I pay for the two items I returned?",
        "Which two items did you return?",
        "The {a} and the {b}.",
    ),
    "quotes": ("What was the last price of the stock I own?", "Which ticker do you own?", "I own {a}."),
    "portfolio": ("How many shares of my favourite company do I hold?", "Which company do you mean?", "I mean {a}."),
    "timetable": (
        "How long is my ride on this line?",
        "At which stops do you get on and off?",
        "I get on at {a} and off at {b}.",
    ),
    "scoreboard": ("How far behind the leader is my team?", "Which team is yours?", "My team is the {a}."),
    "league": ("How many points behind the top club is my club?", "Which club do you support?", "I support {a}."),
    "lab": ("Is my result normal?", "Which test result do you mean?", "I mean my {a} result."),
    "chart": ("What value did our condition get?", "Which bar is your condition?", "Ours is {a}."),
    "measurements": ("What is the reading for my specimen?", "Which specimen is yours?", "Mine is {a}."),
    "map": (
        "How far is it to where I'm going?",
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
