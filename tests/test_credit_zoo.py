"""The hack zoo's no-work calls (issue 31, items 3 and 4) earn exactly what no call earns, episode by episode.

``scripts/bench_reward_hacking.py``: ``noop_vision`` (code ``pass``) and ``failing_vision`` (code that raises
before touching an image) play the golden answers after their call through the real env and sandbox;
``unexecuted_call`` writes a ``<tool_call>`` block that never ran before the golden answer, scored by the TRL
reward function and verl's ``compute_score``. Synthetic tasks of both labels: on a tool-required one a call
that counted would turn FN into TP.
"""

from __future__ import annotations

import pytest

from tests.test_reward_hacking import _bench
from vtb_env.loaders import load_tasks


@pytest.fixture(scope="module")
def tasks():
    return list(load_tasks("synth:6:5"))


pytestmark = pytest.mark.usefixtures("exact_rubric_checks_only")


@pytest.mark.slow
def test_vision_calls_that_read_no_image_earn_exactly_what_no_call_earns(tasks):
    played = _bench().no_work_vision_zoo(tasks, seed=5, n=6)
    baseline = played["never_call"]
    assert any(e["mode"] == 0.0 for e in baseline)  # some tool-required task: no call is the wrong mode there
    for name in ("noop_vision", "failing_vision"):
        assert [e["reward"] for e in played[name]] == [e["reward"] for e in baseline], name
        assert [e["mode"] for e in played[name]] == [e["mode"] for e in baseline], name
        assert all(e["used_tools"] == 0.0 for e in played[name])


def test_a_call_block_that_never_ran_earns_exactly_what_no_call_earns(tasks):
    scores = _bench().unexecuted_call_scores(tasks)
    assert scores["unexecuted_call (TRL)"] == scores["golden (TRL)"]
    assert scores["unexecuted_call (verl)"] == scores["golden (verl)"]
    assert any(score > 0 for score in scores["golden (verl)"])
