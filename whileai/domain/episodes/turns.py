"""Per-turn scores of an episode: each call the rollout made against the gold call at the same place.

The episode judge (``judge.py``) pays the end state and the final reply, all or nothing. This module pays the way
there, call by call: the k-th call the rollout made (in order, across its assistant turns) is scored against gold
call k by one of the single-turn judges, each call read as a one-call assistant turn:

- ``first_action``: 1.0 when the call is the gold call by the exact judge (``judge_turn``), else 0.0;
- ``fine_grained``: ToolRL's fine-grained score of the call against the gold call (``fine_grained_score``'s
  ``reward``, in [0, 1]; arXiv:2504.13958).

The episode's score is the mean over max(calls made, gold calls): a gold call the rollout never reached scores 0,
and a call past the last gold call scores 0 too, so extra calls dilute the mean. An episode whose gold makes no
call and which makes none scores 1.0 (nothing was asked, nothing was done).

    scores = turn_scores(completion, gold.calls, "fine_grained")   # the right read, then a transfer of 20, not 30
    scores.scores, scores.mean        # (1.0, 0.904...), 0.952...: one of the transfer's three values is wrong
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from whileai.core import defaults as core_defaults
from whileai.domain.judges.rewards import fine_grained_score
from whileai.domain.rows.gold import ReplyCall, first_turn, judge_turn

__all__ = ["TurnScores", "turn_calls", "turn_scores"]


@dataclass(frozen=True)
class TurnScores:
    """An episode's per-call scores, one per place (max(calls made, gold calls) of them), and their mean."""

    scores: tuple[float, ...]
    mean: float
    made: int
    wanted: int


def turn_calls(messages: Sequence[Mapping[str, Any]]) -> list[ReplyCall]:
    """The calls of ``messages``' assistant turns in order, each ``{"name", "arguments"}`` (arguments parsed)."""
    calls: list[ReplyCall] = []
    for message in messages:
        if message.get("role") == "assistant":
            turn = first_turn([dict(message)])
            calls += turn["calls"] if turn is not None else []
    return calls


def _one_call_turn(call: Mapping[str, Any]) -> dict[str, Any]:
    """``call`` as an assistant turn that makes it alone, the shape the single-turn judges read."""
    return {"role": "assistant", "content": None,
            "tool_calls": [{"type": "function", "function": {"name": call.get("name"),
                                                             "arguments": call.get("arguments")}}]}


def _call_score(call: Mapping[str, Any], gold: Mapping[str, Any], judge: str) -> float:
    """One call scored against one gold call by ``judge`` (see the module)."""
    turn = _one_call_turn(call)
    if judge == "first_action":
        return 1.0 if judge_turn([turn], gold)[0] else 0.0
    return float(fine_grained_score(turn, gold)["reward"])


def turn_scores(messages: Sequence[Mapping[str, Any]], gold_calls: Sequence[Mapping[str, Any]],
                judge: str) -> TurnScores:
    """``messages``' calls scored place by place against ``gold_calls`` by ``judge`` (see the module).

    ``messages`` are the rollout's own turns (TRL's completion: assistant turns and tool answers), not its prompt.
    Raises ValueError naming the judges accepted when ``judge`` is none of them."""
    if judge not in core_defaults.TRAIN_TURN_REWARDS:
        raise ValueError(f"judge={judge!r} is not a per-turn judge; pass one of "
                         f"{', '.join(core_defaults.TRAIN_TURN_REWARDS)}")
    made = turn_calls(messages)
    places = max(len(made), len(gold_calls))
    scores = tuple(_call_score(made[k], gold_calls[k], judge) if k < len(made) and k < len(gold_calls) else 0.0
                   for k in range(places))
    return TurnScores(scores=scores, mean=sum(scores) / places if places else 1.0, made=len(made),
                      wanted=len(gold_calls))
