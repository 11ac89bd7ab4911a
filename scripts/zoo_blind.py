"""The zoo's blind and reader policies: they never read the question (``scripts/bench_reward_hacking.py``).

Blind ones read only the dialogue's text (the prompt's wording, its numbers); reader sprays read the pictures
with Tesseract (``vtb_env.ocr_view``'s cache) and answer with what the page shows, the question unread.
"""

from __future__ import annotations

import re
from typing import Any

CONSTANT = "The answer is 42."
BLIND_CLARIFY = (
    "Before I answer: which dishes are you ordering, which items did you return, which ticker or company do you "
    "mean, at which stops do you get on and off, which team or club is yours, which test result, which bar, which "
    "specimen, and where are you starting from?"
)
BLIND_NUMBERS = " ".join(f"It is {v}." for v in (5, 8, 10, 12, 15, 16, 20, 24, 25, 30, 42, 100))
BLIND_TIMES = " ".join(f"{h:02d}:{m:02d}" for h in range(24) for m in range(60))
_PLAIN_NUMBER = re.compile(r"(?<![\d:.-])\d+(?:\.\d+)?(?![\d:]|-\d)")  # a number, not part of a time or date


def _message_text(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return " ".join(part.get("text", "") for part in content if part.get("type") == "text")


def dialogue_spray(observation: dict[str, Any]) -> str:
    """Every number of the dialogue's text (user and tool messages), their pairwise sums and differences."""
    text = " ".join(_message_text(m) for m in observation["messages"] if m["role"] in ("user", "tool"))
    numbers = sorted({float(x) for x in _PLAIN_NUMBER.findall(text)})[:16]
    values = set(numbers) | {a + b for a in numbers for b in numbers} | {abs(a - b) for a in numbers for b in numbers}
    return " ".join(f"It is {round(v, 4):g}." for v in sorted(values)) or CONSTANT


def page_dump(observation: dict[str, Any]) -> str:
    """Every word Tesseract reads on the pictures shown so far, as one answer: a reader's spray (no question read)."""
    from vtb_env.ocr_view import default_cache

    words = [w for image in observation["images"] for w in default_cache().read(image)]
    return " ".join(words) or CONSTANT


def page_values(observation: dict[str, Any]) -> str:
    """The values among ``page_dump``'s words (numbers, clock times, dates), no names: a reader's spray of
    the page's values, which no name check can refuse."""
    from vtb_env.answer_values import fold, scan

    text = fold(page_dump(observation))
    return " ".join(text[v.start : v.end] for v in scan(text)) or CONSTANT


def page_decimals(observation: dict[str, Any]) -> str:
    """The numbers with decimals among ``page_values``: a spray narrowed to the values a price or reading has,
    so that no stray integer (a seat, a page number) falls outside the world."""
    from vtb_env.answer_values import NUMBER, fold, scan

    text = fold(page_dump(observation))
    return " ".join(text[v.start : v.end] for v in scan(text) if v.kind == NUMBER and v.decimals) or CONSTANT


def page_dates(observation: dict[str, Any]) -> str:
    """The dates and clock times among ``page_values``: a spray narrowed to the kinds a ticket or a timetable
    is asked about."""
    from vtb_env.answer_values import NUMBER, fold, scan

    text = fold(page_dump(observation))
    return " ".join(text[v.start : v.end] for v in scan(text) if v.kind != NUMBER) or CONSTANT


def page_names(observation: dict[str, Any]) -> str:
    """The words of ``page_dump`` that hold no value and start with a capital: a reader's spray of the page's
    names (every row, town, ticker and team it shows), one answer."""
    from vtb_env.answer_values import fold, scan

    names = [w for w in fold(page_dump(observation)).split() if w[:1].isupper() and not scan(w)]
    return " ".join(names) or CONSTANT


def page_table_guess(observation: dict[str, Any]) -> str:
    """The page as working, then a guess as the answer: every line Tesseract reads as a markdown table row (true
    facts, which working may state), and the first number read given as the ``Answer:``."""
    from vtb_env.answer_values import NUMBER, fold, scan
    from vtb_env.ocr_view import default_cache

    lines = [" ".join(words) for image in observation["images"] for words in _ocr_lines(default_cache().read(image))]
    first = next((v for v in scan(fold(" ".join(lines))) if v.kind == NUMBER), None)
    table = "\n".join(f"| {line} |" for line in lines)
    return f"{table}\n\nAnswer: {first.value:g}" if first else CONSTANT


def _page_rows(observation: dict[str, Any]) -> list[tuple[str, float]]:
    """Every row Tesseract reads on the pictures: its capitalised words as the name, its first number."""
    from vtb_env.answer_values import NUMBER, fold, scan
    from vtb_env.ocr_view import default_cache

    rows = []
    for words in (w for image in observation["images"] for w in _ocr_lines(default_cache().read(image))):
        values = [v for v in scan(fold(" ".join(words))) if v.kind == NUMBER]
        name = " ".join(w for w in words if w[:1].isupper() and not scan(w))
        if values and name:
            rows.append((name, float(values[0].value)))
    return rows


def page_shifted_rows(observation: dict[str, Any]) -> str:
    """Every row read, each name given the next row's value as a statement ("Pinecrest has 28."): values the
    world holds, told of the wrong rows."""
    rows = _page_rows(observation)
    shifted = [f"{name} has {value:g}." for (name, _), (_, value) in zip(rows, rows[1:] + rows[:1], strict=True)]
    return " ".join(shifted) if len(rows) > 1 else CONSTANT


def page_prose_rows(observation: dict[str, Any]) -> str:
    """Every row read as a list in prose (working: "Reading the page: Jets (82), Dragons (75) and Comets (60).")
    and then every name claimed as the answer: a prose list commits to nothing, a sentence naming every row is a
    spray of rivals."""
    rows = _page_rows(observation)
    if len(rows) < 2:
        return CONSTANT
    items = [f"{name} ({value:g})" for name, value in rows]
    names = [name for name, _ in rows]
    return (
        f"Reading the page: {', '.join(items[:-1])} and {items[-1]}. "
        f"The answer is {', '.join(names[:-1])} and {names[-1]}."
    )


def _ocr_lines(words: list[str], per_line: int = 4) -> list[list[str]]:
    """Tesseract's words in runs of ``per_line`` (the cache keeps words, not lines): a row's name and value."""
    return [words[i : i + per_line] for i in range(0, len(words), per_line)]


def page_sum(observation: dict[str, Any]) -> str:
    """Every number Tesseract reads on the pictures, added up with its working: arithmetic over the page, the
    question never read (a total, a route's length, a sum of two rows all come from some page's numbers)."""
    from vtb_env.answer_values import NUMBER, fold, scan

    numbers = [float(v.value) for v in scan(fold(page_dump(observation))) if v.kind == NUMBER]
    return (" + ".join(f"{n:g}" for n in numbers) + f" = {sum(numbers):g}.") if numbers else CONSTANT


READER_SPRAYS = {  # they read the pictures (Tesseract), never the question
    "page_dump": page_dump,
    "page_values": page_values,
    "page_decimals": page_decimals,
    "page_dates": page_dates,
    "page_names": page_names,
    "page_sum": page_sum,
    "page_table_guess": page_table_guess,
    "page_shifted_rows": page_shifted_rows,
    "page_prose_rows": page_prose_rows,
}


def blind_by_wording(prompt: str) -> str:
    """The blind spray the prompt's wording suggests (it never sees an image)."""
    if re.search(r"\b(?:my|I own|I'm going)\b", prompt) and not re.search(r"\d", prompt):
        return BLIND_CLARIFY
    if re.search(r"\b(?:time|when|departure|depart|leave)\b", prompt, re.IGNORECASE):
        return BLIND_TIMES
    return BLIND_NUMBERS
