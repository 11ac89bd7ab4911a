"""Exact rubric checks: each rule accepts the right answer and rejects near misses."""

import pytest

from vtb_rewards.checks import MAX_NUMBERS, CheckSpecError, numbers_in, run_check


def test_numbers_in_parses_currency_separators_and_signs():
    assert numbers_in("Total: $1,234.50, change −4 and .5 and 12%") == [1234.5, -4.0, 0.5, 12.0]


@pytest.mark.parametrize(
    "answer, expected",
    [("The pizza costs $13.", True), ("13.004", True), ("It costs $14.", False), ("no number", False)],
)
def test_number_check(answer, expected):
    assert run_check({"type": "number", "value": 13, "abs_tol": 0.01}, answer) is expected


def test_number_check_rejects_spraying_many_numbers():
    sprayed = " ".join(str(n) for n in range(MAX_NUMBERS + 1)) + " 13"
    assert run_check({"type": "number", "value": 13}, sprayed) is False


def test_relative_tolerance():
    assert run_check({"type": "number", "value": 1000, "rel_tol": 0.01}, "about 1,009") is True
    assert run_check({"type": "number", "value": 1000, "rel_tol": 0.001}, "about 1,009") is False


def test_text_check_is_whole_word_and_case_insensitive():
    spec = {"type": "text", "any_of": ["Gate B"], "none_of": ["Gate A"]}
    assert run_check(spec, "Go to gate  b now.") is True
    assert run_check(spec, "Gate A or Gate B") is False
    assert run_check({"type": "text", "any_of": ["cat"]}, "concatenate") is False


def test_choice_check_needs_the_right_option_only():
    spec = {"type": "choice", "answer": "Lisbon", "options": ["Lisbon", "Porto", "Faro"]}
    assert run_check(spec, "The train goes to Lisbon.") is True
    assert run_check(spec, "Lisbon or Porto") is False
    assert run_check(spec, "Faro") is False


def test_clarify_check():
    spec = {"type": "clarify", "none_of": ["42"]}
    assert run_check(spec, "Which of the two tables do you mean?") is True
    assert run_check(spec, "It is 42. Anything else?") is False
    assert run_check(spec, "The answer is probably large.") is False


@pytest.mark.parametrize(
    "spec", [{"type": "nope"}, {"type": "number"}, {"type": "text", "any_of": []}, "not a mapping"]
)
def test_malformed_specs_raise_a_clear_error(spec):
    with pytest.raises(CheckSpecError):
        run_check(spec, "anything")


NUMBER_16 = {"type": "number", "value": 16, "abs_tol": 0.01}


@pytest.mark.parametrize(
    "answer",
    [
        "$13 plus $3 for the crust makes $16.",
        "The total is $16, not $15.",
        "There is no tip, so you pay $16.",
        "The three values are 3.5, 16 and 5.1.",
        "It went from 12 to 16, an increase of 4.",
        "Adding the legs (4 km + 16 km + 7 km) gives 27 km.",
        "No. It is 16.",
    ],
)
def test_honest_answers_that_show_their_working_pass(answer):
    assert run_check(NUMBER_16, answer) is True


@pytest.mark.parametrize(
    "answer",
    [
        "It costs $15, $16 or $17.",
        "It is 16 or 17.",
        "Either 16 km or 15 km.",
        "16/17",
        "It does not cost 16 dollars.",
        "It isn't 16.",
        "1, 2, 5, 16, 30",  # a list of more than MAX_LISTED candidates
        "The answer is 10 and 12 and 14 and 16 and 18.",
        "It costs between $16 and $18.",
    ],
)
def test_hedged_or_negated_numbers_fail(answer):
    assert run_check(NUMBER_16, answer) is False


def test_direction_checks_carry_their_opposites_and_refuse_negation():
    increased = {"type": "text", "any_of": ["increase", "increased", "rose", "up"], "none_of": []}
    assert run_check(increased, "It went from 3.7 to 4.1, an increase of 0.40.") is True
    assert run_check(increased, "It increased or decreased.") is False
    assert run_check(increased, "It went up, then down.") is False
    assert run_check(increased, "It did not increase.") is False
    assert run_check(increased, "Here is the report from the follow-up visit.") is False  # "follow-up" is not "up"
    within = {"type": "text", "any_of": ["within"], "none_of": []}
    assert run_check(within, "3.7 is within the range 3.5-5.1.") is True
    assert run_check(within, "It is not within the range.") is False
    assert run_check(within, "It is within or outside the range.") is False
    yes = {"type": "text", "any_of": ["yes"]}
    assert run_check(yes, "Yes, it is.") is True and run_check(yes, "Yes or no.") is False
    assert run_check({"type": "text", "any_of": ["19:30"]}, "It leaves at 19:30 or 19:45.") is False


def test_clarify_check_needs_the_missing_detail_and_refuses_an_echo():
    prompt = "What was the last price of the stock I own?"
    spec = {"type": "clarify", "none_of": ["$12.50"], "asks_for": ["ticker", "which stock"], "echo_of": prompt}
    assert run_check(spec, "I can see the quote board, but I need one detail first: Which ticker do you own?") is True
    assert run_check(spec, "Which stock do you hold?") is True
    assert run_check(spec, "Could you tell me which one you mean?") is False  # generic: names no detail
    assert run_check(spec, prompt) is False  # the question handed back
    assert run_check(spec, "What was the last price of the stock I own? Which ticker?") is False
    assert run_check(spec, "Which ticker? Probably $12.50.") is False
