"""Every question the default generator asks is answerable: its premise holds on its scene (vtb_env.synth.premises)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from vtb_env.synth.premises import PREMISES, check_premises, question_type, question_types, template_families
from vtb_env.synth.stream import build_blueprint, stream_choice


def _blueprints(seed: int, n: int, generator: str = "v3"):
    for index in range(n):
        category, domain = stream_choice(seed, index)
        yield index, build_blueprint(seed, index, domain=domain, category=category, generator=generator)


def test_every_question_type_has_a_premise():
    assert set(PREMISES) == set(template_families()) | {"VAGUE", "SUPPLY"}


def test_every_v3_question_is_answerable_over_four_seeds():
    """4 seeds x 240 pairs of v3 (the blueprints, as stream builds them; nothing is drawn): every prompt is a
    wording of exactly one question type and that type's premise holds on the scene the turn shows."""
    seen: Counter[str] = Counter()
    failures = []
    for seed in (1, 2, 3, 4):
        for index, blueprint in _blueprints(seed, 240):
            seen.update(question_types(blueprint))
            failures += [f"seed {seed} index {index} {f}" for f in check_premises(blueprint)]
    assert failures == []
    assert set(seen) == set(PREMISES)  # the run asked every question type


def test_the_check_finds_a_failed_premise():
    """v2 (frozen bit for bit) still asks 'which rose the most?' of a third snapshot where every entry fell;
    v3 asks it of the same pair only after some entry rose."""
    category, domain = stream_choice(1, 142)
    v2, v3 = (build_blueprint(1, 142, domain=domain, category=category, generator=g) for g in ("v2", "v3"))
    assert question_types(v2)[-1] == question_types(v3)[-1] == "CHANGED_MOST"
    assert check_premises(v2) == ["turn 3 (CHANGED_MOST): no entry rose"]
    assert check_premises(v3) == []


def _first_with(family: str):
    for _index, blueprint in _blueprints(3, 80):
        types = question_types(blueprint)
        if family in types:
            return blueprint, types.index(family)
    pytest.fail(f"no {family} question in 80 pairs")


def test_a_row_the_page_does_not_show_fails():
    blueprint, turn = _first_with("SUPPLY")
    named = question_type(blueprint.asks[turn].prompt, blueprint.states[0].kind.name)[1]["a"]
    asks = list(blueprint.asks)
    asks[turn] = replace(asks[turn], prompt=asks[turn].prompt.replace(named, "Nowhere"))
    failures = check_premises(replace(blueprint, asks=tuple(asks)))
    assert len(failures) == 1 and failures[0].startswith(f"turn {turn + 1} (SUPPLY): ") and "Nowhere" in failures[0]


def test_a_shared_highest_value_fails():
    """Two entries at the top: "which is the highest?" names no single one."""
    blueprint, turn = _first_with("HIGHEST")
    scene = blueprint.states[0]
    top = max(scene.entries, key=lambda e: e.value)
    entries = tuple(replace(e, value=top.value) if e is not top and e.value != top.value else e for e in scene.entries)
    failures = check_premises(replace(blueprint, states=(replace(scene, entries=entries),)))
    assert f"turn {turn + 1} (HIGHEST): no single highest entry" in failures
