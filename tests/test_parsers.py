"""Every tool-call format, valid and malformed, plus auto-detection, explicit choice and <think> handling."""

from __future__ import annotations

import json
import time

import pytest

from vtb_env.parsers import (
    FORMATS,
    MAX_CALLS_PER_ACTION,
    PARSERS,
    ParsedCall,
    ToolCallParser,
    parse_action,
    register_parser,
    split_reasoning,
)
from vtb_env.parsers.base import MAX_REPAIR_CHARS

CALC = {"expression": "2+2"}
SEARCH = {"query": "Rio 2016 badminton", "num_results": 3}


def _names_args(action):
    return [(call.name, call.arguments) for call in action.calls]


@pytest.mark.parametrize(
    ("text", "parser"),
    [
        (
            '<tool_call>{"name": "calculator", "arguments": {"expression": "2+2"}}</tool_call>\n'
            '<tool_call>{"name": "web_search", '
            '"arguments": {"query": "Rio 2016 badminton", "num_results": 3}}</tool_call>',
            "hermes",
        ),
        (
            '<|python_tag|>{"name": "calculator", "parameters": {"expression": "2+2"}}; '
            '{"name": "web_search", "parameters": {"query": "Rio 2016 badminton", "num_results": 3}}',
            "llama3_json",
        ),
        (
            '{"name": "calculator", "parameters": {"expression": "2+2"}}\n'
            '{"name": "web_search", "parameters": {"query": "Rio 2016 badminton", "num_results": 3}}<|eom_id|>',
            "llama3_json",
        ),
        (
            '[{"name": "calculator", "arguments": {"expression": "2+2"}}, '
            '{"name": "web_search", "arguments": {"query": "Rio 2016 badminton", "num_results": 3}}]',
            "llama3_json",
        ),
        ('[calculator(expression="2+2"), web_search(query="Rio 2016 badminton", num_results=3)]', "pythonic"),
        (
            '<|python_start|>[calculator(expression="2+2"), '
            'web_search(query="Rio 2016 badminton", num_results=3)]<|python_end|>',
            "pythonic",
        ),
        (
            '<function=calculator>{"expression": "2+2"}</function>'
            '<function=web_search>{"query": "Rio 2016 badminton", "num_results": 3}</function>',
            "function_tag",
        ),
        (
            "<tool_call>\n<function=calculator>\n<parameter=expression>\n2+2\n</parameter>\n</function>\n</tool_call>\n"
            "<tool_call>\n<function=web_search>\n<parameter=query>\nRio 2016 badminton\n</parameter>\n"
            "<parameter=num_results>\n3\n</parameter>\n</function>\n</tool_call>",
            "function_tag",
        ),
    ],
)
def test_each_text_format_reads_two_calls_in_order(text, parser):
    action = parse_action(text)
    assert action.parser == parser
    assert _names_args(action) == [("calculator", CALC), ("web_search", SEARCH)]
    assert all(call.error is None for call in action.calls)
    assert parse_action(text, fmt=parser).calls == action.calls  # explicit choice agrees


def test_openai_message_dict_with_string_and_dict_arguments():
    message = {
        "role": "assistant",
        "content": "Checking.",
        "reasoning_content": "need arithmetic",
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "calculator", "arguments": json.dumps(CALC)}},
            {"id": "call_b", "type": "function", "function": {"name": "web_search", "arguments": SEARCH}},
        ],
    }
    action = parse_action(message)
    assert action.parser == "openai"
    assert _names_args(action) == [("calculator", CALC), ("web_search", SEARCH)]
    assert [call.call_id for call in action.calls] == ["call_a", "call_b"]
    assert action.content == "Checking." and action.reasoning == "need arithmetic"


def test_openai_message_without_calls_falls_back_to_text_formats():
    action = parse_action(
        {
            "role": "assistant",
            "content": '<tool_call>{"name": "calculator", "arguments": {"expression": "2+2"}}</tool_call>',
        }
    )
    assert action.parser == "hermes" and _names_args(action) == [("calculator", CALC)]
    plain = parse_action({"role": "assistant", "content": "<think>so</think>It is 4."})
    assert plain.calls == [] and plain.content == "It is 4." and plain.reasoning == "so"


@pytest.mark.parametrize(
    ("action", "expected_error"),
    [
        ("<tool_call>{bad json</tool_call>", "not valid JSON"),
        ('<tool_call>{"arguments": {"expression": "1"}}</tool_call>', "has no 'name'"),
        ('<tool_call>{"name": "calculator", "arguments": [1, 2]}</tool_call>', "must be a JSON object, got list"),
        ('<tool_call>{"name": "calculator", "arguments": "not json at all"}</tool_call>', "not valid JSON"),
        ("<|python_tag|>", "not followed by a tool call"),
        ("<tool_call></tool_call>", "empty <tool_call> block"),
        ({"role": "assistant", "tool_calls": "nope"}, "tool_calls must be a list"),
        ('<|python_tag|>{"name": "calculator", "parameters": 5}', "must be a JSON object, got int"),
        ("[calculator(expression=foo)]", "is not a literal value"),
        ('[calculator("2+2")]', "positional arguments are not allowed"),
        ('[calculator(expression="2"', "not valid Python"),
        ("[calculator(**kw)]", "**kwargs is not allowed"),
        ('<function=>{"a": 1}</function>', "without a function name"),
        ("<function=calculator>{oops</function>", "not valid JSON"),
        ({"role": "assistant", "tool_calls": [{"id": "x", "type": "function"}]}, "needs a 'function' object"),
        ({"role": "assistant", "tool_calls": [{"id": "x", "function": {"arguments": "{}"}}]}, "no function name"),
        (
            {
                "role": "assistant",
                "tool_calls": [{"id": "x", "function": {"name": "calculator", "arguments": "{broken"}}],
            },
            "not valid JSON",
        ),
        (12345, "must be a string or an assistant message dict"),
        ({"foo": "bar"}, "an assistant message needs 'content' and/or 'tool_calls'; got the keys ['foo']"),
        ({"role": "user", "content": "hi"}, "must be an assistant message, got role 'user'"),
        ({"role": "assistant", "content": 7}, "'content' must be a string, a list of content parts or null, got int"),
        (
            {"role": "assistant", "content": [{"type": "text", "text": 3}]},
            "content part 0 is a text part whose 'text' must be a string, got int",
        ),
        (
            {"role": "assistant", "content": [{"type": "text", "text": "a"}, "b"]},
            "content part 1 must be an object, got str",
        ),
    ],
)
def test_malformed_calls_are_returned_with_a_precise_error(action, expected_error):
    parsed = parse_action(action)
    assert len(parsed.calls) == 1
    assert parsed.calls[0].error is not None and expected_error in parsed.calls[0].error, parsed.calls[0].error


def test_near_miss_json_is_repaired_and_flagged():
    trailing = parse_action('<tool_call>{"name": "calculator", "arguments": {"expression": "2+2",}}</tool_call>')
    unclosed = parse_action(
        '<tool_call>{"name": "calculator", "arguments": {"expression": "2+2"}'
    )  # generation cut off
    single_quotes = parse_action("<tool_call>{'name': 'calculator', 'arguments': {'expression': '2+2'}}</tool_call>")
    for parsed in (trailing, unclosed, single_quotes):
        assert _names_args(parsed) == [("calculator", CALC)]
        assert parsed.calls[0].repaired and parsed.calls[0].error is None
    assert (
        not parse_action('<tool_call>{"name": "calculator", "arguments": {"expression": "2+2"}}</tool_call>')
        .calls[0]
        .repaired
    )


def test_pythonic_segments_are_exact_across_lines_and_non_ascii_text():
    text = '[web_search(query="Zürich café ☕"),\n  calculator(expression=x + 1),\n\tnot_a_call]'
    parsed = parse_action(text)
    assert parsed.calls[0].raw == 'web_search(query="Zürich café ☕")' and parsed.calls[0].arguments == {
        "query": "Zürich café ☕"
    }
    assert parsed.calls[1].error == "calculator: argument expression=x + 1 is not a literal value"
    assert parsed.calls[2].error == "not a function call: not_a_call"


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


def test_plain_text_is_an_answer_and_explicit_format_ignores_other_formats():
    assert parse_action("The price is $16.").calls == []
    assert parse_action("[1, 2, 3] are the values.").calls == []
    hermes_text = '<tool_call>{"name": "calculator", "arguments": {"expression": "2+2"}}</tool_call>'
    assert parse_action(hermes_text, fmt="pythonic").calls == []  # explicit choice: only that format
    with pytest.raises(ValueError, match="unknown tool-call format"):
        parse_action("x", fmt="nope")


@pytest.mark.parametrize(
    ("text", "visible", "reasoning"),
    [
        ("<think>a</think>Answer", "Answer", "a"),
        ("<think>a</think>Mid<think>b</think>End", "MidEnd", "a\nb"),
        ("implicit thoughts</think>Answer", "Answer", "implicit thoughts"),
        ("Answer<think>cut off", "Answer", "cut off"),
        ("No thoughts", "No thoughts", ""),
    ],
)
def test_reasoning_is_split_off(text, visible, reasoning):
    assert split_reasoning(text) == (visible, reasoning)


def test_think_blocks_do_not_hide_or_fake_calls():
    parsed = parse_action('<think>maybe <tool_call>{"name": "x"}</tool_call>?</think>The answer is 4.')
    assert parsed.calls == [] and parsed.content == "The answer is 4."
    assert "<tool_call>" in parsed.reasoning


def test_registering_a_custom_format():
    class Bang(ToolCallParser):
        name = "bang"

        def detect(self, text):
            return text.startswith("!")

        def parse(self, text):
            tool, _, expression = text[1:].partition(" ")
            return "", [ParsedCall(name=tool, arguments={"expression": expression})]

    register_parser(Bang())
    try:
        assert _names_args(parse_action("!calculator 2+2", fmt="bang")) == [("calculator", CALC)]
        assert parse_action("!calculator 2+2").calls == []  # auto order is unchanged
    finally:
        PARSERS.pop("bang")
    assert set(FORMATS) >= {"auto", "openai", "hermes", "llama3_json", "pythonic", "function_tag"}


# ---- adversarial actions: linear scans, the call bound, the repair budget (issue 11, item 10) ----

import re  # noqa: E402

import json_repair  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from vtb_env.parsers.base import REPAIR_BUDGET_READS, load_json_lenient, repair_budget  # noqa: E402
from vtb_env.parsers.pythonic import MAX_PYTHONIC_CHARS  # noqa: E402

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
