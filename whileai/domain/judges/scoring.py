"""The scoring core: the judge contract, a judge's verdicts on rows, and ScoredData.

``judges`` is the public home of these names (``wai.evaluate``, ``wai.ScoredData``);
they live here, below the row sources, so that ``SimulationData.grade`` can score its
own rows without importing what imports the row contract.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from whileai.domain import defaults
from whileai.domain.rows.taskkey import task_key

__all__ = ["Judge", "normalise_judgement", "ScoredData", "score_rows", "completion_chars"]

Judge = Callable[[Mapping[str, Any]], Any]


def _threshold(threshold: float | None) -> float:
    value = defaults.JUDGE_PASS_THRESHOLD if threshold is None else threshold
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"threshold={threshold!r} is not a finite number; pass one, or None for JUDGE_PASS_THRESHOLD")
    return float(value)


def _reward(value: Any, where: str) -> float:
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"{where}: reward {value!r} is not a number; a judge returns a float or {{'reward': float, ...}}")
    try:
        reward = float(value)
    except (TypeError, ValueError):
        raise TypeError(
            f"{where}: reward of type {type(value).__name__} is not a number; "
            "a judge returns a float or {'reward': float, ...}"
        ) from None
    if not math.isfinite(reward):
        raise ValueError(f"{where}: reward is {reward}; a judge must return a finite number")
    return reward


def normalise_judgement(result: Any, threshold: float | None = None, where: str = "judge") -> tuple[float, bool, dict[str, Any]]:
    """A judge's answer as ``(reward, passed, extra)``.

    ``result`` is a number (a bool counts as 1.0 / 0.0 and says ``passed`` itself)
    or a mapping with ``reward`` and optionally ``passed``; other keys come back in
    ``extra``. Without ``passed``, ``passed = reward >= threshold``
    (``JUDGE_PASS_THRESHOLD`` when None).
    """
    cut = _threshold(threshold)
    if isinstance(result, Mapping):
        if "reward" not in result:
            raise ValueError(
                f"{where}: the judge returned a mapping without 'reward' (keys: {sorted(map(str, result))}); "
                "return {'reward': float, 'passed'?: bool, ...}"
            )
        reward = _reward(result["reward"], where)
        extra = {k: v for k, v in result.items() if k not in ("reward", "passed")}
        passed_value = result.get("passed")
        if passed_value is None:
            return reward, reward >= cut, extra
        if not isinstance(passed_value, bool) and type(passed_value).__name__ != "bool_":
            raise TypeError(f"{where}: 'passed' is {passed_value!r}; it must be True or False (or left out)")
        return reward, bool(passed_value), extra
    if isinstance(result, bool) or type(result).__name__ == "bool_":
        return float(result), bool(result), {}
    reward = _reward(result, where)
    return reward, reward >= cut, {}


def _judge_name(judge: Any) -> str:
    return getattr(judge, "__name__", None) or type(judge).__name__


def _check_judge(judge: Any) -> None:
    if not callable(judge):
        raise TypeError(
            f"judge={judge!r} is not callable; pass a function row -> reward (e.g. wai.first_action_judge) "
            "or wai.reward_model(run)"
        )


def _score(rows: Sequence[Mapping[str, Any]], judge: Judge, threshold: float | None) -> list[tuple[float, bool, dict[str, Any]]]:
    _check_judge(judge)
    _threshold(threshold)
    many = getattr(judge, "judge_many", None)  # a judge that scores in batches (wai.reward_model) gets every row at once
    if callable(many) and rows:
        verdicts = list(many(rows))
        if len(verdicts) != len(rows):
            raise ValueError(f"{type(judge).__name__}.judge_many returned {len(verdicts)} verdicts for {len(rows)} rows; "
                             "it must return one per row, in order")
    else:
        verdicts = [judge(row) for row in rows]
    return [normalise_judgement(v, threshold, where=f"row {i}") for i, v in enumerate(verdicts)]


def completion_chars(row: Mapping[str, Any]) -> int:
    """Length of a row's assistant turns in characters: text plus tool names and compact arguments.

    Tokenizer-free, so pairs are length matched the same way for every model.
    """
    from whileai.domain.rows.actions import canonical_arguments_text, content_text

    total = 0
    for m in row.get("messages") or []:
        if not isinstance(m, Mapping) or m.get("role") != "assistant":
            continue
        total += len(content_text(m.get("content")))
        for call in m.get("tool_calls") or []:
            fn = call.get("function", call) if isinstance(call, Mapping) else {}
            total += len(str(fn.get("name") or "")) + len(canonical_arguments_text(fn.get("arguments")))
    return total


def _pairs_per_task(per_task: int | None) -> int:
    value = defaults.PREFERENCE_PAIRS_PER_TASK if per_task is None else per_task
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"per_task={per_task!r} must be a whole number >= 1; pass one, or None for PREFERENCE_PAIRS_PER_TASK")
    return value


def _length_matched_pairs(rows: Sequence[Mapping[str, Any]], passed: list[bool | None], per_task: int | None) -> list[dict[str, Any]]:
    k = _pairs_per_task(per_task)
    groups: dict[str, tuple[list[int], list[int]]] = {}
    for i, row in enumerate(rows):
        if passed[i] is None:
            continue
        wins, losses = groups.setdefault(task_key(row), ([], []))
        (wins if passed[i] else losses).append(i)
    pairs: list[dict[str, Any]] = []
    for key, (wins, losses) in groups.items():
        if not wins or not losses:
            continue
        lengths = {i: completion_chars(rows[i]) for i in (*wins, *losses)}
        candidates = sorted((abs(lengths[w] - lengths[f]), w, f) for w in wins for f in losses)
        used: set[int] = set()
        taken = 0
        for _diff, w, f in candidates:
            if taken == k:
                break
            if w in used or f in used:
                continue
            used.update((w, f))
            taken += 1
            pairs.append({"chosen": rows[w], "rejected": rows[f], "task_id": key})
    return pairs


class ScoredData:
    """Rows a judge has graded: each a copy of its source row with ``reward`` and ``passed`` set.

    ``extras[i]`` holds whatever else the judge said about row ``i`` (the
    first-action judge's ``reason``). Iterating yields the rows.
    """

    def __init__(self, rows: list[dict[str, Any]], extras: list[dict[str, Any]] | None = None,
                 judge: str | None = None, threshold: float | None = None):
        for i, row in enumerate(rows):
            if not isinstance(row.get("passed"), bool):
                raise ValueError(f"row {i} has passed={row.get('passed')!r}; every scored row needs passed True or False")
        self.rows = rows
        self.extras = extras if extras is not None else [{} for _ in rows]
        self.judge = judge
        self.threshold = _threshold(threshold)

    @property
    def pass_rate(self) -> float:
        """Share of rows that passed (0 to 1); NaN for an empty set."""
        return sum(r["passed"] for r in self.rows) / len(self.rows) if self.rows else math.nan

    def passes(self) -> list[dict[str, Any]]:
        """The passing rows (what SFT should be pushed with: ``wai.push(scored.passes())``)."""
        return [r for r in self.rows if r["passed"]]

    def fails(self) -> list[dict[str, Any]]:
        """The failing rows."""
        return [r for r in self.rows if not r["passed"]]

    def select_for_preference(self, per_task: int | None = None) -> list[dict[str, Any]]:
        """Preference pairs: per task, a pass against a fail, length matched.

        Per task, the pass/fail pairs closest in ``completion_chars`` are taken
        first, each row used once, up to ``per_task`` pairs
        (``PREFERENCE_PAIRS_PER_TASK`` when None). Tasks without both a pass and a
        fail give none. Each pair is ``{"chosen", "rejected", "task_id"}``.
        """
        return _length_matched_pairs(self.rows, [r["passed"] for r in self.rows], per_task)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.rows[index]

    def __repr__(self) -> str:
        rate = "n/a" if not self.rows else f"{self.pass_rate:.3f}"
        return f"ScoredData({len(self.rows)} rows, pass rate {rate}, judge={self.judge})"


def score_rows(rows: Sequence[Mapping[str, Any]], judge: Judge, threshold: float | None = None) -> ScoredData:
    """Grade ``rows`` with ``judge``: each row copied with ``reward`` and ``passed`` set (the input is never changed)."""
    verdicts = _score(rows, judge, threshold)
    scored_rows: list[dict[str, Any]] = []
    extras: list[dict[str, Any]] = []
    for row, (reward, passed, extra) in zip(rows, verdicts):
        copy = dict(row)
        copy["reward"] = reward
        copy["passed"] = passed
        scored_rows.append(copy)
        extras.append(extra)
    return ScoredData(scored_rows, extras, judge=_judge_name(judge), threshold=threshold)
