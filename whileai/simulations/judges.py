"""Judges: score rollout rows, measure a judge against labels, and build preference pairs.

A judge is any callable ``judge(row) -> float | {"reward": float, "passed"?: bool, ...}``.
A plain function is a judge; so is ``reward_model(run)``. When the judge does not
say ``passed``, a row passes when its reward is at least ``JUDGE_PASS_THRESHOLD``
(or the ``threshold=`` given). Other keys a judge returns are kept beside the
row (``ScoredData.extras``), never written into it.

    scored = wai.evaluate(rows, wai.first_action_judge)
    scored.pass_rate
    wai.push(scored.passes(), name="weather-passes")
    pairs = scored.select_for_preference()
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from . import defaults
from ._actions import action_matches, first_action, json_equal, parse_arguments
from ._rowsource import rows_of, task_key

__all__ = [
    "Judge",
    "first_action_judge",
    "make_first_action_judge",
    "first_action",
    "action_matches",
    "normalise_judgement",
    "evaluate",
    "ScoredData",
    "judge_trust",
    "judge_pairs",
    "build_preference_pairs",
    "completion_chars",
]

Judge = Callable[[Mapping[str, Any]], Any]


# ---------------------------------------------------------------------------
# The judge contract
# ---------------------------------------------------------------------------


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


def first_action_judge(row: Mapping[str, Any]) -> dict[str, Any]:
    """Deterministic judge: the row's first assistant action against its ``gold``.

    For a tool-call gold (``{"name", "arguments"}``) the first tool call of the
    first assistant turn must name the same tool with the same arguments,
    compared as parsed JSON: key order and number spelling (``1`` vs ``1.0``) do
    not matter; a missing or extra argument, a wrong tool name, or arguments
    encoded twice (a JSON string holding a JSON string) fail. For an answer gold
    (``{"answer": str}``) the first assistant turn must be a final answer whose
    text equals the gold after normalising case, whitespace and trailing
    punctuation. Returns ``{"reward": 1.0 | 0.0, "passed": bool, "reason": str}``.

        wai.evaluate(rows, wai.first_action_judge).pass_rate
    """
    row = row if isinstance(row, Mapping) else rows_of([row])[0]
    gold = row.get("gold")
    if gold is None:
        raise ValueError(
            "first_action_judge needs the row's 'gold' (the reference first action: "
            "{'name', 'arguments'} or {'answer'}); this row has none. Add gold to the rows, or use another judge"
        )
    ok, reason = action_matches(first_action(row.get("messages") or []), gold)
    return {"reward": 1.0 if ok else 0.0, "passed": ok, "reason": reason}


def make_first_action_judge(*, ignore_arguments: tuple[str, ...] | list[str] = (),
                            partial_credit: bool = False) -> Judge:
    """A first-action judge with options; ``make_first_action_judge()`` behaves as ``first_action_judge``.

    ``ignore_arguments`` names arguments left out of the comparison on both
    sides (a request id, a timestamp). ``partial_credit=True`` rewards the right
    tool with the share of gold arguments matched, less a share for each extra
    argument, floored at 0 (a denser reward for a grouped method); ``passed``
    still needs an exact match.

        judge = make_first_action_judge(ignore_arguments=["request_id"])
    """
    ignored = frozenset(ignore_arguments)

    def _drop(value: Any) -> Any:
        return {k: v for k, v in value.items() if k not in ignored} if isinstance(value, Mapping) else value

    def judge(row: Mapping[str, Any]) -> dict[str, Any]:
        row = row if isinstance(row, Mapping) else rows_of([row])[0]
        gold = row.get("gold")
        if gold is None:
            return first_action_judge(row)  # raises the missing-gold error
        action = first_action(row.get("messages") or [])
        if ignored and isinstance(gold, Mapping) and "name" in gold:
            gold = {**gold, "arguments": _drop(parse_arguments(gold.get("arguments")))}
            if action is not None and "name" in action:
                action = {**action, "arguments": _drop(action["arguments"])}
        ok, reason = action_matches(action, gold)
        reward = 1.0 if ok else 0.0
        if partial_credit and not ok and action is not None and isinstance(gold, Mapping) and "name" in gold \
                and action.get("name") == gold["name"]:
            got, want = action["arguments"], parse_arguments(gold.get("arguments"))
            if isinstance(got, Mapping) and isinstance(want, Mapping) and want:
                matched = sum(1 for k in want if k in got and json_equal(got[k], want[k]))
                extra = len(got.keys() - want.keys())
                reward = max(0.0, (matched - extra) / len(want))
        return {"reward": reward, "passed": ok, "reason": reason}

    judge.__name__ = "first_action_judge"
    return judge


# ---------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------


def _judge_name(judge: Any) -> str:
    return getattr(judge, "__name__", None) or type(judge).__name__


def _check_judge(judge: Any) -> None:
    if not callable(judge):
        raise TypeError(
            f"judge={judge!r} is not callable; pass a function row -> reward (e.g. wai.first_action_judge) "
            "or wai.reward_model(run)"
        )


def _score(rows: list[Mapping[str, Any]], judge: Judge, threshold: float | None) -> list[tuple[float, bool, dict[str, Any]]]:
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
    from ._actions import canonical_arguments_text, content_text

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


def _length_matched_pairs(rows: list[Mapping[str, Any]], passed: list[bool | None], per_task: int | None) -> list[dict[str, Any]]:
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


def evaluate(rollouts: Any, judge: Judge, threshold: float | None = None) -> ScoredData:
    """Grade every row with ``judge`` and return the ``ScoredData``.

    ``rollouts`` is a row list, SimulationData, ScoredData, JSONL path or pushed
    dataset. The rows are copied; the input is never changed.

        scored = wai.evaluate("rollouts.jsonl", wai.first_action_judge)
    """
    rows = rows_of(rollouts)
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


# ---------------------------------------------------------------------------
# Trusting a judge, judging pairs, building pairs
# ---------------------------------------------------------------------------


def _kappa(tp: int, fp: int, fn: int, tn: int) -> float | None:
    n = tp + fp + fn + tn
    observed = (tp + tn) / n
    judge_pass, label_pass = (tp + fp) / n, (tp + fn) / n
    expected = judge_pass * label_pass + (1 - judge_pass) * (1 - label_pass)
    if expected >= 1.0:
        return None  # both raters used one class only: agreement by chance is certain, kappa undefined
    return (observed - expected) / (1 - expected)


def judge_trust(rows: Any, judge: Judge, threshold: float | None = None) -> dict[str, Any]:
    """How far to trust ``judge``: its verdicts against the rows' own ``passed`` labels.

    Returns ``n`` (labelled rows compared), ``accuracy``, Cohen's ``kappa``
    (agreement beyond chance; None when both sides use a single class),
    ``confusion`` (``tp``: both pass, ``fp``: judge passes a labelled fail,
    ``fn``: judge fails a labelled pass, ``tn``: both fail), the pass rates of
    each side, ``unlabelled`` (rows without a label, skipped) and
    ``disagreements``: ``[{"index", "label", "judge", "reward"}]``.

        wai.judge_trust(scored.rows, judge=wai.reward_model(run))["kappa"]
    """
    all_rows = rows_of(rows)
    labelled = [(i, r) for i, r in enumerate(all_rows) if isinstance(r.get("passed"), bool)]
    if not labelled:
        raise ValueError(
            f"none of the {len(all_rows)} rows carries a passed label (True/False), so there is nothing to "
            "compare the judge with; pass rows labelled by a judge you trust or by hand"
        )
    verdicts = _score([r for _, r in labelled], judge, threshold)
    tp = fp = fn = tn = 0
    disagreements = []
    for (index, row), (reward, passed, _extra) in zip(labelled, verdicts):
        label = row["passed"]
        if passed and label:
            tp += 1
        elif passed:
            fp += 1
        elif label:
            fn += 1
        else:
            tn += 1
        if passed != label:
            disagreements.append({"index": index, "label": label, "judge": passed, "reward": reward})
    n = len(labelled)
    return {
        "n": n,
        "accuracy": (tp + tn) / n,
        "kappa": _kappa(tp, fp, fn, tn),
        "confusion": {"tp": tp, "fp": fp, "fn": fn, "tn": tn},
        "judge_pass_rate": (tp + fp) / n,
        "label_pass_rate": (tp + fn) / n,
        "unlabelled": len(all_rows) - n,
        "disagreements": disagreements,
        "judge": _judge_name(judge),
    }


def _tie_tolerance(tie: float | None) -> float:
    value = defaults.JUDGE_TIE_TOLERANCE if tie is None else tie
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0:
        raise ValueError(f"tie={tie!r} must be a number >= 0; pass one, or None for JUDGE_TIE_TOLERANCE")
    return float(value)


def judge_pairs(pairs: Any, judge: Judge, tie: float | None = None) -> list[dict[str, Any]]:
    """Score both sides of each pair; orient it so ``chosen`` is the winner, or mark a tie.

    Each pair is ``{"chosen": row, "rejected": row, ...}`` (or a two-item
    sequence). The answer is a new list of new pairs: ``winner`` is ``"chosen"``
    or ``"tie"`` (rewards within ``tie``, ``JUDGE_TIE_TOLERANCE`` when None), and
    ``rewards`` holds both scores. Other keys of a pair (``task_id``) are kept.
    A tie keeps the given orientation; the exporters leave ties out.
    """
    _check_judge(judge)
    tolerance = _tie_tolerance(tie)
    out: list[dict[str, Any]] = []
    for i, pair in enumerate(pairs):
        if isinstance(pair, Mapping):
            if "chosen" not in pair or "rejected" not in pair:
                raise ValueError(f"pair {i} lacks 'chosen' or 'rejected' (keys: {sorted(map(str, pair))}); "
                                 "a pair is {'chosen': row, 'rejected': row}")
            base = dict(pair)
        elif isinstance(pair, (list, tuple)) and len(pair) == 2:
            base = {"chosen": pair[0], "rejected": pair[1]}
        else:
            raise TypeError(f"pair {i} is a {type(pair).__name__}; pass {{'chosen': row, 'rejected': row}} or (row, row)")
        a, b = base["chosen"], base["rejected"]
        ra = normalise_judgement(judge(a), where=f"pair {i} chosen")[0]
        rb = normalise_judgement(judge(b), where=f"pair {i} rejected")[0]
        if abs(ra - rb) <= tolerance:
            base.update(winner="tie", rewards={"chosen": ra, "rejected": rb})
        elif ra > rb:
            base.update(winner="chosen", rewards={"chosen": ra, "rejected": rb})
        else:
            base.update(chosen=b, rejected=a, winner="chosen", rewards={"chosen": rb, "rejected": ra})
        out.append(base)
    return out


def build_preference_pairs(rows: Any, per_task: int | None = None) -> list[dict[str, Any]]:
    """Pass-vs-fail pairs from rows already labelled ``passed``, by the ``select_for_preference`` rule.

    Rows without a ``passed`` label are left out. Each pair is
    ``{"chosen", "rejected", "task_id"}``.
    """
    all_rows = rows_of(rows)
    labels = [r.get("passed") if isinstance(r.get("passed"), bool) else None for r in all_rows]
    return _length_matched_pairs(all_rows, labels, per_task)
