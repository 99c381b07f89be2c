"""One parser per tool-call format (whileai/core/toolcalls.py), and the convention a run's tokenizer carries.

The hermes parser is the one the kit's template and whileai's hermes convention
write; llama3 and mistral read the formats of bases whose own templates render
tools. Each is checked on the text its format writes, on text around calls, and
on text that is no call.
"""

from __future__ import annotations

import json
from pathlib import Path

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


@pytest.mark.parametrize(("text", "held_from"), [
    ('Sure. {"name": "a"', 6),            # Llama 3.1's JSON call
    ("Sure. [a(x=1)]", 6),                # Meta's python_list
    ("Sure. <function=a>{}", 6),          # Meta's function_tag, its start held back too
    ("Sure. <func", 6),
    ("Sure. No call here", 18),
])
def test_a_streamed_llama3_reply_is_held_back_where_any_of_its_call_styles_may_begin(text, held_from):
    from whileai.core.toolcalls import CALL_MARKERS
    from whileai.platform.serving._chat import reply_message, safe_prefix_length

    assert safe_prefix_length(text, list(CALL_MARKERS["llama3"])) == held_from
    if "(" in text:  # the held-back part is then read as a call, not sent as content
        assert reply_message("[a(x=1)]", True, "llama3")[1] is True


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
    from whileai.domain.judges.judging import judge_reply

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


# ---------------------------------------------------------------------------
# Real templates: Llama 3.1 Instruct's and Mistral Instruct's (tests/data/chat_templates, with their sources)
# ---------------------------------------------------------------------------

TEMPLATES = Path(__file__).parent / "data" / "chat_templates"
REAL = {"llama3": "llama3_1.jinja", "mistral": "mistral_instruct_v3.jinja"}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}}


def _real_tokenizer(fmt: str):
    """The kit's tokenizer wearing a real base's chat template (its text is all the parser depends on)."""
    from whileai.kit import build_tokenizer

    tokenizer = build_tokenizer()
    tokenizer.chat_template = (TEMPLATES / REAL[fmt]).read_text(encoding="utf-8")
    return tokenizer


def _rendered_reply(tokenizer, fmt: str) -> str:
    """The assistant's tool-call turn as the template writes it: the conversation with it, less the one without."""
    ask = [{"role": "user", "content": "Weather in Paris for 3 days?"}]
    call = {"id": "abc123XYZ", "type": "function", "function": {"name": "get_weather", "arguments": ARGS}}
    full = tokenizer.apply_chat_template(ask + [{"role": "assistant", "tool_calls": [call]}], tools=[WEATHER],
                                         tokenize=False)
    prefix = tokenizer.apply_chat_template(ask, tools=[WEATHER], tokenize=False, add_generation_prompt=fmt == "llama3")
    assert full.startswith(prefix)
    return full[len(prefix):]


@pytest.mark.parametrize("fmt", sorted(REAL))
def test_a_real_templates_tool_call_parses_back_with_its_format_and_not_as_hermes(fmt):
    from whileai.kit import reply_format, use_tool_format

    tokenizer = _real_tokenizer(fmt)
    info = use_tool_format(tokenizer, "auto")
    assert info["used"] == "native" and info["renders_tools"] and info["parser"] == fmt == reply_format(tokenizer)
    reply = _rendered_reply(tokenizer, fmt)
    assert {"llama3": '"parameters"', "mistral": "[TOOL_CALLS]"}[fmt] in reply, reply
    content, calls = parse_tool_calls(reply, fmt)
    assert len(calls) == 1 and calls[0]["function"]["name"] == "get_weather", reply
    assert json.loads(calls[0]["function"]["arguments"]) == ARGS
    assert content is None, (content, reply)
    assert parse_tool_calls(reply, "hermes")[1] == []  # the hermes-only reading would find no call


def test_the_monitors_gold_row_reads_the_policys_format():
    """HackMonitor's gold judge sees the call a Llama 3.1-templated policy wrote; a hermes-only parse saw none."""
    from whileai.domain.judges.judging import first_action_judge
    from whileai.domain.monitor import HackMonitor
    from whileai.domain.monitor._sampling import gold_row

    tokenizer = _real_tokenizer("llama3")
    reply = _rendered_reply(tokenizer, "llama3")
    assert gold_row("q", reply, {}, [WEATHER], "llama3")["messages"][-1]["tool_calls"]
    assert "tool_calls" not in gold_row("q", reply, {}, [WEATHER])["messages"][-1]
    rows = [{"prompt": [{"role": "user", "content": "Weather in Paris for 3 days?"}], "tools": [WEATHER],
             "gold": json.dumps({"name": "get_weather", "arguments": ARGS})}] * 8
    m = HackMonitor(holdout=rows, proxy=lambda prompts, completions, **kw: [1.0] * len(completions),
                    gold=first_action_judge, k=2, concurrency=1,
                    sample=lambda mo, tok, prompts, n, max_new_tokens: [[reply, "no"]] * len(prompts))
    entry = m.evaluate(step=0, tokenizer=tokenizer)
    assert entry["gold"] == 0.5 and m.summary()["errors"]["gold"] == 0
