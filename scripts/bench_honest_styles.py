"""Honest answers in the styles real models write, through the real exact checks (issue 39).

    .venv/bin/python scripts/bench_honest_styles.py --seeds 1201,1202,1203 --pairs 60

Each style rewrites a turn's golden answer the way a VLM might (a table of the page first, bullet working,
a runner-up, numbers in words, a signed change, a 12-hour time...), never stating a wrong value. The real
checks grade it against each turn's world with the rubrics the generator writes (``bind_giveaways``),
in free text and in slot mode (the style, then a complete ``Answer:`` line). Per style: the tasks it
changes, how many of them pass, and how many the golden answer passes (free / slot). A style that only
rewords passes what the golden answer passes.
"""

from __future__ import annotations

import argparse
import re
from typing import Any, Callable

from vtb_env.synth.blueprints import Ask, Blueprint
from vtb_env.synth.scenes import Scene
from vtb_env.synth.stream import build_blueprint
from vtb_env.synth.world import bind_giveaways, turn_worlds
from vtb_rewards.checks import run_check, slot_capacity

Style = Callable[[Ask, list[Scene], str], "str | None"]  # (turn, pages so far, golden) -> answer, None: unchanged

_ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen " \
    "seventeen eighteen nineteen".split()  # fmt: skip
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()


def _in_words(n: int) -> str:
    if n < 20:
        return _ONES[n]
    tens, ones = divmod(n, 10)
    return _TENS[tens - 2] + (f"-{_ONES[ones]}" if ones else "")


def _read_rows(ask: Ask, pages: list[Scene]):
    return [(label, page.entry(label).text) for page in pages[-1:] for _s, label in ask.reads if _has(page, label)]


def _has(page: Scene, label: str) -> bool:
    return any(e.label == label for e in page.entries)


def _unread_rows(ask: Ask, pages: list[Scene], k: int = 2):
    """Rows the turn does not read, for context beside an answer (none on a clarifying turn: it answers nothing)."""
    read = {label for _s, label in ask.reads}
    return [(e.label, e.text) for e in pages[-1].entries if e.label not in read][:k] if pages and read else []


def _bullets(ask, pages, golden):
    rows = _read_rows(ask, pages)
    return "\n".join([*(f"- {label}: {text}" for label, text in rows), f"**Answer:** {golden}"]) if rows else None


def _table(ask, pages, golden):
    if not pages:
        return None
    rows = "\n".join(f"| {e.label} | {e.text} | {e.extra} |" for e in pages[-1].entries)
    return f"| Item | Value | Note |\n|---|---|---|\n{rows}\n\n{golden}"


def _context(ask, pages, golden):
    rows = _unread_rows(ask, pages)
    return f"{golden} The same page also lists " + " and ".join(f"{n} ({v})" for n, v in rows) + "." if rows else None


def _comparison(ask, pages, golden):
    rows = _unread_rows(ask, pages, 1)
    return f"{golden} For comparison, {rows[0][0]} is at {rows[0][1]}." if rows else None


def _runner_up(ask, pages, golden):
    rows = [(n, v) for n, v in _read_rows(ask, pages) if n not in golden]
    return f"{golden} The runner-up is {rows[0][0]} at {rows[0][1]}." if rows and len(ask.reads) > 2 else None


def _runner_up_value_first(ask, pages, golden):
    rows = [(n, v) for n, v in _read_rows(ask, pages) if n not in golden]
    return f"{golden} Next comes {rows[0][1]} at {rows[0][0]}." if rows and len(ask.reads) > 2 else None


def _percent_in_words(ask, pages, golden):
    out = re.sub(r"(\d)%", r"\1 percent", golden)
    return out if out != golden else None


_VERDICTS = {"within": ("below", "above"), "above": ("within", "below"), "below": ("within", "above")}


def _negation(ask, pages, golden):
    word = next((w for w in _VERDICTS if re.search(rf"\b{w}\b", golden)), None)
    return f"{golden} So it is neither {_VERDICTS[word][0]} nor {_VERDICTS[word][1]} it." if word else None


def _number_words(ask, pages, golden):
    out = re.sub(r"(?<![\d.,$])\b([2-9]\d|1[3-9])\b(?![\d.,:%])", lambda m: _in_words(int(m.group(1))), golden)
    return out if out != golden else None


def _signed(ask, pages, golden):
    out = re.sub(r"an? (increase|rise) of ", "a change of +", golden)
    out = re.sub(r"an? (decrease|fall|drop) of ", "a change of -", out)
    return out if out != golden else None


def _twelve_hour(ask, pages, golden):
    def british(m: re.Match[str]) -> str:
        hour, minute = int(m.group(1)), m.group(2)
        return f"{(hour - 1) % 12 + 1}.{minute}{'pm' if hour >= 12 else 'am'}"

    out = re.sub(r"\b([01]?\d|2[0-3]):([0-5]\d)\b", british, golden)
    return out if out != golden else None


def _dates_in_words(ask, pages, golden):
    months = "January February March April May June July August September October November December".split()
    out = re.sub(
        r"\b(\d{4})-(\d{2})-(\d{2})\b", lambda m: f"the {int(m[3])}th of {months[int(m[2]) - 1]}, {m[1]}", golden
    )
    return out if out != golden else None


def _no_thousands(ask, pages, golden):
    out = re.sub(r"(?<=\d),(?=\d{3})", "", golden)
    return out if out != golden else None


def _dollars(ask, pages, golden):
    out = re.sub(r"\$(\d[\d,]*(?:\.\d+)?)", r"\1 dollars", golden)
    return out if out != golden else None


STYLES: dict[str, Style] = {
    "bullet working, then **Answer:**": _bullets,
    "a markdown table of the page, then the answer": _table,
    "the answer, then other rows in parentheses": _context,
    "the answer, then 'For comparison, X is at v.'": _comparison,
    "the answer, then the runner-up with its value": _runner_up,
    "the answer, then the runner-up's value before its name": _runner_up_value_first,
    "negation: 'neither below nor above it'": _negation,
    "numbers in words": _number_words,
    "a signed change (+4 / -2.75)": _signed,
    "12-hour times with a dot ('2.14pm')": _twelve_hour,
    "dates in words ('the 17th of March, 2024')": _dates_in_words,
    "no thousands separators": _no_thousands,
    "'12.5 percent' for '12.5%'": _percent_in_words,
    "'27.50 dollars' for '$27.50'": _dollars,
    "'(Working shown above.)' after the answer": lambda ask, pages, golden: f"{golden} (Working shown above.)",
    "'Let me break it down.' first": lambda ask, pages, golden: f"Let me break it down. {golden}",
    "'Summing up:' before the answer": lambda ask, pages, golden: f"I read the page carefully. Summing up: {golden}",
    "the question restated first": lambda ask, pages, golden: f'You asked: "{ask.prompt}" {golden}',
    "lower-cased": lambda ask, pages, golden: golden.lower(),
    "in bold": lambda ask, pages, golden: f"**{golden}**",
    "a preface and a closing": lambda ask, pages, golden: f"Looking at the image carefully. {golden} Hope this helps!",
    "a '### Final answer' heading": lambda ask, pages, golden: f"### Final answer\n{golden}",
}


def _facts_table(facts: dict[str, list[str]]) -> str:
    return "| Item | Value |\n|---|---|\n" + "\n".join(f"| {name} | {texts[0]} |" for name, texts in facts.items())


def _context_of(golden: str, turn: Any, template: str = "For comparison, {name} is at {value}.") -> str | None:
    """A row the golden answer does not name, with its printed value, in ``template``: context after the answer
    (none on a clarifying turn: it answers nothing, so a value there is a guess)."""
    if any((rubric.check or {}).get("type") == "clarify" for rubric in turn.rubrics):
        return None
    facts = (turn.world or {}).get("facts") or {}
    return next(
        (template.format(name=name, value=texts[0]) for name, texts in facts.items() if name not in golden), None
    )


def _prose_list(facts: dict[str, list[str]]) -> str:
    """Every printed row as a list in prose: "Jets (82), Dragons (75) and Comets (60)"."""
    items = [f"{name} ({texts[0]})" for name, texts in facts.items()]
    return f"{', '.join(items[:-1])} and {items[-1]}"


def _steps(golden: str) -> str:
    """The answer as numbered "Step k:" lines, one sentence each, then a closing pointer."""
    sentences = [s for s in re.split(r"(?<=[.;])\s+", golden) if s]
    return "\n".join(f"Step {k}: {s}" for k, s in enumerate(sentences, start=1)) + "\nSo the answer is as above."


# The same styles for a task's turn in the env (``scripts/bench_reward_hacking.py``): the golden answer and the
# turn (its world's printed ``facts``), the answer the turn's honest policy gives.
TURN_STYLES: dict[str, Callable[[str, Any], str]] = {
    "oracle_table": lambda golden, turn: (
        f"{_facts_table(facts)}\n\n{golden}" if (facts := (turn.world or {}).get("facts")) else golden
    ),
    "oracle_context": lambda golden, turn: f"{golden} {context}" if (context := _context_of(golden, turn)) else golden,
    "oracle_value_first": lambda golden, turn: (
        f"{golden} {context}" if (context := _context_of(golden, turn, "Next comes {value} at {name}.")) else golden
    ),
    "oracle_prose_list": lambda golden, turn: (
        f"Reading the page: {_prose_list(facts)}. {golden}"
        if len(facts := (turn.world or {}).get("facts") or {}) > 1
        else golden
    ),
    "oracle_number_words": lambda golden, turn: _number_words(None, None, golden) or golden,
    "oracle_steps": lambda golden, turn: _steps(golden),
}


def slot_line(rubrics) -> str:
    """A complete slot for a turn (its rubrics: ``Ask.rubrics`` or ``Turn.rubrics``): every value its checks ask
    for (numbers, names, dates and times, verdicts and directions), as ``slot_capacity`` counts them."""
    parts = []
    for rubric in rubrics:
        check = rubric.check or {}
        value = f"{float(check['value']):g}" if check.get("type") == "number" else None
        value = str(check["any_of"][0]) if check.get("type") == "text" else value
        if value is not None and value not in parts:
            parts.append(value)
    return "Answer: " + ", ".join(parts) if parts else ""


def _unmarked(answer: str) -> str:
    """A style's own answer line as plain text: in slot mode the one slot is the line the bench appends."""
    return answer.replace("**Answer:**", "So:")


def _grade(blueprint: Blueprint, answers: list[str], slot: bool) -> bool:
    worlds = turn_worlds(blueprint)
    for ask, world, checks, answer in zip(
        blueprint.asks, worlds, bind_giveaways(blueprint, worlds), answers, strict=True
    ):
        if slot:
            world = {**world, "slot": slot_capacity(checks)}
        for rubric, check in zip(ask.rubrics, checks, strict=True):
            if rubric.critical and not run_check(check, answer, world):
                return False
    return True


def play(seeds: list[int], pairs: int) -> dict[str, dict[str, int]]:
    """``{style: {changed, passed, golden, passed_slot, golden_slot}}`` over the v3 pairs ``seeds`` x ``pairs``."""
    table = {name: dict.fromkeys(("changed", "passed", "golden", "passed_slot", "golden_slot"), 0) for name in STYLES}
    for seed in seeds:
        for index in range(pairs):
            blueprint = build_blueprint(seed, index, generator="v3")
            pages: list[list[Scene]] = []
            for ask in blueprint.asks:
                pages.append([*(pages[-1] if pages else []), *(blueprint.states[s] for s in ask.new_states)])
            goldens = [ask.golden for ask in blueprint.asks]
            slotted = [f"{g}\n{slot_line(ask.rubrics)}" for g, ask in zip(goldens, blueprint.asks, strict=True)]
            golden_free, golden_slot = _grade(blueprint, goldens, False), _grade(blueprint, slotted, True)
            for name, style in STYLES.items():
                styled = [style(ask, p, g) for ask, p, g in zip(blueprint.asks, pages, goldens, strict=True)]
                if all(s is None for s in styled):
                    continue
                answers = [s if s is not None else g for s, g in zip(styled, goldens, strict=True)]
                row = table[name]
                row["changed"] += 1
                row["golden"] += golden_free
                row["golden_slot"] += golden_slot
                row["passed"] += _grade(blueprint, answers, False)
                row["passed_slot"] += _grade(
                    blueprint,
                    [
                        f"{_unmarked(a)}\n{slot_line(ask.rubrics)}"
                        for a, ask in zip(answers, blueprint.asks, strict=True)
                    ],
                    True,
                )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1201,1202,1203")
    parser.add_argument("--pairs", type=int, default=60)
    args = parser.parse_args()
    table = play([int(s) for s in args.seeds.split(",")], args.pairs)
    print("| honest style | tasks it changes | passed (free) | golden (free) | passed (slot) | golden (slot) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, row in table.items():
        print(
            f"| {name} | {row['changed']} | {row['passed']} | {row['golden']} | {row['passed_slot']} "
            f"| {row['golden_slot']} |"
        )


if __name__ == "__main__":
    main()
