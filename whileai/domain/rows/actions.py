"""A rollout's first action, and whether it matches a reference (the first-action judge's core).

An action is ``{"name": str, "arguments": Any}`` for a tool call or
``{"answer": str}`` for a final answer. Tool arguments are compared as parsed
JSON values with JSON's own notion of equality: key order and the spelling of a
number (``1``, ``1.0``, ``1e0``) do not matter, but types do (``true`` is not
``1``, ``"1"`` is not ``1``) and a string is never parsed a second time, so
arguments encoded twice do not equal the object they hide.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "first_action",
    "action_matches",
    "json_equal",
    "normalise_answer",
    "parse_arguments",
    "content_text",
    "canonical_arguments_text",
]

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_SPACE = re.compile(r"\s+")
#: Trailing characters an answer may end with without changing what it says.
_TRAILING = " \t\n.!?;:,。！？"


class _Unparsed(str):
    """Arguments text that is not JSON: kept as text so it can only equal itself."""


def content_text(content: Any) -> str:
    """A message's text: a string as is, content parts joined, None as ''."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping):
                parts.append(str(part.get("text") or ""))
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    return str(content)


def parse_arguments(arguments: Any) -> Any:
    """Tool-call arguments as a JSON value: a string is parsed once; None or blank is ``{}``."""
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            return json.loads(arguments)
        except json.JSONDecodeError:
            return _Unparsed(arguments)
    return arguments


def canonical_arguments_text(arguments: Any) -> str:
    """Arguments as compact JSON (the text that is measured when matching pair lengths)."""
    value = parse_arguments(arguments)
    if isinstance(value, _Unparsed):
        return str(value)
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


def first_action(messages: list[Any]) -> dict[str, Any] | None:
    """The first assistant turn's action: its first tool call, else its answer text; None without one."""
    for m in messages:
        if not isinstance(m, Mapping) or m.get("role") != "assistant":
            continue
        calls = m.get("tool_calls") or []
        if calls:
            call = calls[0] if isinstance(calls[0], Mapping) else {}
            fn = call.get("function", call)
            fn = fn if isinstance(fn, Mapping) else {}
            return {"name": fn.get("name"), "arguments": parse_arguments(fn.get("arguments"))}
        return {"answer": content_text(m.get("content"))}
    return None


def json_equal(a: Any, b: Any) -> bool:
    """Equality of parsed JSON values: numbers by value (bools are not numbers), objects by keys."""
    if isinstance(a, _Unparsed) or isinstance(b, _Unparsed):
        return isinstance(a, _Unparsed) and isinstance(b, _Unparsed) and str(a) == str(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return False


def normalise_answer(text: Any) -> str:
    """An answer compared loosely: reasoning blocks dropped, case folded, spaces collapsed, end punctuation cut."""
    text = _THINK.sub(" ", content_text(text) if not isinstance(text, (int, float)) else str(text))
    return _SPACE.sub(" ", text).strip().rstrip(_TRAILING).strip().casefold()


def _describe_difference(got: Any, want: Any) -> str:
    if isinstance(got, Mapping) and isinstance(want, Mapping):
        extra = sorted(map(str, got.keys() - want.keys()))
        missing = sorted(map(str, want.keys() - got.keys()))
        changed = sorted(str(k) for k in got.keys() & want.keys() if not json_equal(got[k], want[k]))
        parts = [f"{label} {names}" for label, names in (("extra", extra), ("missing", missing), ("different", changed)) if names]
        return "arguments differ: " + "; ".join(parts)
    if isinstance(got, str) and not isinstance(got, _Unparsed):
        return "arguments are a JSON string, not an object (encoded twice?)"
    if isinstance(got, _Unparsed):
        return "arguments are not valid JSON"
    return f"arguments are a JSON {type(got).__name__}, expected {type(want).__name__}"


def action_matches(action: Mapping[str, Any] | None, gold: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether ``action`` (from ``first_action``) matches ``gold``, and a short reason."""
    if not isinstance(gold, Mapping) or not ("answer" in gold or "name" in gold):
        raise ValueError(
            f"gold={gold!r} is not a reference action; use {{'name': tool, 'arguments': {{...}}}} "
            "or {'answer': text}"
        )
    if action is None:
        return False, "no assistant turn"
    if "answer" in gold:
        if "answer" not in action:
            return False, f"expected a final answer, got a call to {action.get('name')!r}"
        ok = normalise_answer(action["answer"]) == normalise_answer(gold["answer"])
        return ok, "match" if ok else "answer differs"
    if "name" not in action:
        return False, f"expected a call to {gold['name']!r}, got a final answer"
    if action["name"] != gold["name"]:
        return False, f"wrong tool: {action['name']!r}, expected {gold['name']!r}"
    got, want = action["arguments"], parse_arguments(gold.get("arguments"))
    if json_equal(got, want):
        return True, "match"
    return False, _describe_difference(got, want)
