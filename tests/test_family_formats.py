"""The llama3 and mistral parsers against text each family's own reference code renders, not text we wrote.

- Llama 3 and 4: Meta's ``llama-models`` package (its ChatFormats and the Llama 3 and Llama 4 tokenizer files
  it ships) writes an assistant turn with tool calls in each of its three custom-tool formats (``json``, Llama
  3.1's; ``function_tag``; ``python_list``, Llama 3.2+'s zero-shot style); our ``llama3`` parser reads the same
  calls back from each, and Meta's own decoder reads the call our ``format_tool_call(..., "llama3")`` writes.
- Mistral: Mistral's ``mistral-common`` package writes ``[TOOL_CALLS]...`` with its v3 instruct tokenizer over
  the tekken file it ships, and with its v11 and v13 tokenizers (v7 writes calls as v3 does, by the same code,
  and its shipped file needs sentencepiece, which the test extras do not install); our ``mistral`` parser reads
  the same calls back, and ours writes v3's list less the call ids (which only link a tool's result back to its
  call).

The package ships no v11 or v13 tokenizer file, so those two run Mistral's own v11/v13 instruct tokenizers over
its shipped tekken vocabulary with the control tokens those versions add (``[ARGS]``, ``[CALL_ID]``) placed as
in Mistral Small 3.1's file: the text is Mistral's code's, the token ids are not a real model's.
"""

from __future__ import annotations

import json
import os

import pytest

from whileai.core.toolcalls import format_tool_call, parse_tool_calls

CALLS = [("get_weather", {"city": "Paris", "units": "celsius"}), ("get_time", {"tz": "CET", "hours": [1, 2]})]


def _ours(calls: list[dict]) -> list[tuple[str, dict]]:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]


def _meta_turn(calls: list[tuple[str, dict]]):
    """An assistant turn with ``calls`` in llama-models' own message type (its chat formats write it)."""
    from llama_models.datatypes import RawMessage, StopReason, ToolCall

    return RawMessage(role="assistant", content="", stop_reason=StopReason.end_of_turn,
                      tool_calls=[ToolCall(call_id=str(i), tool_name=name, arguments=args)
                                  for i, (name, args) in enumerate(calls)])


@pytest.fixture(scope="module")
def meta():
    """Meta's reference chat format for Llama 3 over the tokenizer file llama-models ships (nothing downloaded)."""
    chat_format = pytest.importorskip("llama_models.llama3.chat_format")
    from llama_models.datatypes import StopReason, ToolPromptFormat
    from llama_models.llama3.tokenizer import Tokenizer

    tokenizer = Tokenizer.get_instance()
    fmt = chat_format.ChatFormat(tokenizer)

    def render(calls: list[tuple[str, dict]], style: str = "json") -> str:
        message = _meta_turn(calls)
        tokens, _ = fmt.encode_message(message, ToolPromptFormat(style))
        text = tokenizer.decode(tokens)
        header = "<|start_header_id|>assistant<|end_header_id|>\n\n"
        assert text.startswith(header), text
        return text[len(header):]

    return {"render": render, "decode": fmt.decode_assistant_message_from_content, "StopReason": StopReason}


#: what each of Meta's custom-tool formats writes for a call, before the end of turn
_META_STYLES = {"json": '{"type": "function", "name": "get_weather", "parameters": {',
                "function_tag": '<function=get_weather>{"city": "Paris"',
                "python_list": '[get_weather(city="Paris", units="celsius")]'}


@pytest.mark.parametrize("style", sorted(_META_STYLES))
@pytest.mark.parametrize("n", [1, 2])
def test_the_llama3_parser_reads_each_of_metas_tool_formats(meta, style, n):
    text = meta["render"](CALLS[:n], style)
    assert text.startswith(_META_STYLES[style]) and text.endswith("<|eot_id|>"), text
    content, calls = parse_tool_calls(text, "llama3")
    assert _ours(calls) == CALLS[:n], text
    assert content is None, content
    if n == 1:  # Meta's own decoder reads one call back the same (it reads only the first of several)
        message = meta["decode"](text.removesuffix("<|eot_id|>"), meta["StopReason"].end_of_turn)
        assert [(c.tool_name, c.arguments) for c in message.tool_calls] == CALLS[:1]


@pytest.fixture(scope="module")
def meta4():
    """Meta's reference chat format for Llama 4 over the tokenizer file llama-models ships. Its module imports an
    image preprocessor that needs torchvision (not installed here); the text path never touches it, so that one
    module is stood in for with placeholders before the import."""
    pytest.importorskip("llama_models")
    import sys
    import types

    if "llama_models.llama4.preprocess" not in sys.modules:
        try:
            import torchvision  # noqa: F401
        except ImportError:
            stub = types.ModuleType("llama_models.llama4.preprocess")
            stub.ResizeNormalizeImageTransform = stub.VariableSizeImageTransform = object  # type: ignore[attr-defined]
            sys.modules["llama_models.llama4.preprocess"] = stub
    from llama_models.datatypes import ToolPromptFormat
    from llama_models.llama4.chat_format import ChatFormat
    from llama_models.llama4.tokenizer import Tokenizer

    tokenizer = Tokenizer.get_instance()
    fmt = ChatFormat(tokenizer)

    def render(calls: list[tuple[str, dict]], style: str) -> str:
        message = _meta_turn(calls)
        text = tokenizer.decode(fmt.encode_message(message, ToolPromptFormat(style))[0])
        header = "<|header_start|>assistant<|header_end|>\n\n"
        assert text.startswith(header), text
        return text[len(header):]

    return render


@pytest.mark.parametrize("style", sorted(_META_STYLES))
@pytest.mark.parametrize("n", [1, 2])
def test_the_llama3_parser_reads_llama_4s_calls(meta4, style, n):
    text = meta4(CALLS[:n], style)
    assert text.startswith(_META_STYLES[style]) and text.endswith("<|eom|>"), text  # Llama 4's end of message
    content, calls = parse_tool_calls(text, "llama3")
    assert _ours(calls) == CALLS[:n], text
    assert content is None, content
    assert parse_tool_calls(f"<|python_start|>{text.removesuffix('<|eom|>')}<|python_end|>", "llama3") == (
        None, parse_tool_calls(text, "llama3")[1])  # its code-interpreter wrapper reads the same


@pytest.mark.parametrize("text", [
    "[1, 2] are the first two",                      # a list in prose
    '[get_weather("Paris")]',                        # a positional argument: not Meta's keyword form
    '[get_weather(city=open("/etc/passwd").read())]',  # a value that is not a literal is never evaluated
    '[get_weather(city="Paris")] and more text',     # text beside the list
    '<function=get_weather>{"city": </function>',    # a function tag whose arguments are not JSON
])
def test_llama3_text_that_is_not_a_whole_call_stays_content(text):
    assert parse_tool_calls(text, "llama3") == (text, [])


def test_metas_decoder_reads_the_llama3_call_we_write(meta):
    name, args = CALLS[0]
    for stop, text in ((meta["StopReason"].end_of_turn, format_tool_call(name, args, "llama3")),
                       (meta["StopReason"].end_of_message, "<|python_tag|>" + format_tool_call(name, args, "llama3"))):
        message = meta["decode"](text, stop)
        assert [(c.tool_name, c.arguments) for c in message.tool_calls] == [(name, args)], (text, message)


def _tekken_file(folder, version: str) -> str:
    """The tekken vocabulary mistral-common ships, as a ``version`` file: v11 and v13 need their control tokens listed
    (``[ARGS]`` at 32 and ``[CALL_ID]`` at 33, after the 20 older ones, as in Mistral Small 3.1's tekken.json)."""
    import mistral_common
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    with open(os.path.join(os.path.dirname(mistral_common.__file__), "data", "tekken_240911.json")) as f:
        data = json.load(f)
    specials = [dict(t, token_str=str(getattr(t["token_str"], "value", t["token_str"])))
                for t in Tekkenizer.DEPRECATED_SPECIAL_TOKENS]
    specials += [{"rank": i, "token_str": f"<SPECIAL_{i}>", "is_control": True} for i in range(len(specials), 32)]
    specials += [{"rank": 32, "token_str": "[ARGS]", "is_control": True},
                 {"rank": 33, "token_str": "[CALL_ID]", "is_control": True}]
    data["special_tokens"], data["config"]["version"] = specials, version
    path = folder / version / "tekken.json"  # mistral-common knows a tokenizer file by its name
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    return str(path)


@pytest.fixture(scope="module")
def mistral(tmp_path_factory):
    """Mistral's instruct tokenizers, v3 to v13, over files mistral-common ships (nothing downloaded)."""
    common = pytest.importorskip("mistral_common")
    from mistral_common.protocol.instruct.messages import AssistantMessage, UserMessage
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.protocol.instruct.tool_calls import Function, FunctionCall, Tool, ToolCall
    from mistral_common.protocol.instruct.validator import ValidationMode
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    shipped = os.path.join(os.path.dirname(common.__file__), "data")
    folder = tmp_path_factory.mktemp("mistral")
    files = {"v3": os.path.join(shipped, "tekken_240718.json"),
             "v11": _tekken_file(folder, "v11"), "v13": _tekken_file(folder, "v13")}
    tokenizers: dict[str, MistralTokenizer] = {}

    def render(calls: list[tuple[str, dict]], version: str = "v3") -> str:
        if version not in tokenizers:
            tokenizers[version] = MistralTokenizer.from_file(files[version], mode=ValidationMode.finetuning)
        tokenizer = tokenizers[version]
        assert tokenizer.instruct_tokenizer.tokenizer.version.value == version
        request = ChatCompletionRequest(
            messages=[UserMessage(content="Weather and time in Paris?"),
                      AssistantMessage(tool_calls=[ToolCall(id=f"call{i:05d}", function=FunctionCall(
                          name=name, arguments=json.dumps(args))) for i, (name, args) in enumerate(calls)])],
            tools=[Tool(function=Function(name=name, description=name, parameters={"type": "object", "properties": {
                k: {"type": "string"} for k in args}})) for name, args in calls])
        text = tokenizer.encode_chat_completion(request).text
        return text[text.rindex("[/INST]") + len("[/INST]"):].strip()

    return render


#: how each tokenizer version writes the first call
_MISTRAL_STARTS = {"v3": '[TOOL_CALLS][{"name": "get_weather"',
                   "v11": "[TOOL_CALLS]get_weather[CALL_ID]call00000[ARGS]{", "v13": "[TOOL_CALLS]get_weather[ARGS]{"}


@pytest.mark.parametrize("version", sorted(_MISTRAL_STARTS))
@pytest.mark.parametrize("n", [1, 2])
def test_the_mistral_parser_reads_each_tokenizer_versions_calls(mistral, version, n):
    text = mistral(CALLS[:n], version)
    assert text.startswith(_MISTRAL_STARTS[version]) and text.endswith("</s>"), text
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
