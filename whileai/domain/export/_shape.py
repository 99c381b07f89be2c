"""Turning rollout rows into training rows: think stripping, tool-output caps, loss masks, unrolling, TRL shapes.

Everything here works on rows that already passed ``rows.row_problems``; the
public entry points and their reports are in export/__init__.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from whileai.domain.rows.jsonl import dumps, loads
from whileai.core.defaults import EXPORT_MASK_MODES as MASK_MODES
from whileai.domain.rows.rollouts import prompt_hash

#: The marker appended to a cut tool output; ``{n}`` is the number of characters cut.
TRUNCATION_MARKER = "[... {n} chars of tool output truncated]"

_THINK_BLOCK = re.compile(r"<think>.*?</think>\s*", re.S)
_GROUP_FIELDS = ("task_id", "prompt_hash", "rollout_index")


class ConversionCounts(TypedDict):
    """What converting the messages changed: think blocks (and reasoning) removed, tool outputs cut, characters cut."""

    think_stripped: int
    tool_output_truncated: int
    tool_output_chars_cut: int


def check_mask_mode(mask_mode: str | None) -> str:
    """The mask mode to use (None: "assistant"); anything else raises ValueError naming the accepted ones."""
    if mask_mode is None:
        return "assistant"
    if mask_mode not in MASK_MODES:
        raise ValueError(
            f"mask_mode={mask_mode!r} is not a mask mode; accepted: 'assistant' (every assistant turn, the "
            "multi-turn default) or 'final' (only the last assistant turn); for one sample per turn pass unroll=True"
        )
    return mask_mode


def check_cap(max_tool_output_chars: Any) -> int | None:
    """``max_tool_output_chars`` checked: None (no cap) or a whole number >= 0."""
    if max_tool_output_chars is None:
        return None
    if type(max_tool_output_chars) is not int or max_tool_output_chars < 0:
        raise ValueError(
            f"max_tool_output_chars={max_tool_output_chars!r} is not a character count; pass a whole number "
            ">= 0, or None to keep tool output whole"
        )
    return max_tool_output_chars


def strip_think_text(text: str) -> str:
    """The text without ``<think>`` blocks (and without reasoning left open before a ``</think>``)."""
    text = _THINK_BLOCK.sub("", text)
    end = text.find("</think>")
    if end != -1:  # the template opened <think> in the prompt: the reply starts mid-thought
        text = text[end + len("</think>") :].lstrip()
    start = text.find("<think>")
    if start != -1:  # cut off while thinking: nothing after the tag was an answer
        text = text[:start].rstrip()
    return text


def ask_text(messages: list[dict]) -> str:
    """The ask: the user turns before the first assistant turn, as text."""
    parts = []
    for message in messages:
        role = message["role"]
        if role == "assistant":
            break
        if role == "user" and message.get("content"):
            parts.append(message["content"])
    return "\n\n".join(parts)


def convert_messages(
    messages: list[dict],
    *,
    strip_think: bool,
    cap: int | None,
    to_dict: bool,
    stats: ConversionCounts,
    copy_all: bool = True,
) -> tuple[list[dict], list[int], str]:
    """The messages with think blocks stripped, tool output capped and arguments encoded.

    Returns ``(messages, assistant turn indexes, the ask)``. ``to_dict`` True
    parses JSON-string arguments that hold an object into dicts (TRL); False
    writes dict arguments as JSON strings (OpenAI wire). Arguments that are
    neither stay as they are, for the round-trip gate to name. With
    ``copy_all`` (rows the caller still holds) every message is a copy and so is
    every tool call of an assistant turn. Without it (rows read for this call
    alone) assistant turns and their tool calls are changed in place and the
    other messages shared; a capped tool output is a copy either way.
    """
    out: list[dict] = []
    append = out.append
    assistant_at: list[int] = []
    ask: list[str] = []
    for i, message in enumerate(messages):
        role = message["role"]
        if role == "assistant":
            assistant_at.append(i)
            if copy_all:
                message = message.copy()
            if strip_think:
                content = message.get("content")
                if content and "think>" in content:
                    stripped = strip_think_text(content)
                    if stripped != content:
                        message["content"] = stripped
                        stats["think_stripped"] += 1
                if message.get("reasoning_content") is not None:
                    del message["reasoning_content"]
                    stats["think_stripped"] += 1
            calls = message.get("tool_calls")
            if calls:
                if copy_all:
                    message["tool_calls"] = [_encode_call(call, to_dict) for call in calls]
                else:
                    for call in calls:
                        function = call["function"]
                        function["arguments"] = _encoded(function["arguments"], to_dict)
        elif role == "tool" and cap is not None and len(message.get("content") or "") > cap:
            message = dict(message)
            content = message["content"]
            cut = len(content) - cap
            kept = content[:cap]
            marker = TRUNCATION_MARKER.format(n=cut)
            message["content"] = f"{kept}\n{marker}" if kept else marker
            stats["tool_output_truncated"] += 1
            stats["tool_output_chars_cut"] += cut
        else:
            if role == "user" and not assistant_at:
                content = message.get("content")
                if content:
                    ask.append(content)
            if copy_all:
                message = message.copy()
        append(message)
    return out, assistant_at, "\n\n".join(ask)


def _encode_call(call: dict, to_dict: bool) -> dict:
    """A copy of the tool call with its arguments in the format's encoding (see ``_encoded``)."""
    function = call["function"]
    call = dict(call)
    call["function"] = {**function, "arguments": _encoded(function["arguments"], to_dict)}
    return call


def _encoded(arguments: Any, to_dict: bool) -> Any:
    """Arguments as a dict (``to_dict``, when a string holds a JSON object) or a JSON string; others as they are."""
    if to_dict:
        if type(arguments) is str:
            try:
                parsed = loads(arguments)
            except ValueError:
                return arguments
            if type(parsed) is dict:
                return parsed
        return arguments
    if type(arguments) is dict:
        return dumps(arguments)
    return arguments


def assistant_bits(messages: Sequence[Mapping[str, Any]], mask_mode: str) -> list[int]:
    """1 for each message that carries loss under mask_mode (an explicit ``weight: 0`` is respected)."""
    bits = [1 if m["role"] == "assistant" and m.get("weight", 1) != 0 else 0 for m in messages]
    if mask_mode == "final":
        last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
        bits = [1 if i == last and bit else 0 for i, bit in enumerate(bits)]
    return bits


def training_samples(
    row: dict,
    messages: list[dict],
    *,
    source: dict,
    fmt: str,
    mask_mode: str,
    unroll: bool,
    index: int,
    counters: dict | None,
    assistant_at: list[int],
    ask: str,
) -> list[dict]:
    """The training rows of one prepared row, in the format's shape.

    One row, or one per trained turn when unrolling (or, for TRL, when only some
    turns train). ``row`` is the source row with the profile applied, ``source``
    the row as given (unrolled samples name its prompt hash). ``messages`` are
    this row's converted messages: assistant
    turns are copies this function may change. ``counters`` (the row's
    tool-output cut, when a cap is set) are stamped on each row.
    """
    if mask_mode == "final" and not unroll:
        trained = [i for i in assistant_at[-1:] if messages[i].get("weight", 1) != 0]
    else:
        trained = [i for i in assistant_at if messages[i].get("weight", 1) != 0]
    if not trained:
        return []
    tools = row.get("tools")
    if fmt == "trl":
        extra: dict[str, Any] = {"tools": tools} if tools else {}
        extra["prompt_text"] = ask
        if counters is not None:
            extra.update(counters)
        for i in assistant_at:
            messages[i].pop("weight", None)
        if not unroll and mask_mode == "assistant" and len(trained) == len(assistant_at):
            return [{"messages": messages, **extra}]
        lineage = _lineage(source, index) if unroll else None
        out = []
        for at in trained:
            sample = {"prompt": messages[:at], "completion": [messages[at]], **extra}
            if unroll and lineage is not None:  # lineage is read for unrolled samples only
                sample["unroll"] = {"turn": assistant_at.index(at) + 1, "turns": len(assistant_at)}
                sample["lineage"] = dict(lineage, unrolled_from=dict(lineage["unrolled_from"]))
            out.append(sample)
        return out
    metadata = {k: v for k, v in row.items() if k not in _NOT_METADATA}
    if counters is not None:
        metadata.update(counters)
    if not unroll:
        keep = set(trained)
        for i in assistant_at:
            messages[i]["weight"] = 1 if i in keep else 0
        return [_wire_row(messages, tools, ask, metadata)]
    for key in _GROUP_FIELDS:
        metadata.pop(key, None)
    lineage = _lineage(source, index)
    samples = []
    for at in trained:
        turn = assistant_at.index(at) + 1
        prefix = [dict(m) for m in messages[: at + 1]]
        for i in assistant_at[:turn]:
            prefix[i]["weight"] = 1 if i == at else 0
        meta = {**metadata, "unroll": {"turn": turn, "turns": len(assistant_at)}}
        meta["lineage"] = dict(lineage, unrolled_from=dict(lineage["unrolled_from"]))
        samples.append(_wire_row(prefix, tools, ask, meta))
    return samples


_NOT_METADATA = frozenset(("messages", "tools", "prompt", "privileged"))


def _lineage(row: dict, index: int) -> dict:
    """The source row's lineage with ``unrolled_from`` = its prompt hash and rollout index."""
    given = row.get("lineage")
    lineage = given if isinstance(given, dict) else {}
    origin = {
        "prompt_hash": row.get("prompt_hash") or prompt_hash(row["messages"]),
        "rollout_index": row["rollout_index"] if row.get("rollout_index") is not None else index,
    }
    return {**lineage, "unrolled_from": origin}


def _wire_row(messages: list[dict], tools: Any, ask: str, metadata: dict) -> dict:
    out: dict[str, Any] = {"messages": messages}
    if tools:
        out["tools"] = tools
    out["prompt"] = ask
    out.update(metadata)
    return out


def to_prompt_completion(rows: list[dict], origins: list[int]) -> tuple[list[dict], list[int]]:
    """Messages-shape TRL rows as one prompt/completion row per assistant turn (a file holds one shape)."""
    out, out_origins = [], []
    for row, origin in zip(rows, origins):
        if "messages" not in row:
            out.append(row)
            out_origins.append(origin)
            continue
        messages = row["messages"]
        rest = {k: v for k, v in row.items() if k != "messages"}
        for at, message in enumerate(messages):
            if message["role"] == "assistant":
                out.append({"prompt": messages[:at], "completion": [message], **rest})
                out_origins.append(origin)
    return out, out_origins


# ---------------------------------------------------------------------------
# TRL shapes
# ---------------------------------------------------------------------------

#: kept on TRL training rows besides the conversation: what TRL reads (tools) and the provenance a caller asked for
_TRL_KEEP = ("tools", "unroll", "lineage", "tool_output_truncated", "tool_output_chars_cut")


def trained_turns(messages: list[dict]) -> list[int]:
    """Indexes of the assistant turns that carry loss (no ``weight`` means trained)."""
    return [i for i, m in enumerate(messages) if m.get("role") == "assistant" and m.get("weight", 1) != 0]


def trl_training_rows(rows: list[dict], origins: list[int], single_turn: bool | None) -> tuple[list[dict], list[int]]:
    """TRL conversational SFT rows from OpenAI-wire training rows, and each output row's origin.

    Rows where every assistant turn trains become ``{"messages": [...]}`` (TRL's
    language-modelling shape, trained with ``assistant_only_loss``). When some
    turns do not train, which a messages-only row cannot say, every row becomes
    one prompt/completion pair per trained turn: ``{"prompt": [...context],
    "completion": [the turn]}``, which TRL masks to the completion. A file holds
    one shape only, because TRL picks the collator from the first row's keys;
    ``single_turn`` forces the choice (None decides from the rows).
    """
    converted = []
    for row in rows:
        messages = []
        for message in row["messages"]:
            message = {k: v for k, v in message.items() if k != "weight"}
            if message.get("tool_calls"):
                message["tool_calls"] = [_encode_call(call, True) for call in message["tool_calls"]]
            messages.append(message)
        converted.append((row, messages, trained_turns(row["messages"])))
    if single_turn is None:
        single_turn = any(
            trained != [i for i, m in enumerate(messages) if m["role"] == "assistant"]
            for _, messages, trained in converted
        )
    out: list[dict] = []
    out_origins: list[int] = []
    for (row, messages, trained), origin in zip(converted, origins):
        if not trained:
            continue
        extra = {k: row[k] for k in _TRL_KEEP if row.get(k) is not None}
        ask = row["prompt"] if isinstance(row.get("prompt"), str) else ask_text(messages)
        if not single_turn:
            out.append({"messages": messages, **_only(extra, "tools"), "prompt_text": ask, **_without(extra, "tools")})
            out_origins.append(origin)
            continue
        for at in trained:
            out.append(
                {
                    "prompt": messages[:at],
                    "completion": [messages[at]],
                    **_only(extra, "tools"),
                    "prompt_text": ask,
                    **_without(extra, "tools"),
                }
            )
            out_origins.append(origin)
    return out, out_origins


def _only(d: dict, key: str) -> dict:
    return {key: d[key]} if key in d else {}


def _without(d: dict, key: str) -> dict:
    return {k: v for k, v in d.items() if k != key}


def split_prompt(messages: list[dict]) -> int:
    """Where the completion starts: the index of the first assistant turn (len when there is none)."""
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            return i
    return len(messages)


def comparable(messages: list[dict]) -> list[dict]:
    """Messages with null-valued keys dropped, for comparing two sides' prompts."""
    return [{k: v for k, v in m.items() if v is not None} for m in messages]
