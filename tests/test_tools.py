"""Calculator, schemas, registry factory and ablation sets."""

from __future__ import annotations

import json
import math

import pytest

from vtb_env.tools import ALL_TOOLS, TOOL_SETS, ToolContext, default_tools
from vtb_env.tools.calculator import CalculatorError, evaluate
from vtb_env.tools.schemas import ALL_SCHEMAS, python_image_processing_schema

CTX = ToolContext(task_id="t")


@pytest.mark.parametrize(
    "expression, expected",
    [
        ("2 + 3 * 4", 14),
        ("(2 + 3) * 4", 20),
        ("2^10", 1024),
        ("2**10", 1024),
        ("7 % 3", 1),
        ("-3^2", -9),
        ("10 / 4", 2.5),
        ("sqrt(16)", 4.0),
        ("log(8, 2)", 3.0),
        ("log(e)", 1.0),
        ("exp(0)", 1.0),
        ("2 * pi", 2 * math.pi),
        ("sin(0) + cos(0) + tan(0)", 1.0),
        ("2 × 3 ÷ 4", 1.5),
        ("2^-1", 0.5),
    ],
)
def test_calculator_evaluates(expression, expected):
    assert evaluate(expression) == pytest.approx(expected)


@pytest.mark.parametrize(
    "expression, message",
    [
        ("9^9^9", "too large"),
        ("9**9**9", "too large"),
        ("10.0**400", "too large"),
        ("1/0", "division by zero"),
        ("sqrt(-1)", "domain"),
        ("__import__('os')", "unknown function"),
        ("__import__('os').system('id')", "unsupported"),
        ("x + 1", "unknown name"),
        ("2 +", "cannot parse"),
        ("[1, 2]", "unsupported"),
        ("(1).real", "unsupported"),
        ("1 << 2", "unsupported"),
        ("1" * 2000, "longer than"),
    ],
)
def test_calculator_refuses_clearly(expression, message):
    with pytest.raises(CalculatorError, match=message):
        evaluate(expression)


def test_calculator_tool_returns_json_and_errors_as_results():
    tools = default_tools({"tools": ("calculator",)})
    ok = tools.call("calculator", {"expression": "1 + 1"}, CTX)
    assert ok.ok and json.loads(ok.text) == {"expression": "1 + 1", "result": 2} and ok.latency_s > 0
    bad = tools.call("calculator", {"expression": "9^9^9"}, CTX)
    assert not bad.ok and "too large" in json.loads(bad.text)["error"]
    missing = tools.call("calculator", {"expr": "1"}, CTX)
    assert not missing.ok and "expression" in missing.error


def test_schemas_are_the_papers():
    assert tuple(ALL_SCHEMAS) == ALL_TOOLS
    for name, schema in ALL_SCHEMAS.items():
        assert schema["type"] == "function" and schema["function"]["name"] == name
        assert schema["function"]["parameters"]["type"] == "object"
    code = ALL_SCHEMAS["python_interpreter"]["function"]["parameters"]["properties"]["code"]
    assert (code["minLength"], code["maxLength"]) == (1, 5000)
    assert ALL_SCHEMAS["web_search"]["function"]["parameters"]["required"] == ["query"]
    assert ALL_SCHEMAS["historical_weather"]["function"]["parameters"]["required"] == ["location", "date"]
    description = ALL_SCHEMAS["python_interpreter"]["function"]["description"]
    assert "requests" not in description and "yfinance" not in description and "without network" in description


def test_vision_schema_lists_the_turns_images():
    schema = python_image_processing_schema(["image_1.png", "transformed_image_0.png"], "/w")
    text = schema["function"]["description"]
    assert "file list: image_1.png, transformed_image_0.png." in text
    assert 'img.save(f"/w/transformed_image_{i}.png", "PNG")' in text and "{image_list}" not in text


def test_tool_sets():
    assert default_tools().names == ALL_TOOLS
    assert "python_image_processing" not in default_tools({"tools": "no_vision"}).names
    assert len(default_tools({"tools": "none"})) == 0
    assert set(TOOL_SETS) == {"all", "no_vision", "none"}
    assert default_tools({"tools": ["calculator", "web_search"]}).names == ("calculator", "web_search")
    with pytest.raises(ValueError, match="unknown tool"):
        default_tools({"tools": ["calculater"]})
    with pytest.raises(ValueError, match="unknown tool config keys"):
        default_tools({"bakend": "online"})


def test_unknown_tool_and_bad_arguments_are_results():
    tools = default_tools({"tools": "none"})
    result = tools.call("calculator", {"expression": "1"}, CTX)
    assert not result.ok and "unknown tool" in result.error
