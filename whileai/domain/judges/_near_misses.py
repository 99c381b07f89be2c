"""Near-miss negatives: a passing row's first action changed in one place, judged to fail.

A reward model trained only on the rollouts' own pass-vs-fail pairs sees few
mistakes of the kind that is hardest to tell: the right tool with a wrong value.
On the kit's sample task such pairs stayed at chance however long the
head trained, while it told every other kind apart. These pairs supply that
kind in bulk. For each passing row whose first assistant turn is a structured
tool call, one argument of one call is changed by one rule:

- ``value``: the value another row gives the same tool's same argument (so the
  wrong value is one the data really holds: another city, another unit);
- ``nearby``: a number moved a little (by one, or by NEAR_MISS_NUMBER_SHIFT of itself);
- ``swap``: two arguments of the same type trade values (from and to swapped);

and for a passing row whose first turn is a final answer:

- ``answer``: the final answer another row gives to another prompt.

The changed row keeps the prompt and ends at the changed turn (what a reward
model reads with ``reward_span="first_action"``). Each one is judged with the
first-action judge against the row's own ``gold`` and kept only when it fails,
so no pair ever ranks a correct action below another correct one; rows without
a gold are left alone. FC-RewardBench (arXiv:2509.11963) counts wrong parameter
values as the commonest tool-call error (650 of 1,500 pairs), ahead of wrong
function names.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Mapping
from typing import Any, TypedDict

from whileai.domain import defaults
from whileai.domain.rows.actions import content_text, parse_arguments
from whileai.domain.rows.taskkey import task_key

__all__ = ["near_miss_pairs", "NEAR_MISS_RULES", "NearMissSummary"]

#: Every rule, in the order a summary lists them.
NEAR_MISS_RULES = ("value", "nearby", "swap", "answer")


class NearMissSummary(TypedDict):
    """What :func:`near_miss_pairs` made: its pairs, the rows that gave at least one, the changes left out because
    the judge still passed them, and the pairs per rule (every rule of NEAR_MISS_RULES, in that order)."""

    pairs: int
    rows: int
    still_passed: int
    by_rule: dict[str, int]


def _first_turn(row: Mapping[str, Any]) -> tuple[int, Mapping[str, Any]] | None:
    for i, message in enumerate(row.get("messages") or []):
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            return i, message
    return None


def _calls(turn: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]] | None:
    """``[(name, arguments)]`` of a turn's structured tool calls; None when any call is not a named object call."""
    out = []
    for call in turn.get("tool_calls") or []:
        fn = call.get("function") if isinstance(call, Mapping) else None
        args = parse_arguments(fn.get("arguments")) if isinstance(fn, Mapping) else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not isinstance(args, dict):
            return None
        out.append((fn["name"], args))
    return out or None


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _nearby(value: int | float) -> list[Any]:
    """Numbers next to ``value``: one either side, and NEAR_MISS_NUMBER_SHIFT of it either side."""
    if isinstance(value, int):
        step = max(1, round(abs(value) * defaults.NEAR_MISS_NUMBER_SHIFT))
        return sorted({value - 1, value + 1, value - step, value + step} - {value})
    shift = abs(value) * defaults.NEAR_MISS_NUMBER_SHIFT or 1.0
    return sorted({round(value - shift, 6), round(value + shift, 6)} - {value})


class _Pools:
    """What the rows hold: each tool argument's values, and the distinct final answers."""

    def __init__(self, rows: list[Mapping[str, Any]]):
        self.values: dict[tuple[str, str], dict[str, Any]] = {}
        self.answers: dict[str, str] = {}
        for row in rows:
            first = _first_turn(row)
            if first is None:
                continue
            calls = _calls(first[1])
            if calls:
                for name, args in calls:
                    for arg, value in args.items():
                        self.values.setdefault((name, arg), {}).setdefault(_key(value), value)
            elif not first[1].get("tool_calls"):
                text = content_text(first[1].get("content")).strip()
                if text:
                    self.answers.setdefault(text, text)

    def options(self, turn: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """``(rule, how)`` for every change this turn allows; ``how`` says where and picks the new value."""
        calls = _calls(turn)
        if calls is None:
            if turn.get("tool_calls"):
                return []
            own = content_text(turn.get("content")).strip()
            others = [a for a in self.answers if a != own]
            return [("answer", others)] if own and others else []
        out: list[tuple[str, Any]] = []
        for index, (name, args) in enumerate(calls):
            for arg, value in args.items():
                others = [v for k, v in self.values.get((name, arg), {}).items() if k != _key(value)]
                if others:
                    out.append(("value", (index, arg, others)))
                if _is_number(value):
                    out.append(("nearby", (index, arg, _nearby(value))))
            names = sorted(args)
            for i, a in enumerate(names):
                for b in names[i + 1:]:
                    if type(args[a]) is type(args[b]) and _key(args[a]) != _key(args[b]):
                        out.append(("swap", (index, a, b)))
        return out


def _changed_turn(turn: Mapping[str, Any], rule: str, how: Any, rng: random.Random) -> dict[str, Any]:
    new = copy.deepcopy(dict(turn))
    if rule == "answer":
        new["content"] = rng.choice(how)
        return new
    index = how[0]
    call = new["tool_calls"][index]
    fn = call["function"]
    args = parse_arguments(fn.get("arguments"))
    if rule == "swap":
        _, a, b = how
        args[a], args[b] = args[b], args[a]
    else:
        _, arg, choices = how
        args[arg] = copy.deepcopy(rng.choice(choices))
    # the arguments keep the row's own spelling: a JSON string stays a string
    fn["arguments"] = json.dumps(args) if isinstance(fn.get("arguments"), str) else args
    return new


def near_miss_pairs(rows: list[Mapping[str, Any]], per_row: int, seed: int,
                    judge: Callable[[Mapping[str, Any]], Mapping[str, Any]]) -> tuple[list[dict[str, Any]], NearMissSummary]:
    """Up to ``per_row`` near-miss pairs for each passing row with a gold: ``(pairs, summary)``.

    Each pair is ``{"chosen", "rejected", "task_id", "near_miss"}``: the passing
    row, and a copy whose first assistant turn is changed by one rule (the
    module's docstring) and that ``judge`` (the first-action judge, passed in by
    ``judges.near_miss_pairs``) fails against the row's gold. The copy ends at that
    turn and carries ``passed=False``, ``reward=0.0`` and, for markers, only
    ``near_miss`` naming the rule. Distinct changes only; deterministic
    for ``seed``. ``summary`` counts the pairs per rule, the rows that gave at
    least one, and the changes left out because the judge still passed them.
    """
    if isinstance(per_row, bool) or not isinstance(per_row, int) or per_row < 0:
        raise ValueError(f"per_row={per_row!r} must be a whole number of near misses per passing row, 0 or more")
    rng = random.Random(seed)
    pools = _Pools(list(rows))
    pairs: list[dict[str, Any]] = []
    summary: NearMissSummary = {"pairs": 0, "rows": 0, "still_passed": 0, "by_rule": dict.fromkeys(NEAR_MISS_RULES, 0)}
    if per_row == 0:
        return pairs, summary
    for row in rows:
        first = _first_turn(row)
        if row.get("passed") is not True or row.get("gold") is None or first is None:
            continue
        position, turn = first
        options = pools.options(turn)
        seen: set[str] = set()
        made = 0
        for _ in range(per_row * defaults.NEAR_MISS_TRIES):
            if made == per_row or not options:
                break
            rule, how = rng.choice(options)
            new = _changed_turn(turn, rule, how, rng)
            signature = _key(new.get("tool_calls") or new.get("content"))
            if signature in seen:
                continue
            seen.add(signature)
            # the pass's own markers (its proxy reward, its failure kind "none") would misdescribe the copy
            rejected = {**row, "messages": [*list(row["messages"])[:position], new], "passed": False,
                        "reward": 0.0, "markers": {"near_miss": rule}}
            if judge(rejected)["passed"]:
                summary["still_passed"] += 1
                continue
            pairs.append({"chosen": row, "rejected": rejected, "task_id": task_key(row), "near_miss": rule})
            summary["by_rule"][rule] += 1
            made += 1
        summary["rows"] += bool(made)
    summary["pairs"] = len(pairs)
    return pairs, summary
