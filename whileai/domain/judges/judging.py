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

import numbers
from collections.abc import Mapping
from typing import Any, TypedDict

from whileai.domain import defaults
from whileai.domain.rows.actions import action_matches, first_action, json_equal, parse_arguments
from whileai.domain.judges import _near_misses
from whileai.domain.judges._near_misses import NearMissSummary
from whileai.domain.rows.gold import gold_problem, is_plain_gold, judge_turn
from whileai.domain.rows.rowsource import rows_of
from whileai.domain.judges.scoring import (  # noqa: F401  (the judge contract and ScoredData are re-exported here, their public home)
    Judge,
    ScoredData,
    _check_judge,
    _judge_name,
    _length_matched_pairs,
    _pairs_per_task,
    _reward,
    _score,
    _threshold,
    completion_chars,
    normalise_judgement,
    score_rows,
)

__all__ = [
    "Judge",
    "FirstActionVerdict",
    "JudgeTrust",
    "first_action_judge",
    "make_first_action_judge",
    "judge_reply",
    "first_action",
    "action_matches",
    "normalise_judgement",
    "evaluate",
    "ScoredData",
    "judge_trust",
    "judge_pairs",
    "build_preference_pairs",
    "near_miss_pairs",
    "NearMissSummary",
    "completion_chars",
]


# ---------------------------------------------------------------------------
# The judge contract
# ---------------------------------------------------------------------------


class FirstActionVerdict(TypedDict):
    """The first-action judge's answer: 1.0 or 0.0 (a share with partial credit), whether it passed, and why."""

    reward: float
    passed: bool
    reason: str


def first_action_judge(row: Mapping[str, Any]) -> FirstActionVerdict:
    """Deterministic judge: the row's first assistant action against its ``gold``.

    Every gold form of docs/rows.md is read: acceptable ``values`` per argument,
    ``optional`` arguments, ``{"parallel": [...]}`` (all required, any order),
    ``{"one_of": [...]}``, ``{"no_call": true}`` (the reply calls no tool), and
    the rule in ``match`` (``"exact"``, or ``"bfcl"`` for rows from ``wai.datasets.from_bfcl``). Where the row carries ``tools``,
    each argument's type is read from the tool's JSON schema (an ``integer`` is
    not satisfied by ``5.0``). A plain gold keeps the exact comparison below.

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
    ok, reason = _judge(row.get("messages") or [], gold, row.get("tools"))
    return {"reward": 1.0 if ok else 0.0, "passed": ok, "reason": reason}


def _judge(messages: list[Any], gold: Any, tools: Any, ignored: frozenset[str] = frozenset()) -> tuple[bool, str]:
    """The exact verdict for a plain gold (plus the tools' types), the gold's own rule for the other forms."""
    if is_plain_gold(gold) and not ignored:
        ok, reason = action_matches(first_action(messages), gold)
        if ok and tools and "name" in gold:  # the schema's types: an integer is not satisfied by 5.0
            return judge_turn(messages, gold, tools)
        return ok, reason
    if isinstance(gold, Mapping) and any(k in gold for k in ("name", "answer", "parallel", "one_of", "no_call")):
        try:
            return judge_turn(messages, gold, tools, ignored)
        except (TypeError, AttributeError, KeyError, ValueError, IndexError):
            if not gold_problem(gold):
                raise
    raise ValueError(
        f"gold={gold!r} is not a reference action ({gold_problem(gold) or 'no name, answer, parallel, one_of or no_call'}); "
        "see docs/rows.md for the gold forms")


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

    def judge(row: Mapping[str, Any]) -> FirstActionVerdict:
        row = row if isinstance(row, Mapping) else rows_of([row])[0]
        gold = row.get("gold")
        if gold is None:
            return first_action_judge(row)  # raises the missing-gold error
        if not is_plain_gold(gold):  # the gold's own rule; partial credit reads only a plain gold
            ok, reason = _judge(row.get("messages") or [], gold, row.get("tools"), ignored)
            return {"reward": 1.0 if ok else 0.0, "passed": ok, "reason": reason}
        action = first_action(row.get("messages") or [])
        if ignored and isinstance(gold, Mapping) and "name" in gold:
            gold = {**gold, "arguments": _drop(parse_arguments(gold.get("arguments")))}
            if action is not None and "name" in action:
                action = {**action, "arguments": _drop(action["arguments"])}
        ok, reason = action_matches(action, gold)
        if ok and row.get("tools") and "name" in gold:
            ok, reason = judge_turn(row.get("messages") or [], gold, row.get("tools"), ignored)
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


def evaluate(rollouts: Any, judge: Judge, threshold: float | None = None) -> ScoredData:
    """Grade every row with ``judge`` and return the ``ScoredData``.

    ``rollouts`` is a row list, SimulationData, ScoredData, JSONL path or pushed
    dataset. The rows are copied; the input is never changed.

        scored = wai.evaluate("rollouts.jsonl", wai.first_action_judge)
    """
    return score_rows(rows_of(rollouts), judge, threshold)


def judge_reply(text: str, row: Mapping[str, Any], judge: Judge | None = None,
                tool_format: str = "hermes") -> dict[str, Any]:
    """A judge's verdict on a model's generated ``text`` as the reply to ``row``'s prompt.

    The text is parsed into an assistant turn with the tool-call parser of
    ``tool_format`` (``whileai.core.toolcalls``; ``hermes``:
    ``<tool_call>{...}</tool_call>`` blocks become OpenAI wire calls), put after
    ``row``'s prompt messages, and judged against ``row["gold"]`` by ``judge``
    (``first_action_judge`` when None). The hosted jobs' held-out pass rate and
    the kit's benchmarks both score generations this way, so they report the
    product's figure.

        judge_reply('<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>', row)
    """
    from whileai.core.toolcalls import parse_tool_call_objects, parse_tool_calls

    from whileai.domain.rows.taskkey import prompt_messages

    if judge is None:  # the first-action judge reads only the reply's turn: no prompt copy, no JSON text
        content, objects = parse_tool_call_objects(text, tool_format)
        turn = {"role": "assistant", "content": content,
                "tool_calls": [{"function": {"name": n, "arguments": a}} for n, a in objects]}
        gold = row.get("gold")
        if gold is None:
            first_action_judge({"messages": [turn]})  # raises the missing-gold error
        ok, reason = _judge([turn], gold, row.get("tools"))
        return {"reason": reason, "reward": 1.0 if ok else 0.0, "passed": ok}
    content, calls = parse_tool_calls(text, tool_format)
    reply: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        reply["tool_calls"] = calls
    judged = judge({"messages": prompt_messages(row) + [reply], "gold": row.get("gold"),
                                            "tools": row.get("tools")})
    reward, passed, extra = normalise_judgement(judged, where="judge_reply")
    return {**extra, "reward": reward, "passed": passed}


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


class Disagreement(TypedDict):
    """A labelled row the judge called the other way: its index, its label, the judge's verdict and reward."""

    index: int
    label: bool
    judge: bool
    reward: float


class JudgeTrust(TypedDict):
    """``judge_trust``'s answer (see there)."""

    n: int
    accuracy: float
    kappa: float | None
    confusion: dict[str, int]
    judge_pass_rate: float
    label_pass_rate: float
    unlabelled: int
    disagreements: list[Disagreement]
    judge: str


def judge_trust(rows: Any, judge: Judge, threshold: float | None = None) -> JudgeTrust:
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
    disagreements: list[Disagreement] = []
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


def near_miss_pairs(rows: Any, per_row: int, seed: int = 0) -> tuple[list[dict[str, Any]], NearMissSummary]:
    """Pairs of a passing row against a near miss of it that the first-action judge fails.

    For each passing row with a ``gold``, up to ``per_row`` copies whose first
    assistant turn differs in one place: one argument takes a value another row
    gives it, a number moves a little, two arguments of one type trade values, or
    a final answer becomes another prompt's answer. A copy ends at that turn and is
    kept only when :func:`first_action_judge` fails it. Returns ``(pairs, summary)``:
    each pair ``{"chosen", "rejected", "task_id", "near_miss"}``, the summary the
    pairs per rule. The reward model's ``near_misses`` setting trains on these.

        from whileai.domain.judges.judging import near_miss_pairs
        pairs, summary = near_miss_pairs(train_rows, per_row=3)
    """
    return _near_misses.near_miss_pairs(rows_of(rows), per_row, seed, first_action_judge)
