"""Before anything trains: how many held-out prompts (a reward model: pairs) the run will measure, and what they can show.

The job measures each distinct held-out prompt once (a row's prompt, tools and gold; at most
``holdout_rows`` of them), and a before/after on them is judged by the exact McNemar test. On a
few prompts no change can be significant (two prompts: even both turning from fail to pass
gives p = 0.5), so a run whose expect asks for significance is bound to fail it. This says so
before the first step, with the smallest change that could be significant at that n.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from whileai.core.spec import RMSpec, RunSpec
from whileai.core.stats import holdout_power

from whileai.runner.schema import Dataset

__all__ = ["heldout_prompts", "heldout_pairs", "power_note", "unjudged_cause", "OWN_SPLIT_GROWTH"]

#: what grows the held-out side of a dataset cut by its own split, which reads no share (``dataset=bfcl_episodes``:
#: BFCL's split by scenario, whose share is BFCL_MULTI_TURN_HOLDOUT): more of its entries
OWN_SPLIT_GROWTH = ("more entries: a larger dataset.tasks, or null to read every entry, or more dataset.categories; "
                    "its held-out share is BFCL's own split by scenario, BFCL_MULTI_TURN_HOLDOUT")


def heldout_prompts(rows: Sequence[Mapping[str, Any]], limit: int | None) -> int:
    """The distinct (prompt, tools, gold) of the held-out rows that carry a gold, at most ``limit``: what the job measures.
    Episode rows count their distinct episodes (two worlds may ask one prompt), as the job plays them."""
    from whileai.domain.episodes.rows import has_episode
    from whileai.domain.rows.rollouts import prompt_messages

    if any(isinstance(r, Mapping) and has_episode(r) for r in rows):
        from whileai.domain.episodes.rows import held_out_episodes

        return len(held_out_episodes(rows, limit, 0))

    seen = {json.dumps([prompt_messages(r), r.get("tools"), r.get("gold")], sort_keys=True, default=str)
            for r in rows if isinstance(r, Mapping) and r.get("gold") is not None}
    return min(len(seen), limit) if limit else len(seen)


def heldout_pairs(rows: Sequence[Mapping[str, Any]], spec: RMSpec) -> int:
    """The held-out pairs a reward model's job measures (``whileai.jobs.rm.holdout_pairs``, no model loaded)."""
    from whileai.jobs.rm import holdout_pairs

    return len(holdout_pairs([dict(r) for r in rows if isinstance(r, Mapping)], spec)[1])


def _own_split(data: Dataset | None) -> bool:
    """Whether ``data`` is cut by its own split (``pipeline.own_split``), so that no ``dataset.holdout`` is read."""
    return data is not None and data.source == "bfcl_episodes"


def unjudged_cause(rows: Sequence[Mapping[str, Any]], data: Dataset | None = None) -> str | None:
    """Why held-out rows give nothing to judge (no row, no gold, a tool-call gold with no tools shown), or None.

    The first-action judge compares a reply with the row's ``gold``; a tool-call gold on a row that
    offers no ``tools`` asks the model for a call it was never shown. ``data`` (the spec's dataset) decides how an
    empty held-out side grows: a larger ``dataset.holdout``, or, for a dataset cut by its own split, more entries.
    """
    rows = [r for r in rows if isinstance(r, Mapping)]
    with_gold = [r for r in rows if r.get("gold") is not None]
    if not rows and _own_split(data):
        return ("the held-out side has no rows: the dataset's own split held out none of the entries read; read "
                + OWN_SPLIT_GROWTH)
    if not rows:
        return ("the held-out side has no rows: dataset.holdout cut none off; raise dataset.holdout "
                "(a share of the tasks, e.g. 0.2) or give the dataset more tasks")
    if not with_gold:
        return (f"none of the {len(rows)} held-out rows carries a gold (the reference first action the judge "
                "compares a reply with: {'name', 'arguments'} or {'answer'}, docs/rows.md), so no prompt can be "
                "judged and the held-out pass rate will read - -> -; add gold to the rows")
    blind = [r for r in with_gold if isinstance(r.get("gold"), Mapping) and "answer" not in r["gold"] and not r.get("tools")]
    if len(blind) == len(with_gold):
        return (f"every held-out row with a gold ({len(blind)}) asks for a tool call but offers no tools, so the "
                "model is never shown the tool it should call; give the rows their tools (a row's 'tools', or "
                "dataset.tools=FILE)")
    return None


def power_note(held_rows: Sequence[Mapping[str, Any]], spec: RunSpec,
               significant: float | None = None, data: Dataset | None = None) -> tuple[str, str | None]:
    """(the line the run prints before training, a warning when no result on these prompts can be significant).

    ``spec`` is the last stage's resolved spec (its ``holdout_rows``, and for a reward model what
    makes its pairs); ``significant`` the spec's ``expect.holdout_gain_significant``, when it names one
    (the level tested at; STATS_ALPHA otherwise); ``data`` the spec's dataset, whose cut decides what the
    warning says grows the held-out side (a dataset cut by its own split reads no ``dataset.holdout``).
    """
    growth = {"growth": OWN_SPLIT_GROWTH} if _own_split(data) else {}  # else holdout_power's: a larger share
    if isinstance(spec, RMSpec):  # a reward model is measured on held-out pairs, not prompts
        found = holdout_power(heldout_pairs(list(held_rows), spec), significant, unit="pair", **growth)
        cause = None
    else:
        found = holdout_power(heldout_prompts(list(held_rows), spec.holdout_rows), significant, **growth)
        cause = unjudged_cause(list(held_rows), data)
    few = found["warning"]
    warning = cause or few  # the cause, not "more rows": more rows like these would give nothing either
    if warning and significant is not None:
        warning += " (this spec's expect.holdout_gain_significant will fail)"
    return found["text"], warning
