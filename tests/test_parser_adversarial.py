"""Adversarial actions against the parsers (issue 11, item 10): the per-action call bound, linear time on thousands
of calls, no code evaluated, the shared and deterministic repair budget, deep nesting, integers too long to
convert, and the linear scans checked against the regular expressions they replaced."""

from __future__ import annotations

import json
import re
import time

import json_repair
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vtb_env.parsers import MAX_CALLS_PER_ACTION, parse_action, split_reasoning
from vtb_env.parsers.base import MAX_REPAIR_CHARS, REPAIR_BUDGET_READS, load_json_lenient, repair_budget
from vtb_env.parsers.pythonic import MAX_PYTHONIC_CHARS


@pytest.mark.parametrize("fmt", ["pythonic", "hermes", "openai"])
def test_calls_beyond_the_per_action_bound_become_one_error(fmt):
    n = MAX_CALLS_PER_ACTION + 7
    action = {
        "pythonic": "[" + ", ".join(f'calculator(expression="{i}")' for i in range(n)) + "]",
        "hermes": "".join(
            f'<tool_call>{{"name": "calculator", "arguments": {{"expression": "{i}"}}}}</tool_call>' for i in range(n)
        ),
        "openai": {
            "role": "assistant",
            "tool_calls": [{"function": {"name": "calculator", "arguments": {"expression": str(i)}}} for i in range(n)],
        },
    }[fmt]
    calls = parse_action(action).calls
    assert len(calls) == MAX_CALLS_PER_ACTION + 1 and calls[-2].arguments == {
        "expression": str(MAX_CALLS_PER_ACTION - 1)
    }
    assert calls[-1].error == f"7 more tool calls were not read: at most {MAX_CALLS_PER_ACTION} calls per action"


def test_5000_pythonic_calls_parse_in_linear_time():
    text = "[" + ", ".join(f'calculator(expression="{i}+1")' for i in range(5000)) + "]"
    start = time.perf_counter()
    parsed = parse_action(text)
    elapsed = time.perf_counter() - start
    assert elapsed < 2.0, f"{elapsed:.1f} s: quadratic again? (was 107 s)"
    assert parsed.calls[0].raw == 'calculator(expression="0+1")' and "4900 more tool calls" in parsed.calls[-1].error


def test_huge_unclosed_json_is_not_repaired_and_fails_fast():
    start = time.perf_counter()
    parsed = parse_action('<tool_call>{"name":"calculator","arguments":{"expression":"' + "x" * 1_000_000)
    elapsed = time.perf_counter() - start
    assert elapsed < 2.0, f"{elapsed:.1f} s: repairing a 1 MB payload (was 20 s)"
    assert (
        f"invalid JSON of 1,000,048 characters; repair is attempted only up to {MAX_REPAIR_CHARS:,}"
        in parsed.calls[0].error
    )


def test_pythonic_parser_never_evaluates_code(tmp_path):
    marker = tmp_path / "pwned"
    parsed = parse_action(f'[calculator(expression=open({str(marker)!r}, "w").write("x"))]')
    assert parsed.calls[0].error and not marker.exists()


QUOTE_BLOCK = '<tool_call>{"' + 'a" ' * 1300 + "</tool_call>"  # ~4 KB that json_repair is quadratic on


def test_repair_budget_is_shared_by_the_action_and_deterministic():
    small_block = '<tool_call>{"' + 'a" ' * 60 + "</tool_call>"  # ~5,000 reads to repair: a few fit the budget
    action = small_block * 12 + hermes_call("calculator", expression="2+2")
    first, second = parse_action(action), parse_action(action)
    assert [c.error for c in first.calls] == [c.error for c in second.calls]  # reads are counted, not timed
    gave_up = [c for c in first.calls if c.error and "repair" in c.error]
    assert 0 < len(gave_up) < 12  # the first blocks were repaired, the rest hit the shared budget
    assert all("repair budget" in c.error for c in first.calls[12 - len(gave_up) + 1 : 12])
    assert first.calls[-1].name == "calculator" and first.calls[-1].error is None  # valid JSON needs no budget
    with repair_budget(0):
        with pytest.raises(ValueError, match="repair budget"):
            load_json_lenient('{"a": 1,}')
    assert REPAIR_BUDGET_READS > 10 * len('{"a": 1,}')


@pytest.mark.parametrize(
    "text",
    ['{"a": 1,}', "{'a': 'b'}", '{"a": [1, 2', '{"code": "print("hi")"}', '{"a": True, "b": None}', '[{"name": "x"}'],
)
def test_budgeted_repair_matches_json_repair(text):
    assert load_json_lenient(text) == (json_repair.loads(text), True)


def hermes_call(name, **arguments):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def test_calls_past_the_bound_are_counted_not_parsed():
    valid = hermes_call("calculator", expression="1") * MAX_CALLS_PER_ACTION
    parsed = parse_action(valid + QUOTE_BLOCK * 40)  # parsing 40 quote blocks would spend seconds
    assert len(parsed.calls) == MAX_CALLS_PER_ACTION + 1 and all(c.error is None for c in parsed.calls[:-1])
    assert parsed.calls[-1].error.startswith("40 more tool calls were not read")
    tags = parse_action('<function=calculator>{"expression": "1"}</function>' * (MAX_CALLS_PER_ACTION + 3))
    assert tags.calls[-1].error.startswith("3 more tool calls were not read")
    stream = parse_action(
        '{"name": "calculator", "parameters": {"expression": "1"}}; ' * (MAX_CALLS_PER_ACTION + 2) + '{"bad'
    )
    assert stream.calls[-1].error.startswith("3 more tool calls were not read")


@pytest.mark.parametrize(
    "action",
    [
        "<tool_call>" + '{"a":' * 50_000 + "</tool_call>",
        "<tool_call>" + "[" * 50_000 + "</tool_call>",
        '{"name": "f", "parameters": ' + "[" * 50_000,
        "[f(a=" + "1+" * 50_000 + "1)]",
        "<function=f>" + "[" * 50_000 + "</function>",
    ],
)
def test_deep_nesting_is_a_parse_error(action):
    if action.startswith("<tool_call>"):  # a later call of the same action is still read
        action += hermes_call("calculator", expression="1")
    parsed = parse_action(action)
    assert parsed.calls and parsed.calls[0].error is not None
    if action.startswith("<tool_call>"):
        assert parsed.calls[-1].name == "calculator" and parsed.calls[-1].error is None


def test_integers_too_long_to_convert_do_not_raise():
    digits = "9" * 5000
    for action in (
        f'<tool_call>{{"name": "f", "arguments": {{"n": {digits}}}}}</tool_call>',
        f'{{"name": "f", "parameters": {{"n": {digits}}}}}',
    ):
        call = parse_action(action).calls[0]
        assert call.name == "f" and call.repaired  # read as text by the repair, never an exception


def test_pythonic_list_past_the_length_bound_is_one_error():
    parsed = parse_action("[" + "calculator(expression='1'), " * (MAX_PYTHONIC_CHARS // 20) + "]")
    assert len(parsed.calls) == 1 and "were not read: at most" in parsed.calls[0].error


# The regular expressions the parsers used before the linear scans: the reference on small texts.
_OLD_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_OLD_FUNCTION = re.compile(r"<function=([^>\s]*)>(.*?)(?:</function>|$)", re.DOTALL)
_OLD_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)(?:</parameter>|(?=<parameter=)|$)", re.DOTALL)
_OLD_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)


def _old_split_reasoning(text):
    thoughts = []
    if "</think>" in text and "<think>" not in text.split("</think>", 1)[0]:
        head, text = text.split("</think>", 1)
        thoughts.append(head)
    thoughts.extend(_OLD_THINK.findall(text))
    text = _OLD_THINK.sub("", text)
    if "<think>" in text:
        text, unclosed = text.split("<think>", 1)
        thoughts.append(unclosed)
    return text.strip(), "\n".join(t.strip() for t in thoughts if t.strip())


def _fragments(*pieces):
    return st.lists(st.sampled_from(pieces), max_size=14).map("".join)


@settings(max_examples=400, deadline=None)
@given(_fragments("<think>", "</think>", "a", " b ", "\n", "<tool_call>", "x"))
def test_linear_split_reasoning_matches_the_regex_version(text):
    assert split_reasoning(text) == _old_split_reasoning(text)


@settings(max_examples=400, deadline=None)
@given(
    _fragments(
        "<function=",
        "f",
        "g",
        ">",
        " ",
        "</function>",
        "<parameter=",
        "p",
        "</parameter>",
        "1",
        '{"a": 2}',
        "<tool_call>",
        "</tool_call>",
    )
)
def test_linear_function_tag_scan_matches_the_regex_version(text):
    from vtb_env.parsers.function_tag import FunctionTagParser, _tags

    expected = [(m.group(1), m.group(2)) for m in _OLD_FUNCTION.finditer(text)]
    assert [
        (name, body) for _, name, body, _ in _tags(text, "<function=", ("</function>",), allow_empty_name=True)
    ] == expected
    for _, body in expected:
        want = [(m.group(1), m.group(2)) for m in _OLD_PARAMETER.finditer(body)]
        assert [
            (name, value) for _, name, value, _ in _tags(body, "<parameter=", ("</parameter>", "<parameter="))
        ] == want
    content, _ = FunctionTagParser().parse(text)
    assert content == re.sub(r"</?tool_call>", "", _OLD_FUNCTION.sub("", text)).strip()


@settings(max_examples=300, deadline=None)
@given(_fragments("<tool_call>", "</tool_call>", '{"name": "calculator", "arguments": {}}', "x", " "))
def test_linear_hermes_scan_matches_the_regex_version(text):
    from vtb_env.parsers.hermes import HermesParser

    content, calls = HermesParser().parse(text)
    assert content == _OLD_BLOCK.sub("", text).strip() and len(calls) == len(_OLD_BLOCK.findall(text))
