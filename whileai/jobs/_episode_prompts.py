"""TRL's rows for GRPO over episodes: one prompt per distinct training episode, the column carrying its gold, and
the turn cap.

Each row carries the prompt, the environment's ``reset`` arguments (TRL passes every column to ``reset``), the
episode's gold (:data:`EPISODE_GOLD_COLUMN`, JSON) and its task; where the environment is TRL's dict of factories
(BFCL's), also the gold's environment name in the column TRL routes each row by (``protocol.ROUTE_COLUMN``). The episode job (``_episodes``) trains on them and
the HackMonitor's looks (``_episode_watch``) play them; both read them from here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["EPISODE_GOLD_COLUMN", "episode_prompts", "turn_cap"]

#: TRL's dataset column carrying an episode's gold (EpisodeGold's JSON) to the reward.
EPISODE_GOLD_COLUMN = "episode_gold"


def turn_cap(spec: Any) -> int:
    """The spec's tool-calling rounds per episode: its ``max_turns``, else the domain's EPISODE_MAX_TURNS."""
    from whileai.domain import defaults

    given = getattr(spec, "max_turns", None)
    return defaults.EPISODE_MAX_TURNS if given is None else int(given)


def episode_prompts(rows: Sequence[Mapping[str, Any]], routed: bool = False) -> list[dict[str, Any]]:
    """TRL's rows: one per distinct episode of ``rows`` (see the module), each with its environment's name where
    ``routed`` (the factory is a dict). Raises when no row is an episode row."""
    from whileai.domain.episodes.protocol import ROUTE_COLUMN
    from whileai.domain.episodes.rows import episode_gold, has_episode
    from whileai.domain.rows.rowsource import task_key
    from whileai.domain.rows.taskkey import prompt_messages

    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        if not has_episode(row):
            continue
        gold = episode_gold(row)
        out.setdefault(gold.to_json(), {"prompt": prompt_messages(row), **gold.reset,
                                        EPISODE_GOLD_COLUMN: gold.to_json(), "task": task_key(row),
                                        **({ROUTE_COLUMN: gold.environment} if routed else {})})
    if not out:
        raise ValueError(f"grpo in an environment found no episode row among {len(rows)} rows (a row with an "
                         "'episode' field); load the environment's gold episodes (dataset=episodes), or train "
                         "without an environment")
    return list(out.values())
