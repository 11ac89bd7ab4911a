"""The task model: rubric parsing (slash keys, yes/no), the critical rules, serialisation, images."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from tests.support.official_parquet import png_bytes, rubric
from vtb_env.tasks import (
    ImageDecodeError,
    ImageRef,
    Rubric,
    Task,
    Turn,
    decode_image,
    normalize_domain,
    parse_rubrics_json,
    yes_no,
)


def make(weight: int, critical: str) -> Rubric:
    return Rubric.from_official("r", rubric("d", weight, critical))


@pytest.mark.parametrize(
    ("weight", "critical", "by_weight", "by_flag", "by_either"),
    [
        (5, "no", True, False, True),
        (4, "no", True, False, True),
        (2, "yes", False, True, True),  # the real data has weight-2 rubrics flagged critical
        (3, "no", False, False, False),
        (5, "yes", True, True, True),
    ],
)
def test_is_critical_under_each_rule(weight, critical, by_weight, by_flag, by_either):
    item = make(weight, critical)
    assert item.is_critical("weight>=4") is by_weight
    assert item.is_critical("flag") is by_flag
    assert item.is_critical("either") is by_either
    assert item.is_critical() is by_weight  # the official toolkit's rule is the default


def test_unknown_critical_rule_is_an_error():
    with pytest.raises(ValueError, match="unknown critical rule"):
        make(5, "yes").is_critical("sometimes")


@pytest.mark.parametrize(
    ("value", "expected"),
    [("yes", True), ("Yes ", True), ("no", False), ("NO", False), (True, True), (False, False), ("", False)],
)
def test_yes_no(value, expected):
    assert yes_no(value) is expected


def test_official_entry_with_slash_keys_parses_and_round_trips():
    entry = rubric(
        "Mentions the colour",
        2,
        "yes",
        "no",
        objective="subjective",
        explicit="implicit",
        category=["reasoning", "truthfulness"],
    )
    item = Rubric.from_official("3f1c9a2e-1111_2", entry)
    assert (item.id, item.weight, item.critical, item.final_answer) == ("3f1c9a2e-1111_2", 2, True, False)
    assert (item.objective, item.explicit, item.categories) == (False, False, ("reasoning", "truthfulness"))
    assert item.to_official() == entry


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"weight": 3}, "missing"),
        ({"description": "d", "weight": 9}, "outside 1..5"),
        ({"description": "d", "weight": "x"}, "not an integer"),
    ],
)
def test_bad_rubric_entries_name_the_problem(entry, message):
    with pytest.raises(ValueError, match=message):
        Rubric.from_official("r1", entry)


def test_parse_rubrics_json_accepts_object_and_list():
    as_object = parse_rubrics_json(json.dumps({"a": rubric("x", 5), "b": rubric("y", 1)}))
    as_list = parse_rubrics_json([{"id": "a", **rubric("x", 5)}, {"id": "b", **rubric("y", 1)}])
    assert [r.id for r in as_object] == [r.id for r in as_list] == ["a", "b"]
    with pytest.raises(json.JSONDecodeError):
        parse_rubrics_json("{not json")


@pytest.mark.parametrize(
    ("raw", "domain"),
    [
        ("chemistry", "STEM"),
        ("maths", "STEM"),
        ("Physics", "STEM"),
        ("medical", "Medical"),
        ("generalist", "Generalist"),
        ("", "Generalist"),
        ("sports", "Sports"),
    ],
)
def test_normalize_domain_merges_stem(raw, domain):
    assert normalize_domain(raw) == domain


def test_task_round_trips_through_dict(tmp_path):
    (tmp_path / "image_1.png").write_bytes(png_bytes())
    task = Task(
        id="t1",
        turns=(
            Turn("look", (ImageRef("image_1.png", data=png_bytes()),), "red", '[{"tool": "crop"}]', (make(2, "yes"),)),
            Turn("and now?", (), "still red", "", (make(5, "no"),)),
        ),
        prompt_category="biology",
        eval_focus="follow_up_test",
        metadata={"num_turns": 2},
    )
    again = Task.from_dict(json.loads(json.dumps(task.to_dict())), tmp_path)
    assert again.to_dict() == task.to_dict()
    assert (again.turncase, again.domain) == ("multi-turn", "STEM")
    assert again.turns[0].tool_trajectory == [{"tool": "crop"}]
    assert again.images[0].read_bytes() == png_bytes()


def test_decode_image_refuses_corrupt_data_and_bombs():
    with pytest.raises(ImageDecodeError, match="cannot decode"):
        decode_image(b"not an image")
    buffer = io.BytesIO()
    Image.new("1", (9000, 8000)).save(buffer, format="PNG")  # 72 Mpx > the 64 Mpx cap, tiny file
    with pytest.raises(ImageDecodeError, match="exceeds"):
        decode_image(buffer.getvalue())
    assert decode_image(png_bytes(7, 5)).size == (7, 5)
