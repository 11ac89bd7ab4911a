"""The claim model (issue 39): the exact checks read what an answer claims, not its wording.

Honest working (a table of the page, bullet working, context in parentheses or after the answer, a runner-up
with its value) passes; what still fails: a guess outside the world, a second candidate before the answer,
a rival name committed as the answer, a transcription that commits to nothing, two different slots.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from vtb_rewards.checks import answer_slot, run_check, slot_capacity

# A lab page: the turn reads Magnesium (2.0); Lipase and Urea are printed, unread.
FACTS = {"Magnesium": ["2.0", "mg/dL (1.7-2.2)"], "Lipase": ["112.0", "U/L (13-60)"], "Urea": ["18.0", "mg/dL (7-20)"]}
LAB = {"numbers": [2.0, -2.0, 1.7, -1.7, 2.2, -2.2, 1.0, -1.0, 3.0, -3.0], "facts": FACTS, "dialogue": []}
MAGNESIUM = {"type": "number", "value": 2.0, "abs_tol": 0.05}
WITHIN = {"type": "text", "any_of": ["within"], "none_of": []}
LAB_VERDICT = {**LAB, "evidence": {"numbers": [2.0]}}

# A scoreboard: the turn reads every row (a superlative); the answer is the Jets.
BOARD_FACTS = {"Jets": ["82"], "Dragons": ["75"], "Comets": ["60"]}
BOARD = {"numbers": [82.0, 75.0, 60.0, -82.0, -75.0, -60.0], "facts": BOARD_FACTS, "dialogue": []}
JETS = {"type": "text", "any_of": ["Jets"], "none_of": ["Dragons", "Comets"]}


@pytest.mark.parametrize(
    "answer",
    [
        "| Test | Result |\n|---|---|\n| Lipase | 112.0 |\n| Magnesium | 2.0 |\n| Urea | 18.0 |\n\nMagnesium is 2.0.",
        "- Lipase: 112.0\n- Magnesium: 2.0\n- Urea: 18.0\n**Answer:** Magnesium is 2.0 mg/dL.",
        "Your Magnesium result is 2.0. The same page also lists Lipase (112.0) and Urea (18.0).",
        "Your Magnesium result is 2.0. For comparison, Urea is at 18.0.",
        "Lipase: 112.0\nUrea: 18.0\n\nYour Magnesium result is 2.0.",  # 'Name: value' lines are a list
    ],
)
def test_true_facts_told_as_working_or_context_are_no_rivals(answer):
    assert run_check(MAGNESIUM, answer, LAB) is True


@pytest.mark.parametrize(
    "answer",
    [
        "Lipase 112.0 Magnesium 2.0 Urea 18.0",  # a transcription in one sentence: a rival before the answer
        "Lipase is 112.0. Magnesium is 2.0.",  # a second candidate before the answer
        "| Lipase | 112.0 |\n| Magnesium | 2.0 |\n| Urea | 18.0 |",  # a table commits to nothing
        "Magnesium (2.0), Lipase (112.0), Urea (18.0)",  # nor do values in parentheses
        "| Magnesium | 2.0 |\n| Urea | 19.0 |\n\nMagnesium is 2.0.",  # a false fact in working is a guess
        "Magnesium is 2.0 (or 2.9).",  # a hedge in parentheses: 2.9 is nobody's printed value
        "Magnesium is 2.0, or Urea's 18.0.",  # a second candidate in the answer's own sentence
    ],
)
def test_what_is_no_true_fact_or_comes_before_the_answer_still_fails(answer):
    assert run_check(MAGNESIUM, answer, LAB) is False


# Two rows print the same kind of value; a computed 2 (30 - 28) is no row's though a third row prints 2.
TALLY = {
    "numbers": [28.0, 30.0, 2.0, 1.0],
    "facts": {"Pinecrest": ["30"], "Brookfield": ["28"], "Oakridge": ["2"]},
    "working": [2.0],
    "dialogue": [],
}
BROOKFIELD = {"type": "number", "value": 28}


@pytest.mark.parametrize(
    ("answer", "met"),
    [
        ("Brookfield has 28.", True),
        ("The most is 28 at Brookfield.", True),  # the name after the value prints it
        ("Pinecrest (30) leads, ahead of 28 at Brookfield.", True),
        ("Brookfield has 28; Pinecrest has 30, 2 more.", True),  # a value of the computation, not Oakridge's 2
        ("Brookfield has 28, as image 1 shows.", True),  # an ordinal far from its name is told of no row
        ("Pinecrest has 28.", False),  # Brookfield's value given to Pinecrest
        ("Brookfield has 28. Oakridge: 30.", False),  # Pinecrest's value given to Oakridge, as context
        ("| Pinecrest | 28 |\n| Brookfield | 28 |\nAnswer: 28", False),  # a misread row in the working
        ("Pinecrest is not 28; Brookfield is 28.", True),  # negated: no claim
    ],
)
def test_a_value_told_of_the_wrong_row_fails_wherever_it_stands(answer, met):
    assert run_check(BROOKFIELD, answer, TALLY) is met


def test_a_name_check_reads_the_name_committed_as_the_answer():
    assert run_check(JETS, "Jets have the highest score, 82. The runner-up is Dragons at 75.", BOARD) is True
    assert run_check(JETS, "Jets have the highest score, 82. Next comes 75 at Dragons.", BOARD) is True
    assert run_check(JETS, "Jets have the highest score, 82. Next comes 60 at Dragons.", BOARD) is False  # not its own
    comparing = "Comparing the scores: Dragons (75), Comets (60) and Jets (82). The Jets have the highest score, 82."
    assert run_check(JETS, comparing, BOARD) is True  # a list in prose is working
    assert run_check(JETS, "Dragons: 75; Comets: 60; Jets: 82.\nThe Jets lead with 82.", BOARD) is True
    assert run_check(JETS, "The Jets lead with 82 (Dragons 75, Comets 60).", BOARD) is True
    assert run_check(JETS, "Dragons 75, Comets 60 and Jets 82.", BOARD) is False  # a transcription commits to nothing
    assert run_check(JETS, "Dragons (75) and Jets (82). The answer is Dragons and Jets.", BOARD) is False
    assert run_check(JETS, "Dragons (75) trail Jets (82).", BOARD) is False  # a comparison states: Dragons first
    assert run_check(JETS, "| Dragons | 75 |\n| Jets | 82 |\n\nThe Jets lead.", BOARD) is True
    assert run_check(JETS, "The Jets lead (Dragons 75, Comets 60).", BOARD) is True
    assert run_check(JETS, "The Jets lead, not the Dragons.", BOARD) is True  # a negated name is no claim
    assert run_check(JETS, "Jets 82 Dragons 75 Comets 60", BOARD) is False  # a transcription names all at once
    assert run_check(JETS, "The Jets or the Dragons lead.", BOARD) is False  # a hedge
    assert run_check(JETS, "Jets have the highest score. The runner-up is Dragons.", BOARD) is False  # no value
    assert run_check(JETS, "Dragons have 75. Jets have the highest score, 82.", BOARD) is False  # rival first


def test_verdicts_read_negation_scope_and_words_that_are_no_verdict():
    golden = "Your Magnesium result is 2.0, within the reference range (1.7-2.2)."
    assert run_check(WITHIN, golden, LAB_VERDICT) is True
    assert run_check(WITHIN, f"{golden} So it is neither below nor above it.", LAB_VERDICT) is True
    assert run_check(WITHIN, f"{golden} (Working shown above.)", LAB_VERDICT) is True
    assert run_check(WITHIN, f"Let me break it down. Summing up: {golden}", LAB_VERDICT) is True
    assert run_check(WITHIN, f"{golden} It is above 1.7 and below 2.2.", LAB_VERDICT) is False  # claims opposites
    assert run_check(WITHIN, "It is within the range.", LAB_VERDICT) is False  # a coin flip: no evidence


def test_numbers_in_words_signed_changes_and_twelve_hour_times():
    change = {"numbers": [23.0, 20.25, 2.75, -2.75, -23.0, -20.25], "evidence": {"numbers": [20.25, 2.75]}}
    fell = {"type": "text", "any_of": ["decrease", "decreased", "fell", "down"], "none_of": []}
    by = {"type": "number", "value": 2.75, "abs_tol": 0.005}
    assert run_check(by, "From $23.00 to $20.25, a change of -2.75.", change) is True
    assert run_check(fell, "From $23.00 to $20.25, a change of -2.75.", change) is True
    assert run_check(by, "It rose from $23.00 to $20.25, a change of -2.75.", change) is False  # contradicted
    points = {"type": "number", "value": 17.0, "abs_tol": 0.05}
    assert run_check(points, "They are seventeen points behind.", {"numbers": [17.0, -17.0]}) is True
    assert run_check(points, "I need one detail: seventeen or eighteen?", {"numbers": [17.0, -17.0]}) is False
    depart = {"type": "text", "any_of": ["14:14"], "none_of": []}
    for spelling in ("2.14pm", "2:14 p.m.", "14:14"):
        assert run_check(depart, f"The departure time at Depot is {spelling}.", {"times": [854]}) is True
    assert run_check({"type": "text", "any_of": ["14:00"]}, "It leaves at 2 pm.", {"times": [840]}) is True
    total = {"type": "number", "value": 12345.5, "abs_tol": 0.005}
    for spelling in ("$12,345.50", "$12345.50", "12,345.50 dollars"):
        assert run_check(total, f"The total is {spelling}.", {"numbers": [12345.5]}) is True, spelling
    share = {"type": "number", "value": 12.5, "abs_tol": 0.05}
    assert run_check(share, "It rose by 12.5 percent.", {"numbers": [12.5]}) is True


def test_the_slot_holds_a_verdict_with_its_value_and_refuses_two_different_boxes():
    world = {**LAB_VERDICT, "slot": slot_capacity([WITHIN])}
    assert run_check(WITHIN, "Magnesium is 2.0, in 1.7-2.2.\nAnswer: within", world) is True  # evidence outside
    assert run_check(WITHIN, r"\boxed{2.0, within}", world) is True
    assert run_check(WITHIN, r"\boxed{within}", world) is False  # a coin flip: no value anywhere
    assert answer_slot(r"\boxed{16} ... \boxed{17}") is None
    assert answer_slot("Answer: 16\nAnswer: 17") is None
    assert answer_slot("Answer: $16\n\\boxed{16}") == "16"


def _bench(name: str):
    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_honest_style_passes_what_the_golden_answer_passes_on_a_fresh_seed():
    """``scripts/bench_honest_styles.py`` through the real checks, free text and slot mode."""
    table = _bench("bench_honest_styles").play([1301], 40)
    changed = {name: row for name, row in table.items() if row["changed"]}
    assert len(changed) >= 15, table
    for name, row in changed.items():
        assert row["passed"] >= row["golden"] - 0.02 * row["changed"], (name, row)
        assert row["passed_slot"] >= row["golden_slot"] - 0.02 * row["changed"], (name, row)
        assert row["golden_slot"] == row["golden"] == row["changed"], (name, row)  # verdict-only turns included


TICKET_WORLD = {
    "numbers": [0.0],
    "facts": {"To": ["Zurich"], "Coach": ["10"]},
    "pictures": {"count": 2, "row_counts": [6], "row_nouns": ["dish"]},
    "dialogue": [],
}


@pytest.mark.parametrize(
    ("answer", "met"),
    [
        ("Precipitation was 0.0 mm.", True),
        ("Precipitation was 0.0 mm, as image 1 shows.", True),  # an ordinal of a shown picture: a reference
        ("Picture #2 is the archive: 0.0 mm.", True),
        ("The menu lists 6 dishes; precipitation was 0.0 mm.", True),  # a shown picture's row count
        ("Precipitation was 0.0 mm (or 1.0 mm).", False),  # 1.0 is no picture: a second candidate
        ("Precipitation was 0 mm (or 1).", False),
        ("Precipitation was 0.0 mm or 6 mm.", False),  # a row count only counts rows
        ("Precipitation was 0.0 mm, as image 3 shows.", False),  # no third picture
    ],
)
def test_a_pictures_ordinal_or_row_count_is_a_reference_never_a_candidate(answer, met):
    assert run_check({"type": "number", "value": 0.0, "abs_tol": 0.05}, answer, TICKET_WORLD) is met


def test_a_row_count_the_question_asks_for_is_a_value():
    world = {**TICKET_WORLD, "numbers": [6.0, -6.0]}
    assert run_check({"type": "number", "value": 6.0, "abs_tol": 0.05}, "The route has 6 dishes.", world) is True
