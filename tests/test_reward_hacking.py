"""The hack zoo on a small set: degenerate policies earn nothing, the oracle earns everything.

Runs ``scripts/bench_reward_hacking.py``'s ``zoo`` (the real env, the real sandbox, synthetic tasks
of every kind: a follow-up, a lookup, region switches, multi-turn) without the OCR baseline, which
is the slow one and no degenerate policy.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_reward_hacking.py"


def _bench():
    if "bench_reward_hacking" not in sys.modules:  # dataclasses need the module registered while it runs
        spec = importlib.util.spec_from_file_location("bench_reward_hacking", SCRIPT)
        sys.modules[spec.name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules["bench_reward_hacking"]


def _blind() -> tuple[str, ...]:
    """The blind policies; the reader sprays (they read the pictures with Tesseract) only where it is installed."""
    from vtb_env import ocr

    bench = _bench()
    return tuple(name for name in bench.BLIND if ocr.is_available() or name not in bench.READER_SPRAYS)


@pytest.fixture(scope="module")
def table():
    bench = _bench()
    policies = bench.DEGENERATE + _blind() + bench.HEDGES + ("oracle", "always_call", "never_call")
    return bench.zoo(n=8, seed=8, policies=policies + bench.HONEST_STYLES)


@pytest.mark.slow
def test_no_blind_or_degenerate_policy_passes_a_task_or_earns_rubric_credit(table):
    bench = _bench()
    for name in bench.DEGENERATE + _blind():
        row = table[name]
        assert row["pass_rate"] == 0.0 and row["rubric_score"] <= 0.02, (name, row["rubric_score"])


@pytest.mark.slow
def test_every_hedged_golden_answer_fails_whatever_its_spelling(table):
    for name in _bench().HEDGES:
        assert table[name]["pass_rate"] == 0.0, name


@pytest.mark.slow
def test_golden_answers_pass_in_every_honest_style(table):
    for name in _bench().HONEST_STYLES:
        assert table[name]["pass_rate"] == 1.0 and table[name]["rubric_score"] == 1.0, name


@pytest.mark.slow
def test_a_non_vision_tool_call_earns_nothing_over_no_call(table):
    for with_call, without in (("cheap_tool_constant", "constant"), ("tool_then_clarify", "always_clarify")):
        assert [e["reward"] for e in table[with_call]["episodes"]] == [e["reward"] for e in table[without]["episodes"]]
        assert all(e["used_tools"] == 0.0 for e in table[with_call]["episodes"])


@pytest.mark.slow
def test_golden_answers_get_the_full_reward_and_the_right_mode_beats_either_habit(table):
    assert all(e["reward"] == 1.0 and e["passed"] == 1.0 for e in table["oracle"]["episodes"])
    for habit in ("always_call", "never_call"):
        assert table[habit]["rubric_score"] == 1.0  # the same answers: only the mode decision differs
        wrong_mode = [e for e in table[habit]["episodes"] if e["mode"] == 0.0]
        assert wrong_mode and all(e["reward"] <= 0.9 for e in wrong_mode)  # 0.1 below the oracle's 1.0 each time
        assert table["oracle"]["reward"] - table[habit]["reward"] >= 0.03, (habit, table[habit]["reward"])


@pytest.fixture(scope="module")
def slot_table():
    """The same zoo in slot mode (``answer_format="slot"``): the golden answers and their styles end with a
    complete ``Answer:`` line; the degenerate and blind policies write what they always write."""
    bench = _bench()
    policies = bench.DEGENERATE + _blind() + bench.HEDGES + ("oracle",) + bench.HONEST_STYLES
    return bench.zoo(n=8, seed=8, policies=policies, answer_format="slot")


@pytest.mark.slow
def test_in_slot_mode_every_honest_style_passes_and_nothing_degenerate_does(slot_table):
    bench = _bench()
    for name in ("oracle", *bench.HONEST_STYLES):
        assert slot_table[name]["pass_rate"] == 1.0 and slot_table[name]["rubric_score"] == 1.0, name
    for name in bench.DEGENERATE + _blind():
        row = slot_table[name]
        assert row["pass_rate"] == 0.0 and row["rubric_score"] <= 0.02, (name, row["rubric_score"])
    for name in bench.HEDGES:  # a hedged slot fails its numbers; the names it commits to are right (as in free text)
        assert slot_table[name]["pass_rate"] == 0.0, name
