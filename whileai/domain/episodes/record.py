"""Held-out episodes as a run's summary keeps them: each one's verdict and its whole conversation.

A job that measures held-out episodes before and after training (the same episodes both times) writes them
under the run's summary at :data:`EPISODES_KEY`, and the run's page shows them turn by turn, each before
beside its after:

    summary["episodes"] = {
        "before": [record, ...],    # one record per held-out episode played before training
        "after": [record, ...],     # the same episodes played after training
        "left_out": 0,              # pairs played but not kept, to stay under EPISODE_RECORDS_MAX_BYTES
    }
    record = {
        "task_id": "kit-3f2a",      # names the episode; a before and an after with one task_id are a pair
        "passed": False,            # the judge's verdict
        "reason": "the end state differs from the gold replay's: ...",
        "turns": 3,                 # the policy's replies (assistant messages) in the episode
        "stopped": "answered",      # "answered" (a reply without calls), "cap" (the turn cap) or "episode_cap"
                                    # (the cap over all user turns, EPISODE_MAX_ROUNDS)
        "messages": [...],          # the whole conversation, as OpenAI's wire writes it (below)
    }

The messages are OpenAI chat-completions messages (an episode of several user turns, BFCL's, holds each later user
turn's messages where it began): ``{"role": "system" | "user", "content"}``;
``{"role": "assistant", "content": text or None, "tool_calls": [{"id", "type": "function", "function":
{"name", "arguments": JSON text}}]}`` (``tool_calls`` only on a reply that calls); ``{"role": "tool",
"tool_call_id", "name", "content"}``, each answering the call with that id. A call the policy gave no id gets
``call_N`` (N: its place among the episode's calls, from 0), and the tool messages the loop wrote after a reply
answer its calls in order. Text longer than EPISODE_RECORD_TEXT_CHARS is cut, saying how much was.

    before = [episode_record(row["task_id"], episode, verdict) for row, (episode, verdict) in ...]
    summary[EPISODES_KEY] = episodes_summary(before, after)
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict

from whileai.domain import defaults
from whileai.domain.episodes.judge import Verdict
from whileai.domain.episodes.loop import Episode, Stopped
from whileai.domain.episodes.rows import WireCall

__all__ = ["EPISODES_KEY", "EpisodeRecord", "EpisodesSummary", "WireMessage", "episode_record", "wire_messages",
           "episodes_summary", "tool_error", "CUT_MARKER"]

#: The run summary's key for held-out episodes.
EPISODES_KEY = "episodes"

#: Appended to a cut text; ``{n}`` is the number of characters cut.
CUT_MARKER = " [... {n} more characters not kept]"

#: What BFCL's executor answers a call that cannot run with (bfcl-eval's execute_multi_turn_func_call).
_BFCL_ERROR = "Error during execution:"


class WireReply(TypedDict):
    """An assistant message on the wire: its text (None where it says nothing) and, on a reply that calls, its calls."""

    role: str
    content: str | None
    tool_calls: NotRequired[list[WireCall]]


class WireToolAnswer(TypedDict):
    """A tool message on the wire: the id of the call it answers, the tool's name and its answer as text."""

    role: str
    tool_call_id: str
    name: str
    content: str


class WireText(TypedDict):
    """A system or user message on the wire: its role and its text."""

    role: str
    content: str


#: One message of an episode's conversation as the record keeps it (see the module).
WireMessage = WireReply | WireToolAnswer | WireText


class EpisodeRecord(TypedDict):
    """One held-out episode as the summary keeps it (see the module)."""

    task_id: str
    passed: bool
    reason: str
    turns: int
    stopped: Stopped
    messages: list[WireMessage]


class EpisodesSummary(TypedDict):
    """``summary["episodes"]``: the records before and after training, and the pairs not kept."""

    before: list[EpisodeRecord]
    after: list[EpisodeRecord]
    left_out: int


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + CUT_MARKER.format(n=len(text) - limit)


def _text(value: Any, limit: int) -> str:
    """A message's content or a call's arguments as text: a string as it is, anything else as JSON."""
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return _cut(shown, limit)


def _call(call: Mapping[str, Any], call_id: str, limit: int) -> WireCall:
    nested = call.get("function")
    function: Mapping[str, Any] = nested if isinstance(nested, Mapping) else call
    arguments = function.get("arguments")
    return {"id": call_id, "type": "function",
            "function": {"name": str(function.get("name") or "unknown"),
                         "arguments": _text({} if arguments is None else arguments, limit)}}


def _call_ids(calls: Sequence[Mapping[str, Any]], taken: set[str], counter: list[int]) -> list[str]:
    """Each call's own id, or ``call_N`` where it has none (N: the call's place among the episode's calls, from 0;
    ``call_N_1`` and on where a call's own id already is ``call_N``)."""
    ids = []
    for call in calls:
        given = call.get("id")
        if isinstance(given, str) and given:
            ids.append(given)
        else:
            made, more = f"call_{counter[0]}", 0
            while made in taken:
                more += 1
                made = f"call_{counter[0]}_{more}"
            ids.append(made)
        taken.add(ids[-1])
        counter[0] += 1
    return ids


def wire_messages(messages: Sequence[Mapping[str, Any]], limit: int | None = None) -> list[WireMessage]:
    """``messages`` (an episode's conversation, as :func:`~whileai.domain.episodes.loop.play_episode` returns it)
    as OpenAI-wire messages: every call with an id and JSON-text arguments, every tool message with the id of the
    call it answers and the tool's name, every text cut at ``limit`` characters (None: EPISODE_RECORD_TEXT_CHARS).

        >>> wire_messages([{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f",
        ...     "arguments": {"x": 1}}}]}, {"role": "tool", "name": "f", "content": "2"}])[1]
        {'role': 'tool', 'tool_call_id': 'call_0', 'name': 'f', 'content': '2'}
    """
    cap = defaults.EPISODE_RECORD_TEXT_CHARS if limit is None else limit
    taken = {c["id"] for m in messages for c in (m.get("tool_calls") or ())
             if isinstance(c, Mapping) and isinstance(c.get("id"), str)}
    counter = [0]
    pending: list[tuple[str, str]] = []  # (id, name) of the last reply's calls not answered yet
    out: list[WireMessage] = []
    for message in messages:
        role = str(message.get("role"))
        content = message.get("content")
        if role == "assistant":
            calls = [c for c in message.get("tool_calls") or () if isinstance(c, Mapping)]
            wire: WireReply = {"role": role, "content": None if content is None else _text(content, cap)}
            if calls:
                wire["tool_calls"] = [_call(c, i, cap) for c, i in zip(calls, _call_ids(calls, taken, counter))]
            pending = [(c["id"], c["function"]["name"]) for c in wire.get("tool_calls", ())]
            out.append(wire)
        elif role == "tool":
            answered = pending.pop(0) if pending else (None, None)
            out.append({"role": role, "tool_call_id": str(message.get("tool_call_id") or answered[0] or ""),
                        "name": str(message.get("name") or answered[1] or ""), "content": _text(content or "", cap)})
        else:
            out.append({"role": role, "content": _text(content or "", cap)})
    return out


def episode_record(task_id: str, episode: Episode, verdict: Verdict) -> EpisodeRecord:
    """The summary's record of one played episode (``play_episode``'s answer) and its judge's ``verdict``.

    Raises ValueError when ``task_id`` is empty: the page pairs before with after by it."""
    if not isinstance(task_id, str) or not task_id:
        raise ValueError(f"task_id={task_id!r} does not name the episode; pass the held-out row's task_id (a "
                         "non-empty string): the run's page pairs an episode before training with it after by it")
    messages = wire_messages(episode.messages)
    return {"task_id": task_id, "passed": bool(verdict.passed), "reason": str(verdict.reason),
            "turns": sum(m["role"] == "assistant" for m in messages), "stopped": episode.stopped,
            "messages": messages}


def _by_task(records: Sequence[EpisodeRecord], side: str) -> dict[str, EpisodeRecord]:
    found: dict[str, EpisodeRecord] = {}
    for record in records:
        task_id = record["task_id"]
        if task_id in found:
            raise ValueError(f"two {side} records have task_id {task_id!r}; each held-out episode needs its own "
                             "task_id for its before and after to pair: give the rows distinct task_ids")
        found[task_id] = record
    return found


def _rank(before: EpisodeRecord | None, after: EpisodeRecord | None) -> int:
    """Which pairs a reader needs first: changed verdicts, then failures, then passes both times."""
    passed = [r["passed"] for r in (before, after) if r is not None]
    if len(passed) == 2 and passed[0] != passed[1]:
        return 0
    return 1 if not all(passed) else 2


def _size(record: EpisodeRecord | None) -> int:
    return 0 if record is None else len(json.dumps(record, ensure_ascii=False).encode()) + 2


def episodes_summary(before: Sequence[EpisodeRecord], after: Sequence[EpisodeRecord],
                     max_bytes: int | None = None) -> EpisodesSummary:
    """``summary["episodes"]`` from the records of each side: pairs kept whole (both sides or neither) while their
    JSON fits in ``max_bytes`` (None: EPISODE_RECORDS_MAX_BYTES), changed verdicts first, then failures, then the
    rest; each side keeps its own order. ``left_out`` counts the pairs that did not fit.

    Raises ValueError when a side has two records with one task_id."""
    budget = defaults.EPISODE_RECORDS_MAX_BYTES if max_bytes is None else max_bytes
    sides = _by_task(before, "before"), _by_task(after, "after")
    tasks = list(dict.fromkeys([*sides[0], *sides[1]]))
    ranked = sorted(tasks, key=lambda t: _rank(sides[0].get(t), sides[1].get(t)))
    kept: set[str] = set()
    used = 0
    for task_id in ranked:
        size = _size(sides[0].get(task_id)) + _size(sides[1].get(task_id))
        if used + size <= budget:
            kept.add(task_id)
            used += size
    return {"before": [r for r in before if r["task_id"] in kept], "after": [r for r in after if r["task_id"] in kept],
            "left_out": len(tasks) - len(kept)}


def tool_error(content: Any) -> str | None:
    """The error a tool message reports, or None when it reports a result.

    The episode loop answers a call that raised (or could not run) with ``str({"error": message})``, as TRL
    does; a tool may also return such a mapping itself (BFCL's backends do), and BFCL's executor answers with
    ``Error during execution: ...``."""
    if not isinstance(content, str):
        return None
    text = content.strip()
    if text.startswith(_BFCL_ERROR):
        return text[len(_BFCL_ERROR):].strip() or text
    if not (text.startswith("{") and text.endswith("}") and "error" in text):
        return None
    for read in (json.loads, ast.literal_eval):
        try:
            value = read(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, dict) and list(value) == ["error"]:
            return str(value["error"])
    return None
