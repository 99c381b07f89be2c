"""The llama3 and mistral parsers against text each family's own reference code renders, not text we wrote.

- Llama 3.1: Meta's ``llama-models`` package (its ChatFormat and the Llama 3 tokenizer file it ships) writes an
  assistant turn with tool calls in its JSON tool format; our ``llama3`` parser reads the same calls back, and
  Meta's own decoder reads the call our ``format_tool_call(..., "llama3")`` writes.
- Mistral: Mistral's ``mistral-common`` package (its v3 instruct tokenizer over the tekken file it ships) writes
  ``[TOOL_CALLS][...]``; our ``mistral`` parser reads the same calls back, and ours writes the same list less
  the call ids (which only link a tool's result back to its call).

Not covered, because no family package renders them here: Meta's ``python_list`` and ``function_tag`` tool
formats (Llama 3.2+/4 zero-shot styles, which our llama3 parser does not read) and Mistral's v11
``[TOOL_CALLS]name[ARGS]{...}`` (its tokenizer files are not in the package; the parser's test text for it is ours).
"""

from __future__ import annotations

import json
import os

import pytest

from whileai.core.toolcalls import format_tool_call, parse_tool_calls

CALLS = [("get_weather", {"city": "Paris", "units": "celsius"}), ("get_time", {"tz": "CET", "hours": [1, 2]})]


def _ours(calls: list[dict]) -> list[tuple[str, dict]]:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]


@pytest.fixture(scope="module")
def meta():
    """Meta's reference chat format for Llama 3 over the tokenizer file llama-models ships (nothing downloaded)."""
    chat_format = pytest.importorskip("llama_models.llama3.chat_format")
    from llama_models.datatypes import RawMessage, StopReason, ToolCall, ToolPromptFormat
    from llama_models.llama3.tokenizer import Tokenizer

    tokenizer = Tokenizer.get_instance()
    fmt = chat_format.ChatFormat(tokenizer)

    def render(calls: list[tuple[str, dict]]) -> str:
        message = RawMessage(role="assistant", content="", stop_reason=StopReason.end_of_turn,
                             tool_calls=[ToolCall(call_id=str(i), tool_name=name, arguments=args)
                                         for i, (name, args) in enumerate(calls)])
        tokens, _ = fmt.encode_message(message, ToolPromptFormat.json)
        text = tokenizer.decode(tokens)
        header = "<|start_header_id|>assistant<|end_header_id|>\n\n"
        assert text.startswith(header), text
        return text[len(header):]

    return {"render": render, "decode": fmt.decode_assistant_message_from_content, "StopReason": StopReason}


@pytest.mark.parametrize("n", [1, 2])
def test_the_llama3_parser_reads_what_metas_chat_format_writes(meta, n):
    text = meta["render"](CALLS[:n])
    assert text.endswith("<|eot_id|>") and '"parameters"' in text  # Llama 3.1's JSON tool format, end of turn
    content, calls = parse_tool_calls(text, "llama3")
    assert _ours(calls) == CALLS[:n], text
    assert content is None, content


def test_metas_decoder_reads_the_llama3_call_we_write(meta):
    name, args = CALLS[0]
    for stop, text in ((meta["StopReason"].end_of_turn, format_tool_call(name, args, "llama3")),
                       (meta["StopReason"].end_of_message, "<|python_tag|>" + format_tool_call(name, args, "llama3"))):
        message = meta["decode"](text, stop)
        assert [(c.tool_name, c.arguments) for c in message.tool_calls] == [(name, args)], (text, message)


@pytest.fixture(scope="module")
def mistral():
    """Mistral's v3 instruct tokenizer over the tekken file mistral-common ships (nothing downloaded)."""
    common = pytest.importorskip("mistral_common")
    from mistral_common.protocol.instruct.messages import AssistantMessage, UserMessage
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.protocol.instruct.tool_calls import Function, FunctionCall, Tool, ToolCall
    from mistral_common.protocol.instruct.validator import ValidationMode
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    tokenizer = MistralTokenizer.from_file(os.path.join(os.path.dirname(common.__file__), "data", "tekken_240718.json"),
                                           mode=ValidationMode.finetuning)
    assert tokenizer.instruct_tokenizer.tokenizer.version.value == "v3"

    def render(calls: list[tuple[str, dict]]) -> str:
        request = ChatCompletionRequest(
            messages=[UserMessage(content="Weather and time in Paris?"),
                      AssistantMessage(tool_calls=[ToolCall(id=f"call{i:05d}", function=FunctionCall(
                          name=name, arguments=json.dumps(args))) for i, (name, args) in enumerate(calls)])],
            tools=[Tool(function=Function(name=name, description=name, parameters={"type": "object", "properties": {
                k: {"type": "string"} for k in args}})) for name, args in calls])
        text = tokenizer.encode_chat_completion(request).text
        return text[text.rindex("[/INST]") + len("[/INST]"):]

    return render


@pytest.mark.parametrize("n", [1, 2])
def test_the_mistral_parser_reads_what_mistral_common_writes(mistral, n):
    text = mistral(CALLS[:n])
    assert text.startswith("[TOOL_CALLS][") and text.endswith("</s>"), text
    content, calls = parse_tool_calls(text, "mistral")
    assert _ours(calls) == CALLS[:n], text
    assert content is None, content


def test_the_mistral_call_we_write_is_mistral_commons_less_the_id(mistral):
    theirs = mistral(CALLS[:1])
    body = json.loads(theirs.removeprefix("[TOOL_CALLS]").removesuffix("</s>"))
    for call in body:
        call.pop("id")
    ours = format_tool_call(*CALLS[0], tool_format="mistral")
    assert json.loads(ours.removeprefix("[TOOL_CALLS]")) == body
