"""One parser per tool-call format (whileai/core/toolcalls.py), and the convention a run's tokenizer carries.

The hermes parser is the one the kit's template and whileai's hermes convention
write; llama3 and mistral read the formats of bases whose own templates render
tools. Each is checked on the text its format writes, on text around calls, and
on text that is no call.
"""

from __future__ import annotations

import json

import pytest

from whileai.core.toolcalls import (TOOL_FORMATS, format_tool_call, parse_tool_call_objects, parse_tool_calls,
                                    template_tool_format)

ARGS = {"city": "Paris", "days": 3}


@pytest.mark.parametrize("fmt", TOOL_FORMATS)
def test_each_format_reads_back_what_it_writes(fmt):
    text = format_tool_call("get_weather", ARGS, tool_format=fmt)
    content, calls = parse_tool_calls(text, fmt)
    assert content is None and len(calls) == 1
    assert calls[0]["function"]["name"] == "get_weather" and json.loads(calls[0]["function"]["arguments"]) == ARGS


def test_llama3_calls_after_the_python_tag_and_several_separated():
    text = ('<|python_tag|>{"name": "a", "parameters": {"x": 1}}; {"name": "b", "parameters": {}}<|eot_id|>')
    assert parse_tool_call_objects(text, "llama3") == (None, [("a", {"x": 1}), ("b", {})])
    assert parse_tool_call_objects('The answer is {"x": 1}', "llama3") == ('The answer is {"x": 1}', [])
    assert parse_tool_call_objects('{"x": 1}', "llama3") == ('{"x": 1}', [])  # JSON that is no call stays content


def test_mistral_v3_list_and_v11_args_forms():
    assert parse_tool_call_objects('[TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}]</s>', "mistral") == (
        None, [("a", {"x": 1})])
    assert parse_tool_call_objects('[TOOL_CALLS]a[ARGS]{"x": 1}[TOOL_CALLS]b[ARGS]{}', "mistral") == (
        None, [("a", {"x": 1}), ("b", {})])
    assert parse_tool_call_objects("no calls here", "mistral") == ("no calls here", [])


def test_hermes_is_the_default_and_an_unknown_format_is_named():
    text = 'Sure. <tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>'
    assert parse_tool_call_objects(text) == parse_tool_call_objects(text, "hermes") == ("Sure.", [("a", {"x": 1})])
    with pytest.raises(ValueError, match="tool_format='xml'.*hermes, llama3, mistral"):
        parse_tool_calls(text, "xml")


def test_a_templates_markers_name_its_format():
    from whileai.kit import chat_template
    from whileai.kit._toolformat import hermes_chat_template

    assert template_tool_format(chat_template()) == "hermes"
    assert template_tool_format(hermes_chat_template()) == "hermes"
    assert template_tool_format("{{ '[TOOL_CALLS]' }}") == "mistral"
    assert template_tool_format("{%- if message.role == 'ipython' %}<|python_tag|>") == "llama3"
    assert template_tool_format(None) == "hermes"


def test_the_judge_and_the_serving_parser_read_the_named_format():
    from whileai.platform.serving._chat import reply_message
    from whileai.simulations.judges import judge_reply

    row = {"messages": [{"role": "user", "content": "weather?"}], "gold": {"name": "get_weather", "arguments": ARGS}}
    text = format_tool_call("get_weather", ARGS, tool_format="llama3")
    assert judge_reply(text, row, tool_format="llama3")["passed"]
    assert not judge_reply(text, row)["passed"]  # read as hermes, a bare JSON object is no call
    message, is_call = reply_message(text, True, "llama3")
    assert is_call and message["tool_calls"][0]["function"]["name"] == "get_weather"
    assert reply_message(text, True)[1] is False


def test_the_kit_template_renders_tools_and_keeps_its_own_convention():
    from whileai.kit import build_tokenizer, reply_format, use_tool_format

    tokenizer = build_tokenizer()
    before = tokenizer.chat_template
    info = use_tool_format(tokenizer, None)
    assert info["used"] == "native" and info["renders_tools"] and tokenizer.chat_template == before
    assert reply_format(tokenizer) == "hermes"
    forced = use_tool_format(build_tokenizer(), "hermes")
    assert forced["used"] == "hermes" and forced["renders_tools"]


def test_tool_format_is_a_checked_knob():
    from whileai.simulations.training import train_spec

    refused = train_spec("sft", {}, {"tool_format": "xml"}, base_model=None, target=None, holdout=None)
    assert any("tool_format" in p and "hermes" in p for p in refused.problems), refused.problems
    resolved = train_spec("sft", {}, None, base_model=None, target=None, holdout=None)
    assert not resolved.problems and resolved.spec is not None and resolved.spec.tool_format == "auto"
