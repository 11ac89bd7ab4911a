"""Exact rubric checks in a closed world: honest answers pass, every spelling of a hedge or a guess fails."""

import pytest

from vtb_env.answer_values import fold, scan
from vtb_rewards.checks import CheckSpecError, answer_slot, implied_world, numbers_in, run_check, slot_capacity


def test_scan_reads_dates_times_and_numbers_once_each_after_folding():
    values = scan(fold("On 17 March 2024 at 7:30 pm it cost $1,234.50 (12%), −4; １６ and .5"))
    assert [(v.kind, v.value) for v in values] == [
        ("date", "2024-03-17"),
        ("time", 19 * 60 + 30),
        ("number", 1234.5),
        ("number", 12.0),
        ("number", -4.0),
        ("number", 16.0),
        ("number", 0.5),
    ]
    assert numbers_in("1. First line\n2. then 19:05 and 3") == [3.0]  # list markers and clock times are no numbers


def test_fold_maps_look_alikes_and_compatibility_forms():
    assert fold("16 оr 17") == "16 or 17"  # Cyrillic о
    assert fold("16 ∕ 17") == "16 / 17"  # U+2215 division slash
    assert fold("ｆｕｌｌ　ｗｉｄｔｈ？") == "full width?"


NUMBER_16 = {"type": "number", "value": 16, "abs_tol": 0.01}
# The order: $13 pizza + $3 crust = $16 (the prompt gives no number).
ORDER_WORLD = implied_world(
    "What does the pizza with extra crust cost?", "$13 plus $3 for the crust makes $16.", [NUMBER_16]
)


@pytest.mark.parametrize(
    "answer",
    [
        "$13 plus $3 for the crust makes $16.",
        "The total is $16.",
        "You pay 16 dollars: 13 + 3 = 16.",
        "Sure! Here is what I found. The pizza is $13.00, the crust $3.00, so the total is $16.00. Enjoy!",
        "You asked: 'What does the pizza with extra crust cost?' It costs $16.",  # restating the question
        "the total is $16",
    ],
)
def test_honest_answers_and_their_working_pass(answer):
    assert run_check(NUMBER_16, answer, ORDER_WORLD) is True


@pytest.mark.parametrize(
    "answer",
    [
        "$16 (or $17)",
        "$16, alternatively $17",
        "$16 vs $17",
        "16 оr 17",  # a Cyrillic о
        "16 ∕ 17",  # U+2215
        "The total is $16. The total is $17.",  # two sentences, two totals
        "It costs $15, $16 or $17.",
        " ".join(str(n) for n in range(1, 17)),  # a spray of candidates
        "It does not cost 16 dollars.",  # negated
        "The answer is 42.",
        "16 or 16.5",
    ],
)
def test_hedges_sprays_and_guesses_fail_whatever_their_spelling(answer):
    assert run_check(NUMBER_16, answer, ORDER_WORLD) is False


def test_a_number_stands_for_the_world_values_it_rounds():
    world = {"numbers": [105.714286, 8.0, 60.0, 4.54], "dialogue": []}
    speed = {"type": "number", "value": 105.7, "abs_tol": 0.06}
    assert run_check(speed, "8 km in 4.54 minutes: about 105.7 km/h (106 rounded).", world) is True
    assert run_check(speed, "About 105.7 km/h, maybe 106.7.", world) is False
    assert run_check(speed, "105.7", {"numbers": [105.7], "dialogue": []}) is True


def test_a_check_without_a_world_allows_only_its_own_values():
    assert run_check(NUMBER_16, "The total is $16.") is True
    assert run_check(NUMBER_16, "13 + 3 = 16") is False  # working needs a world that accounts for it
    assert run_check({"type": "number", "value": 1000, "rel_tol": 0.01}, "about 1,009") is False  # outside its world


def test_text_check_is_whole_word_case_insensitive_and_closed_over_names():
    spec = {"type": "text", "any_of": ["Gate B"], "none_of": ["Gate A"]}
    assert run_check(spec, "Go to gate  b now.") is True
    assert run_check(spec, "Gate A or Gate B") is False
    assert run_check({"type": "text", "any_of": ["cat"]}, "concatenate") is False


def test_dates_and_times_match_in_any_spelling_and_refuse_a_second_one():
    at = {"type": "text", "any_of": ["19:30"]}
    world = {"times": [19 * 60 + 30], "dialogue": []}
    assert run_check(at, "It leaves at 7:30 pm.", world) is True
    assert run_check(at, "It leaves at 19:30 or 19:45.", world) is False
    assert run_check(at, " ".join(f"{h:02d}:{m:02d}" for h in range(24) for m in (0, 30)), world) is False
    on = {"type": "text", "any_of": ["2024-03-17"]}
    assert run_check(on, "You travelled on March 17, 2024.", {"dates": ["2024-03-17"]}) is True
    assert run_check(on, "On 2024-03-17 (or 2024-03-18).", {"dates": ["2024-03-17"]}) is False


def test_choice_check_needs_the_right_option_only():
    spec = {"type": "choice", "answer": "Lisbon", "options": ["Lisbon", "Porto", "Faro"]}
    assert run_check(spec, "The train goes to Lisbon.") is True
    assert run_check(spec, "Lisbon or Porto") is False
    assert run_check(spec, "Faro") is False


INCREASED = {"type": "text", "any_of": ["increase", "increased", "rose", "up"], "none_of": []}
CHANGE_WORLD = {"numbers": [3.7, 4.1, 0.4, -0.4], "evidence": {"numbers": [4.1, 0.4]}, "dialogue": []}


def test_a_direction_counts_only_beside_the_value_that_decides_it():
    assert run_check(INCREASED, "It went from 3.7 to 4.1, an increase of 0.40.", CHANGE_WORLD) is True
    assert run_check(INCREASED, "It rose by 0.4.", CHANGE_WORLD) is True
    assert run_check(INCREASED, "It increased.", CHANGE_WORLD) is False  # a coin flip
    assert run_check(INCREASED, "It increased by 0.4 or decreased.", CHANGE_WORLD) is False
    assert run_check(INCREASED, "It went up by 0.4, then down.", CHANGE_WORLD) is False
    assert run_check(INCREASED, "It did not increase; 0.4.", CHANGE_WORLD) is False
    assert run_check(INCREASED, "The follow-up shows 4.1.", CHANGE_WORLD) is False  # "follow-up" is not "up"
    # a verdict is decided by values, so it is closed over them: a transcription's stray number fails it
    assert run_check(INCREASED, "Rows: 3.7 4.1 9.9 12.5, up.", CHANGE_WORLD) is False
    assert run_check(INCREASED, "It rose to 4.1 by 07:15.", CHANGE_WORLD) is False  # a time outside the world too


def test_restating_the_question_states_nothing():
    prompt = "Is that within the reference range? If not, how far outside it is it?"
    above = {"type": "text", "any_of": ["above"], "none_of": ["below", "within"]}
    world = {"numbers": [5.6, 5.0, 0.6, -0.6], "evidence": {"numbers": [5.6]}, "dialogue": [prompt]}
    assert run_check(above, f'You asked: "{prompt}" The result, 5.6, is above the range.', world) is True
    assert run_check(above, "5.6 is within or above the range.", world) is False


CLARIFY = {"type": "clarify", "none_of": ["$12.50"], "asks_for": ["ticker", "which stock"]}
CLARIFY_WORLD = {
    "dialogue": ["What was the last price of the stock I own?"],
    "clarify_rivals": ["which dishes", "which team"],
}


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("I can see the quote board, but I need one detail first: Which ticker do you own?", True),
        ("You asked: 'What was the last price of the stock I own?'. Which ticker do you mean?", True),
        ("Could you tell me which one you mean?", False),  # names no detail
        ("What was the last price of the stock I own?", False),  # the question handed back
        ("Which ticker? Probably $12.50.", False),
        ("Which ticker do you own? It traded at 41.", False),  # a value outside the world
        ("Which ticker, which dishes or which team do you mean?", False),  # every scene's detail at once
    ],
)
def test_clarify_names_this_scenes_missing_detail_and_no_other(answer, expected):
    assert run_check(CLARIFY, answer, CLARIFY_WORLD) is expected


def test_answer_slot_reads_the_last_boxed_value_or_answer_line():
    assert answer_slot("Work: 13 + 3.\nAnswer: $16") == "$16"
    assert answer_slot("**Answer:** 16 km\nThanks") == "16 km"
    assert answer_slot(r"so \boxed{\frac{1}{2}} and finally \boxed{16}") is None  # two slots that differ: a hedge
    assert answer_slot(r"\boxed{16} so \boxed{16}") == "16"  # the same slot twice is one
    assert answer_slot("no slot here") is None


def test_slot_mode_reads_only_the_slot_and_a_slot_holds_one_value_per_asked_value():
    world = {**ORDER_WORLD, "slot": slot_capacity([NUMBER_16])}
    assert run_check(NUMBER_16, "13 + 3 = 16\nAnswer: $16", world) is True
    assert run_check(NUMBER_16, "The total is $16.", world) is False  # no slot
    assert run_check(NUMBER_16, "Answer: $16 or $13", world) is False  # two values in a one-value slot
    assert run_check(NUMBER_16, "Answer: 17", world) is False
    assert run_check(NUMBER_16, "Scratch: 99\nAnswer: 16", world) is True  # text outside the slot is not read


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "nope"},
        {"type": "number"},
        {"type": "text", "any_of": []},
        "not a mapping",
        {"type": "number", "value": 1, "given": {"type": "text", "any_of": ["x"]}},  # given: a list
        {"type": "number", "value": 1, "given": [{"type": "nope"}]},
    ],
)
def test_malformed_specs_raise_a_clear_error(spec):
    with pytest.raises(CheckSpecError):
        run_check(spec, "anything")


def test_a_name_check_refuses_a_second_name_from_the_vocabulary():
    spec = {"type": "text", "any_of": ["Falcons"], "none_of": ["Rangers"]}
    world = {"rival_names": ["Comets", "Wolves"], "dialogue": []}
    assert run_check(spec, "The Falcons lead with 88 points.", {**world, "numbers": [88.0]}) is True
    assert run_check(spec, "The Falcons (or the Comets) lead.", world) is False
    assert run_check(spec, "The Falcons, not the Rangers.", world) is True  # a name negated is no claim


def test_a_check_given_others_is_met_only_with_them():
    """A value a page gives away (the top row's price, read among every row) is credited only with the answer
    it belongs to: the right row named, no rival."""
    world = {"numbers": [27.5, 12.0, 8.0], "rival_names": [], "dialogue": []}
    named = {"type": "text", "any_of": ["Saltimbocca"], "none_of": ["Walnuts", "Soup"]}
    price = {"type": "number", "value": 27.5, "abs_tol": 0.006, "given": [named]}
    assert run_check(price, "The Saltimbocca is the most expensive, at $27.50.", world) is True
    assert run_check(price, "Saltimbocca $27.50 Walnuts $12.00 Soup $8.00", world) is False  # a transcription
    assert run_check(price, "$27.50 $12.00 $8.00", world) is False  # its values alone
    assert run_check(price, "The Walnuts, at $27.50.", world) is False
