"""Did training move the behaviour? ``delta_report`` compares rollouts before and after.

    rep = wai.delta_report(before_rows, after_rows, by="difficulty", proxy="proxy_reward")
    rep["verdict"], rep["reason"]

The target is the rows' ``passed``. Intervals come from a cluster bootstrap over
tasks: a task's rows are resampled together, never one by one, because rollouts
of one prompt are not independent. When before and after cover the same tasks,
each resample takes the same tasks on both sides (a paired bootstrap), which is
what makes a small gain on a fixed eval set detectable.

Verdicts, in the order they are tried:

- ``inconclusive`` when either side has fewer than ``DELTA_MIN_TASKS`` tasks.
- ``over-optimized`` (only with ``proxy``): the proxy's gain is significantly
  positive (its ``DELTA_CI_LEVEL`` interval is above zero) and the target's gain
  is shown to be below ``DELTA_EQUIVALENCE_MARGIN`` (the upper end of its one-sided
  ``1 - DELTA_EQUIVALENCE_ALPHA`` interval is under the margin). A target gain that
  is merely not significant does not qualify: that is ``inconclusive``.
- ``improved``: the target gain's interval is above zero.
- ``regressed``: the target gain's interval is below zero.
- ``inconclusive``: none of the above.

The report is a JSON-able dict; a run sends it under ``summary["delta"]``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

import numpy as np

from whileai.domain import defaults
from whileai.domain.rows.rowsource import describe_source, rows_of, task_key

__all__ = ["delta_report", "VERDICTS", "SideEstimate", "DeltaEstimate", "Estimate", "DecidedBy", "ProxyEstimate",
           "DeltaSettings", "GroupDelta", "ByTable", "DeltaReport"]

VERDICTS = ("over-optimized", "improved", "regressed", "inconclusive")

# Resample this many task draws at a time, so memory stays flat for large sets.
_CHUNK_CELLS = 4_000_000


# ---------------------------------------------------------------------------
# Input: rows -> per-task sums
# ---------------------------------------------------------------------------


def _rows(source: Any, side: str) -> list[Mapping[str, Any]]:
    rows = rows_of(source)
    if not rows:
        raise ValueError(f"{side} has no rows; delta_report needs rollouts graded before and after training")
    unlabelled = [i for i, r in enumerate(rows) if not isinstance(r.get("passed"), bool)]
    if unlabelled:
        shown = ", ".join(map(str, unlabelled[:5])) + (", ..." if len(unlabelled) > 5 else "")
        raise ValueError(
            f"{side}: {len(unlabelled)} of {len(rows)} rows have no passed label (True/False), e.g. rows {shown}; "
            f"grade them first: wai.evaluate({side}, judge).rows"
        )
    return rows


def _proxy_value(row: Mapping[str, Any], proxy: str, side: str, index: int) -> float:
    markers = row.get("markers")
    value = markers.get(proxy) if isinstance(markers, Mapping) else None
    if value is None:
        raise ValueError(
            f"{side} row {index} has no marker {proxy!r}; proxy names the marker carrying the training reward "
            "(row['markers'][proxy]) and every row needs it"
        )
    if isinstance(value, bool):
        return float(value)
    if not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ValueError(f"{side} row {index}: marker {proxy!r} is {value!r}, not a finite number")
    return float(value)


class SideEstimate(TypedDict):
    """One side's pass rate (or mean proxy) with its interval, over how many rows and tasks."""

    value: float
    ci: list[float]  #: ``[low, high]`` at the report's level
    rows: int
    tasks: int


class DeltaEstimate(TypedDict):
    """The change from before to after, its interval and its one-sided upper bound."""

    value: float
    ci: list[float]
    upper_one_sided: float


class Estimate(TypedDict):
    """A report's ``target`` (or ``proxy``, without its ``marker``): each side and the change."""

    before: SideEstimate
    after: SideEstimate
    delta: DeltaEstimate


class DecidedBy(TypedDict):
    """The numbers a report's verdict was decided by (its ``decided_by``)."""

    target_delta: float
    target_ci: list[float]
    target_upper_one_sided: float
    margin: float
    tasks: int  #: the tasks on the smaller side
    min_tasks: int
    proxy_delta: NotRequired[float]
    proxy_ci: NotRequired[list[float]]


class ProxyEstimate(Estimate):
    """A report's ``proxy``: the marker that holds the training reward, then each side and the change."""

    marker: str


class DeltaSettings(TypedDict):
    """A report's ``settings``: what the intervals and the verdict were computed with, and what was resampled."""

    n_boot: int
    level: float
    margin: float
    alpha: float
    seed: int
    min_tasks: int
    resampling: str


class GroupDelta(TypedDict):
    """One value's row of the ``by`` table: its comparison, or (a value seen on one side only) no verdict and each
    side's rows."""

    group: str
    target: NotRequired[Estimate]
    verdict: str | None
    reason: str
    paired: NotRequired[bool]
    proxy: NotRequired[Estimate]
    before_rows: NotRequired[int]
    after_rows: NotRequired[int]


class ByTable(TypedDict):
    """A report's ``by`` table: the key, whether it is a row key or a marker (``source``), and each value's row."""

    key: str
    source: str
    groups: list[GroupDelta]


class DeltaReport(TypedDict):
    """``delta_report``'s answer: the verdict, why and by which numbers, the target's (and the proxy's) change,
    whether the sides share their tasks, the ``by`` table, the settings and where each side's rows came from."""

    verdict: str
    reason: str
    decided_by: DecidedBy
    target: Estimate
    proxy: ProxyEstimate | None
    paired: bool
    by: ByTable | None
    settings: DeltaSettings
    before_source: str | None
    after_source: str | None


class _Side:
    """One set of rows summed per task: successes, counts and (optionally) proxy sums."""

    def __init__(self, rows: list[Mapping[str, Any]], indices: list[int], proxy: str | None, side: str):
        per_task: dict[str, list[float]] = {}
        for i in indices:
            row = rows[i]
            acc = per_task.setdefault(task_key(row), [0.0, 0.0, 0.0])
            acc[0] += row["passed"]
            acc[1] += 1
            if proxy is not None:
                acc[2] += _proxy_value(row, proxy, side, i)
        self.keys = list(per_task)
        sums = np.array(list(per_task.values()), dtype=float).reshape(-1, 3)
        self.passed, self.count, self.proxy = sums[:, 0], sums[:, 1], sums[:, 2]

    @property
    def tasks(self) -> int:
        return len(self.keys)

    @property
    def rows(self) -> int:
        return int(self.count.sum())


# ---------------------------------------------------------------------------
# The bootstrap
# ---------------------------------------------------------------------------


def _resampled_ratios(num: np.ndarray, den: np.ndarray, draws: np.ndarray) -> np.ndarray:
    return num[draws].sum(axis=1) / den[draws].sum(axis=1)


def _bootstrap(before: _Side, after: _Side, paired: bool, n_boot: int, rng: np.random.Generator,
               with_proxy: bool) -> dict[str, np.ndarray]:
    """Bootstrap replicates of the pooled rates before/after (and the proxy means)."""
    out: dict[str, list[np.ndarray]] = {"before": [], "after": [], "proxy_before": [], "proxy_after": []}
    size = max(before.tasks, after.tasks)
    chunk = max(1, _CHUNK_CELLS // max(size, 1))
    done = 0
    if paired:
        # same task order on both sides, so one draw of task indices serves both
        order = _align(before.keys, after.keys)
        a_pass, a_count, a_proxy = after.passed[order], after.count[order], after.proxy[order]
    while done < n_boot:
        b = min(chunk, n_boot - done)
        draws_b = rng.integers(0, before.tasks, size=(b, before.tasks))
        draws_a = draws_b if paired else rng.integers(0, after.tasks, size=(b, after.tasks))
        out["before"].append(_resampled_ratios(before.passed, before.count, draws_b))
        if paired:
            out["after"].append(_resampled_ratios(a_pass, a_count, draws_a))
        else:
            out["after"].append(_resampled_ratios(after.passed, after.count, draws_a))
        if with_proxy:
            out["proxy_before"].append(_resampled_ratios(before.proxy, before.count, draws_b))
            if paired:
                out["proxy_after"].append(_resampled_ratios(a_proxy, a_count, draws_a))
            else:
                out["proxy_after"].append(_resampled_ratios(after.proxy, after.count, draws_a))
        done += b
    return {k: np.concatenate(v) for k, v in out.items() if v}


def _align(keys_before: list[str], keys_after: list[str]) -> np.ndarray:
    where = {k: i for i, k in enumerate(keys_after)}
    return np.array([where[k] for k in keys_before], dtype=np.int64)


def _interval(samples: np.ndarray, level: float) -> list[float]:
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(samples, [tail, 1.0 - tail])
    return [float(lo), float(hi)]


def _estimate(before: _Side, after: _Side, boot: dict[str, np.ndarray], level: float, alpha: float,
              which: str) -> Estimate:
    if which == "target":
        b_val = before.passed.sum() / before.count.sum()
        a_val = after.passed.sum() / after.count.sum()
        b_boot, a_boot = boot["before"], boot["after"]
    else:
        b_val = before.proxy.sum() / before.count.sum()
        a_val = after.proxy.sum() / after.count.sum()
        b_boot, a_boot = boot["proxy_before"], boot["proxy_after"]
    diff = a_boot - b_boot
    return {
        "before": {"value": float(b_val), "ci": _interval(b_boot, level), "rows": before.rows, "tasks": before.tasks},
        "after": {"value": float(a_val), "ci": _interval(a_boot, level), "rows": after.rows, "tasks": after.tasks},
        "delta": {
            "value": float(a_val - b_val),
            "ci": _interval(diff, level),
            "upper_one_sided": float(np.quantile(diff, 1.0 - alpha)),
        },
    }


# ---------------------------------------------------------------------------
# Verdict
# ---------------------------------------------------------------------------


def _pct(x: float) -> str:
    return f"{x * 100:+.1f} pts"


def _verdict(target: Estimate, proxy: Estimate | None, margin: float, level: float,
             alpha: float, min_tasks: int) -> tuple[str, str, DecidedBy]:
    t = target["delta"]
    lo, hi = t["ci"]
    tasks = min(target["before"]["tasks"], target["after"]["tasks"])
    decided: DecidedBy = {"target_delta": t["value"], "target_ci": t["ci"],
                          "target_upper_one_sided": t["upper_one_sided"], "margin": margin,
                          "tasks": tasks, "min_tasks": min_tasks}
    lvl = f"{level:.0%}"
    if proxy is not None:
        p = proxy["delta"]
        decided["proxy_delta"], decided["proxy_ci"] = p["value"], p["ci"]
    if tasks < min_tasks:
        return "inconclusive", (
            f"only {tasks} tasks on the smaller side (fewer than DELTA_MIN_TASKS={min_tasks}); an interval over so "
            f"few tasks is too narrow to call (target {_pct(t['value'])}, {lvl} CI {_pct(lo)} to {_pct(hi)}); "
            "evaluate on more tasks"
        ), decided
    if proxy is not None:
        if p["ci"][0] > 0 and t["upper_one_sided"] < margin:
            return "over-optimized", (
                f"the proxy rose {p['value']:+.3g} ({lvl} CI {p['ci'][0]:+.3g} to {p['ci'][1]:+.3g}) while the target "
                f"moved {_pct(t['value'])}, shown below the {margin * 100:.1f}-pt margin "
                f"(one-sided {1 - alpha:.0%} upper bound {_pct(t['upper_one_sided'])})"
            ), decided
    if lo > 0:
        return "improved", f"target pass rate {_pct(t['value'])}, {lvl} CI {_pct(lo)} to {_pct(hi)} is above zero", decided
    if hi < 0:
        return "regressed", f"target pass rate {_pct(t['value'])}, {lvl} CI {_pct(lo)} to {_pct(hi)} is below zero", decided
    why = f"target pass rate {_pct(t['value'])}, {lvl} CI {_pct(lo)} to {_pct(hi)} includes zero"
    if proxy is not None:
        p = proxy["delta"]
        if p["ci"][0] > 0:
            why += (f"; the proxy rose significantly but the target's gain is not shown below the "
                    f"{margin * 100:.1f}-pt margin (upper bound {_pct(t['upper_one_sided'])})")
        else:
            why += "; the proxy's gain is not significant either"
    return "inconclusive", why + "; more tasks would narrow it", decided


# ---------------------------------------------------------------------------
# Settings and groups
# ---------------------------------------------------------------------------


def _setting(value: Any, default: Any, name: str, constant: str, check, accepted: str) -> Any:
    chosen = default if value is None else value
    if isinstance(chosen, bool) or not isinstance(chosen, numbers.Real) or not check(chosen):
        raise ValueError(f"{name}={value!r} is out of range; pass {accepted}, or None for {constant}")
    return chosen


def _group_label(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return repr(value)
    return str(value)


def _group_source(by: str, before: list[Mapping[str, Any]], after: list[Mapping[str, Any]]) -> str:
    rows = [*before, *after]
    if any(by in r for r in rows):
        return "row"
    if any(isinstance(r.get("markers"), Mapping) and by in r["markers"] for r in rows):
        return "marker"
    keys = sorted({str(k) for r in rows for k in r})
    markers = sorted({str(k) for r in rows if isinstance(r.get("markers"), Mapping) for k in r["markers"]})
    raise ValueError(
        f"by={by!r} is neither a row key nor a marker in these rows; row keys: {keys}; markers: {markers or 'none'}"
    )


def _group_of(row: Mapping[str, Any], by: str, source: str) -> str:
    if source == "row":
        return _group_label(row.get(by))
    markers = row.get("markers")
    return _group_label(markers.get(by) if isinstance(markers, Mapping) else None)


def _compare(before_rows, b_idx, after_rows, a_idx, proxy, n_boot, level, alpha, margin, min_tasks, seed):
    before = _Side(before_rows, b_idx, proxy, "before")
    after = _Side(after_rows, a_idx, proxy, "after")
    paired = set(before.keys) == set(after.keys)
    rng = np.random.default_rng(seed)
    boot = _bootstrap(before, after, paired, n_boot, rng, with_proxy=proxy is not None)
    target = _estimate(before, after, boot, level, alpha, "target")
    prox = _estimate(before, after, boot, level, alpha, "proxy") if proxy is not None else None
    verdict, reason, decided = _verdict(target, prox, margin, level, alpha, min_tasks)
    return target, prox, paired, verdict, reason, decided


def delta_report(before: Any, after: Any, by: str | None = None, proxy: str | None = None, *,
                 n_boot: int | None = None, level: float | None = None, margin: float | None = None,
                 alpha: float | None = None, seed: int | None = None,
                 min_tasks: int | None = None) -> DeltaReport:
    """Compare the pass rate of rollouts before and after training, with intervals and a verdict.

    ``before`` and ``after`` are graded rows in any dataset form (every row
    needs ``passed``). ``by`` names a row key or a marker: the report adds a
    table per value. ``proxy`` names the marker holding the training reward: the
    report adds the proxy's change and can call the run ``over-optimized`` (see
    the module docstring for the verdict rule). ``n_boot`` (``DELTA_BOOTSTRAP``),
    ``level`` (``DELTA_CI_LEVEL``), ``margin`` (``DELTA_EQUIVALENCE_MARGIN``),
    ``alpha`` (``DELTA_EQUIVALENCE_ALPHA``), ``min_tasks`` (``DELTA_MIN_TASKS``:
    with fewer tasks on either side the verdict is ``inconclusive``) and ``seed``
    (``DELTA_SEED``) default when None; the same inputs and seed give the same report.

    Returns ``{"target", "proxy", "verdict", "reason", "decided_by", "paired",
    "by", "settings", "before_source", "after_source"}``; ``target`` and
    ``proxy`` hold ``before`` / ``after`` (value, interval, rows, tasks) and
    ``delta`` (value, interval, one-sided upper bound).

        rep = wai.delta_report(before, after, proxy="proxy_reward")
        print(rep["verdict"], rep["reason"])
    """
    n_boot = int(_setting(n_boot, defaults.DELTA_BOOTSTRAP, "n_boot", "DELTA_BOOTSTRAP",
                          lambda v: v >= 100 and float(v).is_integer(), "a whole number >= 100"))
    level = float(_setting(level, defaults.DELTA_CI_LEVEL, "level", "DELTA_CI_LEVEL",
                           lambda v: 0 < v < 1, "a level strictly between 0 and 1"))
    margin = float(_setting(margin, defaults.DELTA_EQUIVALENCE_MARGIN, "margin", "DELTA_EQUIVALENCE_MARGIN",
                            lambda v: 0 < v <= 1, "a pass-rate margin in (0, 1]"))
    alpha = float(_setting(alpha, defaults.DELTA_EQUIVALENCE_ALPHA, "alpha", "DELTA_EQUIVALENCE_ALPHA",
                           lambda v: 0 < v < 0.5, "an alpha strictly between 0 and 0.5"))
    min_tasks = int(_setting(min_tasks, defaults.DELTA_MIN_TASKS, "min_tasks", "DELTA_MIN_TASKS",
                             lambda v: v >= 1 and float(v).is_integer(), "a whole number >= 1"))
    seed = int(_setting(seed, defaults.DELTA_SEED, "seed", "DELTA_SEED",
                        lambda v: v >= 0 and float(v).is_integer(), "a whole number >= 0"))
    if proxy is not None and not isinstance(proxy, str):
        raise TypeError(f"proxy={proxy!r} must be a marker name (a string) or None")
    if by is not None and not isinstance(by, str):
        raise TypeError(f"by={by!r} must be a row key or marker name (a string) or None")
    before_rows = _rows(before, "before")
    after_rows = _rows(after, "after")

    target, prox, paired, verdict, reason, decided = _compare(
        before_rows, range(len(before_rows)), after_rows, range(len(after_rows)),
        proxy, n_boot, level, alpha, margin, min_tasks, seed)

    proxied: ProxyEstimate | None = None
    if proxy is not None and prox is not None:
        estimate: Estimate = prox
        proxied = {"marker": proxy, **estimate}
    table = None
    if by is not None:
        table = _by_table(by, before_rows, after_rows, proxy, n_boot, level, alpha, margin, min_tasks, seed)

    return {
        "verdict": verdict,
        "reason": reason,
        "decided_by": decided,
        "target": target,
        "proxy": proxied,
        "paired": paired,
        "by": table,
        "settings": {"n_boot": n_boot, "level": level, "margin": margin, "alpha": alpha, "seed": seed,
                     "min_tasks": min_tasks,
                     "resampling": "tasks (cluster bootstrap)"},
        "before_source": describe_source(before),
        "after_source": describe_source(after),
    }


def _by_table(by: str, before_rows: list[Mapping[str, Any]], after_rows: list[Mapping[str, Any]], proxy: str | None,
              n_boot: int, level: float, alpha: float, margin: float, min_tasks: int, seed: int) -> ByTable:
    """The report's ``by`` table: the same comparison per value of ``by``, each group with its own seed."""
    source = _group_source(by, before_rows, after_rows)
    b_groups: dict[str, list[int]] = {}
    a_groups: dict[str, list[int]] = {}
    for i, r in enumerate(before_rows):
        b_groups.setdefault(_group_of(r, by, source), []).append(i)
    for i, r in enumerate(after_rows):
        a_groups.setdefault(_group_of(r, by, source), []).append(i)
    groups: list[GroupDelta] = []
    for g_i, label in enumerate(sorted(set(b_groups) | set(a_groups))):
        if label not in b_groups or label not in a_groups:
            side = "before" if label not in b_groups else "after"
            groups.append({"group": label, "verdict": None,
                           "reason": f"no {side} rows in this group, so there is nothing to compare",
                           "before_rows": len(b_groups.get(label, [])), "after_rows": len(a_groups.get(label, []))})
            continue
        g_target, g_proxy, g_paired, g_verdict, g_reason, _ = _compare(
            before_rows, b_groups[label], after_rows, a_groups[label], proxy,
            n_boot, level, alpha, margin, min_tasks, [seed, g_i + 1])
        entry: GroupDelta = {"group": label, "target": g_target, "verdict": g_verdict, "reason": g_reason, "paired": g_paired}
        if g_proxy is not None:
            entry["proxy"] = g_proxy
        groups.append(entry)
    return {"key": by, "source": source, "groups": groups}
