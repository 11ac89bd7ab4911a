"""Every tool-call format, valid and malformed, plus auto-detection, explicit choice and <think> handling."""

from __future__ import annotations

import json

import pytest

from vtb_env.parsers import FORMATS, PARSERS, ParsedCall, ToolCallParser, parse_action, register_parser, split_reasoning

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
