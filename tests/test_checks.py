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
