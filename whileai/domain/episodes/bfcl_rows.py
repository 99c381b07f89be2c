"""BFCL's multi-turn entries as episode rows: what the runner's ``dataset=bfcl_episodes`` loads, pushes and cuts.

Each entry becomes one rollout row (docs/rows.md), as each kit task does (``rows.py``):

- ``messages``: the entry's gold episode, played in its environment by whileai's episode loop over every user turn:
  each of the answer's calls one assistant turn, answered by BFCL's backend, then BFCL_GOLD_TURN_REPLY
  (BFCL_GOLD_ASK_REPLY in a turn whose answer makes no call), then the next turn's user messages (BFCL's
  added-functions prompt at a turn that only adds functions). The play must pass BFCL's multi-turn check, else the
  entry is refused by id: SFT clones these conversations, loss on the assistant turns only;
- ``tools``: every function of the entry's backends, the withheld ones included (what its last turn offers): a row
  has one tool list;
- ``passed: true``, ``reward: 1.0``; ``gold``: the answer's first call (``{"no_call": true}`` where the first turn
  makes none); ``task_id``: BFCL's id; ``category``: its category (``HOLDOUT_GROUP_FIELD``: the held-out figures per
  category);
- ``episode`` (``EPISODE_FIELD``): ``environment`` the entry's environment name (the column TRL routes a dict of
  factories by, ``environment_name``), ``reset`` ``{"bfcl_entry": the entry as JSON}``, ``calls`` every turn's answer
  calls in order with named arguments, ``responses`` none. The episode judge takes the environment's own verdict
  (BFCL's multi-turn check), not a replay of ``calls``.

The held-out side is BFCL's own split by scenario (``is_held_out``, BFCL_MULTI_TURN_HOLDOUT), not a drawn one:
:func:`held_out_flags` says it row by row for the runner's cut, so a held-out scenario never trains in any category.

    rows = bfcl_episode_rows(read_multi_turn(folder, ["multi_turn_base"]), folder)
    held = held_out_flags(rows)          # [True, False, ...]: the runner's cut
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from whileai.core.errors import RowFormatError
from whileai.domain import defaults
from whileai.domain.episodes.bfcl import BfclEnvironment, environment_class, gold_calls
from whileai.domain.episodes.judge import GoldCall
from whileai.domain.episodes.loop import Episode, Policy, play_episode
from whileai.domain.episodes.rows import EPISODE_FIELD, EpisodeGold, wire_call
from whileai.domain.rows.bfcl_multi_turn import MultiTurnEntry, environment_name, is_held_out

__all__ = ["bfcl_episode_rows", "bfcl_episode_row", "held_out_flags"]


def _gold_policy(environment: BfclEnvironment, calls: Sequence[Sequence[Mapping[str, Any]]]) -> Policy:
    """A policy that plays the answer: each turn's calls one a round, then the turn's closing reply."""
    pending = [list(turn) for turn in calls]
    numbers = itertools.count()

    def policy(conversation: list[dict[str, Any]]) -> dict[str, Any]:
        turn = environment.episode.turn
        if pending[turn]:
            return {"role": "assistant", "content": None,
                    "tool_calls": [wire_call(next(numbers), pending[turn].pop(0))]}
        said = defaults.BFCL_GOLD_TURN_REPLY if calls[turn] else defaults.BFCL_GOLD_ASK_REPLY
        return {"role": "assistant", "content": said}

    return policy


def _gold_episode(entry: MultiTurnEntry, folder: str | os.PathLike[str],
                  calls: list[list[GoldCall]]) -> tuple[Episode, BfclEnvironment]:
    """The entry played by its answer in a fresh environment; refused by id where BFCL's check fails it."""
    environment = environment_class(entry, folder)()
    start = {"prompt": [dict(m) for m in entry.turns[0]], "bfcl_entry": entry.to_json()}
    most = max((len(turn) for turn in calls), default=0)
    episode = play_episode(_gold_policy(environment, calls), environment, start, max_turns=most + 1,
                           max_rounds=sum(map(len, calls)) + 1)
    verdict = environment.episode.verdict()
    if episode.stopped != "answered" or not verdict.passed:
        raise RowFormatError(f"BFCL entry {entry.id}: its answer played in its environment fails BFCL's multi-turn "
                             f"check ({verdict.reason}); the question and possible-answer files disagree, so pass "
                             "both of one bfcl-eval release", [{"row": entry.id, "detail": verdict.reason}])
    return episode, environment


def bfcl_episode_row(entry: MultiTurnEntry, folder: str | os.PathLike[str]) -> dict[str, Any]:
    """One passing episode row of ``entry`` (see the module); ``folder`` holds its function docs."""
    calls = gold_calls(entry)
    episode, environment = _gold_episode(entry, folder, calls)
    flat = tuple(call for turn in calls for call in turn)
    gold = EpisodeGold(environment=environment_name(entry), reset={"bfcl_entry": entry.to_json()}, calls=flat)
    return {
        "messages": episode.messages,
        "tools": environment.episode.tools(),  # every function, offered by the last turn
        "reward": 1.0,
        "passed": True,
        "gold": dict(calls[0][0]) if calls and calls[0] else {"no_call": True},
        "task_id": entry.id,
        "category": entry.category,
        EPISODE_FIELD: json.loads(gold.to_json()),
    }


def bfcl_episode_rows(entries: Sequence[MultiTurnEntry], folder: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """One passing episode row per entry, held-out entries included (:func:`held_out_flags` says which they are):
    the runner cuts them by BFCL's split and measures the held-out side."""
    return [bfcl_episode_row(entry, folder) for entry in entries]


def held_out_flags(rows: Sequence[Mapping[str, Any]]) -> list[bool]:
    """Whether each row is on BFCL's held-out side (its scenario, read from the ``task_id`` BFCL's id gives it):
    the runner's cut of ``dataset=bfcl_episodes`` rows. Raises ValueError naming a row whose task_id is no BFCL
    multi-turn id."""
    flags = []
    for index, row in enumerate(rows):
        task = str(row.get("task_id"))
        number = task.rsplit("_", 1)[-1]
        if not task.startswith("multi_turn_") or not number.isdigit():
            raise ValueError(f"row {index}: task_id {task!r} is not a BFCL multi-turn id (multi_turn_<category>_<n>), "
                             "so its side of BFCL's split is unknown; cut rows of bfcl_episode_rows only")
        flags.append(is_held_out(int(number)))
    return flags
