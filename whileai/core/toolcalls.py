"""Generated text back to OpenAI wire tool calls, one parser per tool-call format.

A format is the way a chat template writes a call into the assistant's text:

- ``hermes`` (the kit's template, Qwen2.5/Qwen3, Hermes 2 Pro, and whileai's own
  ``hermes`` convention for bases whose template drops tools):
  ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``;
- ``llama3`` (Llama 3.1-3.3): a bare JSON object ``{"name": ..., "parameters": {...}}``,
  optionally after ``<|python_tag|>``, several separated by ``;``; and the two other custom-tool
  styles of Meta's reference code (``llama-models``' ToolPromptFormat): ``function_tag``,
  ``<function=name>{...}</function>``, and ``python_list``, a whole reply that is a Python list of
  keyword-argument calls, ``[name(a=1, b="x")]`` (Llama 3.2+ zero-shot); Llama 4 writes the same
  three between ``<|python_start|>`` and ``<|python_end|>``;
- ``mistral`` (Mistral's tokenizers): ``[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`` (v3, v7),
  ``[TOOL_CALLS]name[CALL_ID]id[ARGS]{...}`` (v11) and ``[TOOL_CALLS]name[ARGS]{...}`` (v13), one
  ``[TOOL_CALLS]`` a call; the call ids are dropped (they only link a tool's result back to its call).

``parse_tool_calls(text, tool_format)`` reads calls out of a model's reply; it
never raises: text that does not parse stays in the content, so nothing the
model wrote is lost. ``template_tool_format`` names the format a chat template
writes, from its markers.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["TOOL_FORMATS", "CALL_MARKERS", "ParsedCall", "format_tool_call", "parse_tool_calls", "parse_tool_call_objects",
           "template_tool_format"]

#: The formats with a parser here; ``hermes`` is the default everywhere a format is not named.
TOOL_FORMATS = ("hermes", "llama3", "mistral")
#: Where a call may begin in each format: a streamed reply holds its text back from the first of them on until it
#: is parsed (llama3's three: its JSON object, Meta's python_list and its function_tag).
CALL_MARKERS: dict[str, tuple[str, ...]] = {
    "hermes": ("<tool_call>",), "llama3": ("{", "[", "<function="), "mistral": ("[TOOL_CALLS]",)}


class ParsedCall(NamedTuple):
    """One call read out of a reply: its function's name and its arguments (a tuple, so ``name, args = call`` reads it)."""

    name: str
    arguments: dict[str, Any]  # the model's own JSON object: its keys are whatever the call names


_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
#: Control tokens a decode without skip_special_tokens leaves in the text.
_CONTROL = re.compile(r"<\|(?:im_end|im_start|endoftext|pad|eot_id|eom_id|end_of_text|eot|eom|python_end)\|>|</s>")


def _parse_block(body: str) -> ParsedCall | None:
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
    return ParsedCall(name.strip(), args)


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


def parse_tool_call_objects(text: str | None, tool_format: str = "hermes") -> tuple[str | None, list[ParsedCall]]:
    """``parse_tool_calls`` with each call as ``(name, arguments dict)`` (a ``ParsedCall``): the same parse, no JSON
    text made.

    An unknown ``tool_format`` raises ValueError naming the accepted ones (a
    configuration error, not a model's output).
    """
    parser = _PARSERS.get(tool_format)
    if parser is None:
        raise ValueError(f"tool_format={tool_format!r} has no parser; accepted: {', '.join(TOOL_FORMATS)}")
    if not isinstance(text, str):
        return None, []
    return parser(_CONTROL.sub("", text))


def _blocks(text: str, pattern: re.Pattern[str], read: Callable[[re.Match[str]], ParsedCall | None],
            ) -> tuple[str | None, list[ParsedCall]]:
    """Each match of ``pattern`` that ``read`` makes a call of becomes one; the text around them (and every match
    it could not read) stays the content."""
    calls: list[ParsedCall] = []
    kept: list[str] = []
    pos = 0
    for match in pattern.finditer(text):
        parsed = read(match)
        if parsed is None:
            continue
        kept.append(text[pos : match.start()])
        pos = match.end()
        calls.append(parsed)
    kept.append(text[pos:])
    content = "".join(kept).strip()
    return (content or None), calls


def _parse_hermes(text: str) -> tuple[str | None, list[ParsedCall]]:
    """``<tool_call>{json}</tool_call>`` blocks (the last may be unterminated)."""
    return _blocks(text, _BLOCK, lambda match: _parse_block(match.group(1)))


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


#: what opens a Llama tool call: Llama 3's tag, and Llama 4's (closed by <|python_end|>, a control token here)
_PYTHON_TAGS = ("<|python_tag|>", "<|python_start|>")


def _parse_llama3(text: str) -> tuple[str | None, list[ParsedCall]]:
    """Llama 3.1's JSON calls: ``{"name": ..., "parameters": {...}}`` (after ``<|python_tag|>`` or alone); failing
    those, Meta's function_tag and python_list styles."""
    head, body = "", text
    for marker in _PYTHON_TAGS:
        tag = text.find(marker)
        if tag >= 0:
            head, body = text[:tag], text[tag + len(marker):]
            break
    start = len(body) - len(body.lstrip())
    values = _json_values(body, start)
    calls: list[ParsedCall] = []
    end = start
    for _, stop, value in values:
        objects = value if isinstance(value, list) else [value]
        parsed = [_call_object(obj) for obj in objects]
        if not parsed or any(p is None for p in parsed):
            break
        calls.extend(p for p in parsed if p is not None)
        end = stop
    if not calls:
        listed = _parse_python_list(body)
        if listed is not None:
            return (head.strip() or None), listed
        return _parse_function_tags(head + body) or ((text.strip() or None), [])
    content = (head + body[end:]).strip()
    return (content or None), calls


_FUNCTION_TAG = re.compile(r"<function=([^>\s]+)>(.*?)</function>", re.DOTALL)


def _function_tag(match: re.Match[str]) -> ParsedCall | None:
    try:
        args = json.loads(match.group(2).strip() or "{}")
    except (ValueError, RecursionError):
        return None
    return ParsedCall(match.group(1), args) if isinstance(args, dict) else None


def _parse_function_tags(text: str) -> tuple[str | None, list[ParsedCall]] | None:
    """Meta's ``function_tag`` calls, ``<function=name>{json}</function>``; None when the text holds none."""
    content, calls = _blocks(text, _FUNCTION_TAG, _function_tag)
    return (content, calls) if calls else None


def _dotted_name(node: ast.expr) -> str | None:
    """``f`` or ``math.hypot`` (BFCL's functions are often dotted), else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted_name(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def _bracket_lists(source: str) -> list[str] | None:
    """``source`` cut into its top-level ``[...]`` groups (quotes respected); None when text lies outside them."""
    groups: list[str] = []
    depth, start, quote, i = 0, 0, "", 0
    while i < len(source):
        ch = source[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "[":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                return None
            if depth == 0:
                groups.append(source[start:i + 1])
        elif depth == 0 and not ch.isspace():
            return None
        i += 1
    return groups if depth == 0 and not quote and groups else None


def _python_calls(source: str) -> list[ParsedCall] | None:
    """One ``[name(a=1), ...]`` list's calls, or None when it is not a list of keyword calls with literal values."""
    try:
        tree = ast.parse(source, mode="eval")
        if not isinstance(tree.body, ast.List) or not tree.body.elts:
            return None
        calls: list[ParsedCall] = []
        for node in tree.body.elts:
            if not isinstance(node, ast.Call) or node.args:
                return None
            name = _dotted_name(node.func)
            if name is None or any(k.arg is None for k in node.keywords):
                return None
            calls.append(ParsedCall(name, {str(k.arg): ast.literal_eval(k.value) for k in node.keywords}))
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None
    return calls


def _parse_python_list(body: str) -> list[ParsedCall] | None:
    """Meta's ``python_list`` calls: the whole reply one or more lists of keyword-argument calls with literal values.

    Meta's encoder writes each call as its own list (``[a(x=1)][b(y=2)]``); one
    list of several calls reads the same. Read with ``ast`` and
    ``ast.literal_eval``, never evaluated; anything else in the reply (a
    positional argument, a value that is not a literal, text around the lists)
    leaves it all as content. None when the reply is not such lists.
    """
    groups = _bracket_lists(body.strip())
    if groups is None:
        return None
    calls: list[ParsedCall] = []
    for group in groups:
        found = _python_calls(group)
        if found is None:
            return None
        calls.extend(found)
    return calls


def _parse_mistral(text: str) -> tuple[str | None, list[ParsedCall]]:
    """Mistral's ``[TOOL_CALLS][{...}, ...]`` (v3), ``[TOOL_CALLS]name[CALL_ID]id[ARGS]{...}`` (v11) and
    ``[TOOL_CALLS]name[ARGS]{...}`` (v13) calls."""
    marker = text.find("[TOOL_CALLS]")
    if marker < 0:
        return (text.strip() or None), []
    head, body = text[:marker], text[marker + len("[TOOL_CALLS]"):]
    calls: list[ParsedCall] = []
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
            name = name.partition("[CALL_ID]")[0]  # v11 writes the call's id between its name and [ARGS]
            found = _json_values(args_text, 0) if sep else []
            if not found or not isinstance(found[0][2], dict) or not name.strip():
                break
            calls.append(ParsedCall(name.strip(), found[0][2]))
            rest = args_text[found[0][1]:]
    if not calls:
        return (text.strip() or None), []
    content = (head + rest).strip()
    return (content or None), calls


def _call_object(obj: Any) -> ParsedCall | None:
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
