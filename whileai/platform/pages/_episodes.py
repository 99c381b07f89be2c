"""The run page's held-out episodes: each episode before training beside it after, turn by turn.

Read from ``summary["episodes"]`` (whileai.domain.episodes.record documents the shape) defensively: the
summary is whatever the job wrote, so a record or message that is not the shape is skipped, never an error.
Episodes are paired by ``task_id`` and ordered for a reader: verdicts that changed first (lost, then gained),
then episodes failed both times, then passed both times, then those played on one side only. Each side's
messages become steps the page script draws as text:

    {"role": "user", "text": "..."}
    {"role": "assistant", "turn": 2, "text": "...", "calls": [{"id", "name", "arguments"}]}
    {"role": "tool", "name": "get_balance", "call_id": "call_0", "text": "...", "error": "..." or None}
"""

from __future__ import annotations

import json
from typing import Any

from whileai.domain.episodes.record import EPISODES_KEY, tool_error
from whileai.platform.pages._shapes import EpisodePair, EpisodeSide, EpisodesView, EpisodeStep, PassedCount

__all__ = ["episodes_view", "CHANGES"]

#: How a pair's verdict moved, in the order the page lists them.
CHANGES = ("lost", "gained", "failed both", "passed both", "before only", "after only")


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _arguments(raw: Any) -> str:
    """A call's arguments as the page shows them: JSON on one line, or the text as written when it is not JSON."""
    if isinstance(raw, str):
        try:
            return json.dumps(json.loads(raw), ensure_ascii=False)
        except ValueError:
            return raw
    return _text(raw)


def _calls(message: dict[str, Any]) -> list[dict[str, str]]:
    calls = message.get("tool_calls")
    out = []
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict):
            continue
        nested = call.get("function")
        function: dict[str, Any] = nested if isinstance(nested, dict) else call
        out.append({"id": _text(call.get("id")), "name": _text(function.get("name")),
                    "arguments": _arguments(function.get("arguments"))})
    return out


def _steps(messages: Any) -> list[EpisodeStep]:
    steps: list[EpisodeStep] = []
    turn = 0
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        role = _text(message.get("role")) or "unknown"
        step: EpisodeStep = {"role": role, "text": _text(message.get("content"))}
        if role == "assistant":
            turn += 1
            step["turn"], step["calls"] = turn, _calls(message)
        elif role == "tool":
            step["name"], step["call_id"] = _text(message.get("name")), _text(message.get("tool_call_id"))
            step["error"] = tool_error(message.get("content"))
        steps.append(step)
    return steps


def _side(record: Any) -> EpisodeSide | None:
    if not isinstance(record, dict):
        return None
    turns = record.get("turns")
    return {"passed": record.get("passed") is True, "reason": _text(record.get("reason")),
            "turns": turns if isinstance(turns, int) and not isinstance(turns, bool) else None,
            "stopped": _text(record.get("stopped")) or None, "steps": _steps(record.get("messages"))}


def _by_task(records: Any) -> dict[str, Any]:
    """task_id -> record, in the side's order (a record without a task_id, or its id's second record, is skipped)."""
    out: dict[str, Any] = {}
    for record in records if isinstance(records, list) else []:
        if isinstance(record, dict) and isinstance(record.get("task_id"), str):
            out.setdefault(record["task_id"], record)
    return out


def _change(before: EpisodeSide | None, after: EpisodeSide | None) -> str:
    if before is None or after is None:
        return "after only" if before is None else "before only"
    if before["passed"] != after["passed"]:
        return "gained" if after["passed"] else "lost"
    return "passed both" if after["passed"] else "failed both"


def _passed(sides: list[EpisodeSide | None]) -> PassedCount:
    played = [side for side in sides if side is not None]
    return {"passed": sum(side["passed"] for side in played), "of": len(played)}


def episodes_view(summary: Any) -> EpisodesView | None:
    """``{"pairs", "counts", "passed", "left_out"}`` for the run page, None when the run kept no episodes.

    ``pairs``: ``{"task_id", "change", "before", "after"}`` in the order of CHANGES (each side None where that
    side did not play it); ``counts``: pairs per change; ``passed``: episodes passed on each side, of how many."""
    data = summary.get(EPISODES_KEY) if isinstance(summary, dict) else None
    if not isinstance(data, dict):
        return None
    sides = _by_task(data.get("before")), _by_task(data.get("after"))
    tasks = list(dict.fromkeys([*sides[1], *sides[0]]))
    if not tasks:
        return None
    pairs: list[EpisodePair] = []
    for task_id in tasks:
        before, after = _side(sides[0].get(task_id)), _side(sides[1].get(task_id))
        pairs.append({"task_id": task_id, "change": _change(before, after), "before": before, "after": after})
    pairs.sort(key=lambda p: CHANGES.index(p["change"]))
    left_out = data.get("left_out")
    return {
        "pairs": pairs,
        "counts": {change: sum(p["change"] == change for p in pairs) for change in CHANGES},
        "passed": {name: _passed([p[name] for p in pairs]) for name in ("before", "after")},
        "left_out": left_out if isinstance(left_out, int) and not isinstance(left_out, bool) else 0,
    }
