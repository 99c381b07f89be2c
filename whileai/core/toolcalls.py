"""Generated text back to OpenAI wire tool calls, one parser per tool-call format.

A format is the way a chat template writes a call into the assistant's text:

- ``hermes`` (the kit's template, Qwen2.5/Qwen3, Hermes 2 Pro, and whileai's own
  ``hermes`` convention for bases whose template drops tools):
  ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``;
- ``llama3`` (Llama 3.1-3.3): a bare JSON object ``{"name": ..., "parameters": {...}}``,
  optionally after ``<|python_tag|>``, several separated by ``;``;
- ``mistral`` (Mistral's v3 tokenizer templates): ``[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]``.

``parse_tool_calls(text, tool_format)`` reads calls out of a model's reply; it
never raises: text that does not parse stays in the content, so nothing the
model wrote is lost. ``template_tool_format`` names the format a chat template
writes, from its markers.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["TOOL_FORMATS", "CALL_MARKERS", "format_tool_call", "parse_tool_calls", "parse_tool_call_objects", "template_tool_format"]

#: The formats with a parser here; ``hermes`` is the default everywhere a format is not named.
TOOL_FORMATS = ("hermes", "llama3", "mistral")
#: Where a call may begin in each format: a streamed reply holds its text back from here on until it is parsed.
CALL_MARKERS = {"hermes": "<tool_call>", "llama3": "{", "mistral": "[TOOL_CALLS]"}

_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
#: Control tokens a decode without skip_special_tokens leaves in the text.
_CONTROL = re.compile(r"<\|(?:im_end|im_start|endoftext|pad|eot_id|eom_id|end_of_text)\|>|</s>")


def _parse_block(body: str) -> tuple[str, dict[str, Any]] | None:
    try:
        obj = json.loads(body.strip())
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    name = obj.get("name")
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except (ValueError, RecursionError):
            return None
    if args is None:
        args = {}
    if not isinstance(name, str) or not name.strip() or not isinstance(args, dict):
        return None
    return name.strip(), args


def parse_tool_calls(text: str | None, tool_format: str = "hermes") -> tuple[str | None, list[dict[str, Any]]]:
    """Split generated text into ``(content, tool_calls)`` in OpenAI wire shape.

    Each call written in ``tool_format`` (TOOL_FORMATS; an unterminated last
    ``<tool_call>`` block too) holding a name and an arguments object becomes
    ``{"id": "call_<i>", "type": "function", "function": {"name", "arguments":
    <JSON string>}}``. Text that is not such a call stays in the content.
    Content is the remaining text, stripped, or None when nothing is left.
    Never raises.

    >>> parse_tool_calls('<tool_call>{"name": "set_timer", "arguments": {"minutes": 5}}</tool_call>')
    (None, [{'id': 'call_0', 'type': 'function', 'function': {'name': 'set_timer', 'arguments': '{"minutes": 5}'}}])
    """
    content, parsed = parse_tool_call_objects(text, tool_format)
    calls = [
        {"id": f"call_{i}", "type": "function",
         "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}
        for i, (name, args) in enumerate(parsed)
    ]
    return content, calls


def parse_tool_call_objects(text: str | None, tool_format: str = "hermes") -> tuple[str | None, list[tuple[str, dict[str, Any]]]]:
    """``parse_tool_calls`` with each call as ``(name, arguments dict)``: the same parse, no JSON text made.

    An unknown ``tool_format`` raises ValueError naming the accepted ones (a
    configuration error, not a model's output).
    """
    parser = _PARSERS.get(tool_format)
    if parser is None:
        raise ValueError(f"tool_format={tool_format!r} has no parser; accepted: {', '.join(TOOL_FORMATS)}")
    if not isinstance(text, str):
        return None, []
    return parser(_CONTROL.sub("", text))


def _parse_hermes(text: str) -> tuple[str | None, list[tuple[str, dict[str, Any]]]]:
    """``<tool_call>{json}</tool_call>`` blocks (the last may be unterminated)."""
    calls: list[tuple[str, dict[str, Any]]] = []
    kept: list[str] = []
    pos = 0
    for match in _BLOCK.finditer(text):
        parsed = _parse_block(match.group(1))
        if parsed is None:
            continue
        kept.append(text[pos : match.start()])
        pos = match.end()
        calls.append(parsed)
    kept.append(text[pos:])
    content = "".join(kept).strip()
    return (content or None), calls


_DECODER = json.JSONDecoder()


def _json_values(text: str, start: int) -> list[tuple[int, int, Any]]:
    """``(start, end, value)`` of each JSON value written at ``start`` and after, separated by ``;`` or ``,``."""
    found: list[tuple[int, int, Any]] = []
    pos = start
    while True:
        while pos < len(text) and text[pos] in " \t\r\n;,":
            pos += 1
        if pos >= len(text) or text[pos] not in "[{":
            return found
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):
            return found
        found.append((pos, end, value))
        pos = end


def _parse_llama3(text: str) -> tuple[str | None, list[tuple[str, dict[str, Any]]]]:
    """Llama 3.1's JSON calls: ``{"name": ..., "parameters": {...}}`` (after ``<|python_tag|>`` or alone)."""
    tag = text.find("<|python_tag|>")
    head, body = (text[:tag], text[tag + len("<|python_tag|>"):]) if tag >= 0 else ("", text)
    start = len(body) - len(body.lstrip())
    values = _json_values(body, start)
    calls: list[tuple[str, dict[str, Any]]] = []
    end = start
    for _, stop, value in values:
        objects = value if isinstance(value, list) else [value]
        parsed = [_call_object(obj) for obj in objects]
        if not parsed or any(p is None for p in parsed):
            break
        calls.extend(p for p in parsed if p is not None)
        end = stop
    if not calls:
        return (text.strip() or None), []
    content = (head + body[end:]).strip()
    return (content or None), calls


def _parse_mistral(text: str) -> tuple[str | None, list[tuple[str, dict[str, Any]]]]:
    """Mistral's ``[TOOL_CALLS][{...}, ...]`` (v3) and ``[TOOL_CALLS]name[ARGS]{...}`` (v11) calls."""
    marker = text.find("[TOOL_CALLS]")
    if marker < 0:
        return (text.strip() or None), []
    head, body = text[:marker], text[marker + len("[TOOL_CALLS]"):]
    calls: list[tuple[str, dict[str, Any]]] = []
    rest = body
    values = _json_values(body, 0)
    if values and isinstance(values[0][2], list):
        parsed = [_call_object(obj) for obj in values[0][2]]
        if parsed and all(p is not None for p in parsed):
            calls = [p for p in parsed if p is not None]
            rest = body[values[0][1]:]
    else:
        for chunk in body.split("[TOOL_CALLS]"):
            name, sep, args_text = chunk.partition("[ARGS]")
            found = _json_values(args_text, 0) if sep else []
            if not found or not isinstance(found[0][2], dict) or not name.strip():
                break
            calls.append((name.strip(), found[0][2]))
            rest = args_text[found[0][1]:]
    if not calls:
        return (text.strip() or None), []
    content = (head + rest).strip()
    return (content or None), calls


def _call_object(obj: Any) -> tuple[str, dict[str, Any]] | None:
    if not isinstance(obj, dict):
        return None
    return _parse_block(json.dumps(obj))


_PARSERS = {"hermes": _parse_hermes, "llama3": _parse_llama3, "mistral": _parse_mistral}


def template_tool_format(chat_template: str | None) -> str:
    """The format a chat template writes calls in, from its markers; ``hermes`` when it shows none.

    >>> template_tool_format("{{- '[TOOL_CALLS]' + calls | tojson }}")
    'mistral'
    """
    text = chat_template or ""
    if "[TOOL_CALLS]" in text:
        return "mistral"
    if "<tool_call>" in text:
        return "hermes"
    if "<|python_tag|>" in text or "ipython" in text:
        return "llama3"
    return "hermes"


def format_tool_call(name: str, arguments: dict[str, Any] | str, tool_format: str = "hermes") -> str:
    """The text a chat template in ``tool_format`` writes for one call (what the model learns to write)."""
    if isinstance(arguments, str):
        arguments = json.loads(arguments)
    if tool_format == "llama3":
        return json.dumps({"name": name, "parameters": arguments}, ensure_ascii=False)
    if tool_format == "mistral":
        return "[TOOL_CALLS]" + json.dumps([{"name": name, "arguments": arguments}], ensure_ascii=False)
    return (
        "<tool_call>"
        + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
        + "</tool_call>"
    )
