"""Generated text back to OpenAI wire tool calls.

The kit's chat template renders a call as
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``; ``parse_tool_calls``
reads such blocks out of a model's reply. It never raises: a block that does not
parse stays in the content, so nothing the model wrote is lost.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["format_tool_call", "parse_tool_calls", "parse_tool_call_objects"]

_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
#: Control tokens a decode without skip_special_tokens leaves in the text.
_CONTROL = re.compile(r"<\|(?:im_end|im_start|endoftext|pad)\|>")


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


def parse_tool_calls(text: str | None) -> tuple[str | None, list[dict[str, Any]]]:
    """Split generated text into ``(content, tool_calls)`` in OpenAI wire shape.

    Each ``<tool_call>`` block holding ``{"name": str, "arguments": object}`` (an
    unterminated last block too) becomes ``{"id": "call_<i>", "type": "function",
    "function": {"name", "arguments": <JSON string>}}``. Blocks that are not
    such JSON stay in the content. Content is the remaining text, stripped, or
    None when nothing is left. Never raises.

    >>> parse_tool_calls('<tool_call>{"name": "set_timer", "arguments": {"minutes": 5}}</tool_call>')
    (None, [{'id': 'call_0', 'type': 'function', 'function': {'name': 'set_timer', 'arguments': '{"minutes": 5}'}}])
    """
    content, parsed = parse_tool_call_objects(text)
    calls = [
        {"id": f"call_{i}", "type": "function",
         "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}
        for i, (name, args) in enumerate(parsed)
    ]
    return content, calls


def parse_tool_call_objects(text: str | None) -> tuple[str | None, list[tuple[str, dict[str, Any]]]]:
    """``parse_tool_calls`` with each call as ``(name, arguments dict)``: the same parse, no JSON text made."""
    if not isinstance(text, str):
        return None, []
    text = _CONTROL.sub("", text)
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


def format_tool_call(name: str, arguments: dict[str, Any] | str) -> str:
    """The text the chat template renders for one call (what the model learns to write)."""
    if isinstance(arguments, str):
        arguments = json.loads(arguments)
    return (
        "<tool_call>"
        + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
        + "</tool_call>"
    )
