"""How sure a held-out result is: a Wilson interval for a rate, an exact McNemar test for a before/after.

Pure standard library, so every layer (the jobs that measure, the runner that
prints, the pages that draw) computes and words a result the same way.

    >>> lo, hi = wilson(39, 40)
    >>> round(lo, 3), round(hi, 3)
    (0.871, 0.996)
    >>> mcnemar_exact(1, 5)           # 1 prompt got worse, 5 got better
    0.21875
    >>> result = holdout_result([0] * 40, [1] * 39 + [0])
    >>> describe(0.0, 0.975, result)
    '0.000 -> 0.975 (39/40; 95% CI 0.87-1.00; paired p < 0.001)'

A held-out result (``holdout_result``) is a plain dict (typed as :class:`HoldoutResult`), kept on a run's
``summary["training"]["stats"]`` beside the per-prompt outcomes it came from
(``summary["training"]["outcomes"]``), so anyone can recompute it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any, Literal, TypedDict

from whileai.core import defaults

__all__ = ["HoldoutSide", "PairedTest", "HoldoutResult", "GroupResults", "HoldoutPower", "wilson", "constraints_text",
           "ConstraintsState", "constraints_state", "constraints_words", "NO_CONSTRAINTS_FILE", "CONSTRAINTS_NOT_RECORDED", "mcnemar_exact", "holdout_result", "describe", "p_text", "interval_text",
           "certainty_text", "status_text", "rate_text", "change_text", "smallest_significant_change",
           "holdout_power", "significance_word", "judged_text", "group_results", "group_lines"]

_TEST = "exact McNemar (two-sided binomial on the prompts that changed)"


class HoldoutSide(TypedDict):
    """One side (before or after) of a held-out result: the passes, the prompts, their rate and its Wilson interval."""

    passed: int
    n: int
    rate: float | None  #: None when the side has no prompt
    ci95: list[float]  #: ``[low, high]`` at STATS_CONFIDENCE (the key keeps its old name)


class PairedTest(TypedDict):
    """The exact McNemar test of a before/after over the same prompts."""

    test: str
    worsened: int  #: prompts that passed before and fail after
    improved: int  #: prompts that failed before and pass after
    p: float


class HoldoutResult(TypedDict):
    """``holdout_result``'s answer: n, each side (None where it has no outcome) and the paired test (None without one)."""

    n: int
    confidence: float
    before: HoldoutSide | None
    after: HoldoutSide | None
    paired: PairedTest | None


class GroupResults(TypedDict):
    """``group_results``' answer: the row field the prompts are grouped by, each group's result, each prompt's group."""

    field: str
    groups: dict[str, HoldoutResult | None]
    prompts: list[str]


class HoldoutPower(TypedDict):
    """``holdout_power``'s answer: the smallest change a held-out set can show, as a count, a share and a sentence."""

    n: int
    unit: str
    alpha: float
    min_change: int | None
    min_gain: float | None
    warning: str | None
    text: str


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson(k: int, n: int, confidence: float | None = None) -> tuple[float, float]:
    """The Wilson score interval of ``k`` successes in ``n`` trials (STATS_CONFIDENCE coverage by default).

    ``n == 0`` gives ``(0.0, 1.0)``: no trial says nothing. ``k == 0`` has lower bound 0 and
    ``k == n`` upper bound 1 exactly.
    """
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"wilson(k={k}, n={n}): k must be a count from 0 to n and n a count >= 0")
    if n == 0:
        return 0.0, 1.0
    z = _z(defaults.STATS_CONFIDENCE if confidence is None else confidence)
    p = k / n
    scale = 1 + z * z / n
    center = (p + z * z / (2 * n)) / scale
    half = z / scale * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    low = 0.0 if k == 0 else max(0.0, center - half)
    high = 1.0 if k == n else min(1.0, center + half)
    return low, high


def mcnemar_exact(b: int, c: int) -> float:
    """The two-sided exact McNemar p-value for ``b`` pairs that went 1 -> 0 and ``c`` that went 0 -> 1.

    Under "no change" each of the ``b + c`` discordant pairs is a fair coin, so p is
    twice the smaller binomial tail, capped at 1: ``min(1, 2 * sum_{i <= min(b, c)} C(n, i) / 2^n)``.
    No discordant pair gives 1.0.
    """
    if b < 0 or c < 0:
        raise ValueError(f"mcnemar_exact(b={b}, c={c}): both are counts of changed pairs, so >= 0")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    # exact integer arithmetic first, so a tail of 2^-60 is not rounded to 0
    return float(min(1.0, (2 * tail) / (2**n)))


def _side(outcomes: Sequence[Any]) -> HoldoutSide:
    n = len(outcomes)
    k = sum(1 for o in outcomes if o)
    low, high = wilson(k, n)
    return {"passed": k, "n": n, "rate": k / n if n else None, "ci95": [low, high]}


def holdout_result(before_outcomes: Sequence[Any] | None, after_outcomes: Sequence[Any] | None) -> HoldoutResult | None:
    """n, each side's count and Wilson interval, and the paired test when both sides are the same prompts.

    ``before_outcomes`` and ``after_outcomes`` are per-prompt pass/fail (truthy is a pass) in the same
    prompt order. Returns None when neither side has any outcome. The paired test needs both sides of
    one length; otherwise ``paired`` is None.

        {"n": 40, "before": {"passed": 0, "n": 40, "rate": 0.0, "ci95": [0.0, 0.088]},
         "after": {"passed": 39, ...}, "paired": {"test": ..., "worsened": 0, "improved": 39, "p": 3.6e-12}}
    """
    sides = {name: list(o) for name, o in (("before", before_outcomes), ("after", after_outcomes)) if o}
    if not sides:
        return None
    before, after = sides.get("before"), sides.get("after")
    paired: PairedTest | None = None
    if before is not None and after is not None and len(before) == len(after):
        worsened = sum(1 for x, y in zip(before, after) if x and not y)
        improved = sum(1 for x, y in zip(before, after) if y and not x)
        paired = {"test": _TEST, "worsened": worsened, "improved": improved, "p": mcnemar_exact(worsened, improved)}
    return {"n": len(sides.get("after") or sides["before"]), "confidence": defaults.STATS_CONFIDENCE,
            "before": _side(before) if before is not None else None,
            "after": _side(after) if after is not None else None, "paired": paired}


def group_results(before_outcomes: Sequence[Any] | None, after_outcomes: Sequence[Any] | None,
                  groups: Sequence[Any] | None, field: str) -> GroupResults | None:
    """``holdout_result`` for each group of prompts: ``{"field", "groups": {value: result}, "prompts": [...]}``.

    ``groups`` is sorted by value; ``prompts`` keeps each prompt's group in prompt order, beside the
    run's per-prompt outcomes, so every group's test can be recomputed.

    ``groups`` gives each prompt's value of the row field ``field`` (None where a row has none: grouped
    as ``(no <field>)``), in the prompt order of the outcomes. None when no prompt names a group, or
    when the groups and outcomes are not of one length (nothing to pair them by).

        >>> group_results([0, 0, 1, 0], [1, 1, 1, 0], ["a", "a", "b", "b"], "category")["groups"]["a"]["paired"]["improved"]
        2
    """
    sides = [list(o) for o in (before_outcomes, after_outcomes) if o]
    if not groups or all(v is None for v in groups) or not sides or any(len(side) != len(groups) for side in sides):
        return None
    keys = [str(v) if v is not None else f"(no {field})" for v in groups]
    out: dict[str, HoldoutResult | None] = {}
    for key in sorted(set(keys)):
        picked = [i for i, k in enumerate(keys) if k == key]
        before, after = ([o[i] for i in picked] if o else None for o in (before_outcomes, after_outcomes))
        out[key] = holdout_result(before, after)
    return {"field": field, "groups": out, "prompts": keys}


def group_lines(by_group: GroupResults | None) -> list[str]:
    """The per-group lines under a held-out figure: a heading, then ``value  n=30  0.100 -> 0.600, ...``.

    Each line is the group's before and after with its n and paired p (``judged_text``); empty when
    ``by_group`` (``group_results``' answer, as a run's ``training["by_group"]`` keeps it) names fewer
    than two groups (one group's line would repeat the overall figure).
    """
    if not isinstance(by_group, dict):
        return []
    groups = by_group.get("groups")
    if not isinstance(groups, dict) or len(groups) < 2:
        return []
    width = max(len(str(name)) for name in groups)
    lines = [f"per {by_group.get('field') or 'group'} ({len(groups)}):"]
    for name, result in groups.items():
        if not isinstance(result, dict):
            continue
        before, after = result.get("before"), result.get("after")
        figure = judged_text(before.get("rate") if before else None, after.get("rate") if after else None, result)
        lines.append(f"  {str(name):<{width}}  n={result.get('n')!s:<4} {figure}")
    return lines


def p_text(p: float) -> str:
    """``p < 0.001`` under STATS_P_SHOWN_FLOOR, else ``p = 0.031`` (three decimals)."""
    floor = defaults.STATS_P_SHOWN_FLOOR
    return f"p < {floor:g}" if p < floor else f"p = {p:.3f}"


def interval_text(side: HoldoutSide | None) -> str | None:
    """``39/40; 95% CI 0.87-1.00`` for one side of a holdout_result, or None."""
    if not isinstance(side, dict) or not side.get("n"):
        return None
    low, high = side["ci95"]
    return f"{side['passed']}/{side['n']}; {round(100 * defaults.STATS_CONFIDENCE)}% CI {low:.2f}-{high:.2f}"


def describe(before: float | None, after: float | None, result: HoldoutResult | None) -> str:
    """One line for a held-out before/after: ``0.000 -> 0.975 (39/40; 95% CI 0.87-1.00; paired p < 0.001)``.

    Without a result the line is the two rates alone (see ``certainty_text``).
    """
    line = change_text(before, after)
    sure = certainty_text(result)
    return f"{line} ({sure})" if sure else line


def significance_word(result: HoldoutResult | None, alpha: float | None = None) -> str | None:
    """What the paired test says of a before/after, in words: ``significant gain``, ``no significant change``
    or ``significant loss`` at p < ``alpha`` (STATS_ALPHA when None); None without a paired test.

        >>> significance_word(holdout_result([0] * 40, [1] * 39 + [0]))
        'significant gain'
        >>> significance_word(holdout_result([0, 0, 1, 1], [1, 0, 1, 1]))
        'no significant change'
    """
    paired = result.get("paired") if isinstance(result, dict) else None
    if not isinstance(paired, dict) or not isinstance(paired.get("p"), (int, float)):
        return None
    level = defaults.STATS_ALPHA if alpha is None else float(alpha)
    if paired["p"] >= level or paired.get("improved") == paired.get("worsened"):
        return "no significant change"
    return "significant gain" if (paired.get("improved") or 0) > (paired.get("worsened") or 0) else "significant loss"


def judged_text(before: float | None, after: float | None, result: HoldoutResult | None) -> str:
    """``describe`` with the paired test's verdict beside the figure, where a person reads the figure:
    ``0.000 -> 0.975, significant gain (39/40; 95% CI 0.87-1.00; paired p < 0.001)``."""
    word = significance_word(result)
    line = change_text(before, after) + (f", {word}" if word else "")
    sure = certainty_text(result)
    return f"{line} ({sure})" if sure else line


def certainty_text(result: HoldoutResult | None) -> str | None:
    """The part of ``describe`` in brackets: ``39/40; 95% CI 0.87-1.00; paired p < 0.001`` (None without a result).

    The count and interval are the after side's (the before side's when there is no after).
    """
    if not isinstance(result, dict):
        return None
    parts = [interval_text(result.get("after") or result.get("before"))]
    paired = result.get("paired")
    if isinstance(paired, dict) and isinstance(paired.get("p"), (int, float)):
        parts.append(f"paired {p_text(paired['p'])}")
    shown = [p for p in parts if p]
    return "; ".join(shown) or None


def constraints_text(differ: Any) -> str | None:
    """``installed packages differ from constraints.txt: transformers 5.25.0 (pinned 5.24.0)``, from a run's
    ``constraints_differ`` (``{name: {"pinned", "installed"}}``); None when it names no package."""
    if not isinstance(differ, dict) or not differ:
        return None
    items = []
    for name, pair in sorted(differ.items(), key=lambda item: str(item[0])):
        pair = pair if isinstance(pair, dict) else {}
        items.append(f"{name} {pair.get('installed') or 'not installed'} (pinned {pair.get('pinned')})")
    return f"installed packages differ from {defaults.CONSTRAINTS_FILE}: " + ", ".join(items)


#: What a runner's record says of its installed packages against the constraints file (``constraints_state``)
ConstraintsState = Literal["compared", "no file", "not recorded"]
#: ``constraints_words`` of a record that had no constraints file to compare with (an installed wheel has none)
NO_CONSTRAINTS_FILE = f"no {defaults.CONSTRAINTS_FILE} to compare with"
#: what the run page says where a record does not say (one from before the comparison was recorded, or another
#: caller's); ``diff`` leaves such an entry out, as nothing is known to differ
CONSTRAINTS_NOT_RECORDED = "not recorded"


def constraints_state(runner: Any) -> ConstraintsState:
    """Whether a runner's record (its JSON, ``core.runnerrecord``) compared the installed packages with a constraints
    file: ``compared`` (``constraints_differ`` holds the differences, ``{}`` when all match), ``no file`` (its
    ``constraints_file`` says none was found), or ``not recorded``. A record from before ``constraints_file`` that
    holds differences compared; one whose ``constraints_differ`` is null or absent does not say which it was.

        >>> constraints_state({"constraints_differ": {}, "constraints_file": {"name": "constraints.txt", "found": True}})
        'compared'
        >>> constraints_state({"constraints_differ": None, "constraints_file": {"name": "constraints.txt", "found": False}})
        'no file'
        >>> constraints_state({"constraints_differ": None})
        'not recorded'
    """
    if not isinstance(runner, dict):
        return "not recorded"
    compared = runner.get("constraints_file")
    if isinstance(compared, dict) and compared.get("found") is False:
        return "no file"
    return "compared" if isinstance(runner.get("constraints_differ"), dict) else "not recorded"


def constraints_words(runner: Any) -> str | None:
    """What a runner's record says of its installed packages against the constraints file, in the words ``diff``,
    ``reproduce`` and the run page print: the packages that differ (``constraints_text``), ``none`` when all match,
    or NO_CONSTRAINTS_FILE; None where the record does not say (``constraints_state``: not recorded).

        >>> constraints_words({"constraints_differ": None, "constraints_file": {"name": "constraints.txt", "found": False}})
        'no constraints.txt to compare with'
    """
    state = constraints_state(runner)
    if state == "not recorded":
        return None
    if state == "no file":
        return NO_CONSTRAINTS_FILE
    return constraints_text(runner["constraints_differ"]) or "none"


def status_text(status: Any, expect: Any) -> str:
    """A run's status with its expect verdict: ``done · expect failed``, ``done · expect passed``, or the status alone.

    ``expect`` is the run's ``summary["expect"]`` (``{"passed", "lines"}``, set by the runner), or
    None for a run no expect block checked. A run that failed its expect never reads plain "done".
    """
    word = str(status) if status is not None else "unknown"
    if not isinstance(expect, dict) or not expect.get("lines"):
        return word
    return f"{word} · expect {'passed' if expect.get('passed') else 'failed'}"


def rate_text(value: Any) -> str:
    """A held-out rate or loss as every surface shows it: ``0.900`` (STATS_RATE_DECIMALS), ``-`` when absent.

    The terminal's summary, ``runs``, ``diff`` and the pages (which receive the text with the
    number) all call this one function, so ``0.9`` never reads as ``0.900`` in one place and ``0.9``
    in another.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return "-"
    return f"{value:.{defaults.STATS_RATE_DECIMALS}f}"


def change_text(before: Any, after: Any, arrow: str = "->") -> str:
    """``0.000 -> 0.900``: a before/after with rate_text on both sides."""
    return f"{rate_text(before)} {arrow} {rate_text(after)}"


def smallest_significant_change(n: int, alpha: float | None = None) -> int | None:
    """The fewest held-out prompts that must change (all the same way) for exact McNemar to give p < alpha.

    With ``k`` prompts changed and none the other way, ``mcnemar_exact(0, k) = 2 / 2^k``; the answer is
    the smallest such ``k``, or None when even all ``n`` prompts changing would not be significant
    (then no result on this held-out set can be). ``alpha`` is STATS_ALPHA when None.

        >>> smallest_significant_change(40)     # 2 / 2^6 = 0.031 < 0.05
        6
        >>> smallest_significant_change(2) is None
        True
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n={n!r} is not a count of held-out prompts; pass an int >= 0")
    level = defaults.STATS_ALPHA if alpha is None else float(alpha)
    if not 0 < level <= 1:
        raise ValueError(f"alpha={alpha!r} is outside (0, 1]; pass a significance level such as 0.05")
    for k in range(1, n + 1):
        if mcnemar_exact(0, k) < level:
            return k
    return None


def holdout_power(n: int, alpha: float | None = None, unit: str = "prompt",
                  growth: str = "more rows, or a larger dataset.holdout share") -> HoldoutPower:
    """What a held-out set of ``n`` prompts (or pairs: ``unit``) can show, before anything is trained.

    ``{"n", "unit", "alpha", "min_change", "min_gain", "text", "warning"}``: ``min_change`` units (and
    ``min_gain``, that count as a share of n) is the smallest change exact McNemar can call
    significant at ``alpha``; ``warning`` is a sentence when no result can be (None otherwise), whose fix
    names ``growth``: what gives the held-out side more (the caller knows how its data is cut).
    """
    level = defaults.STATS_ALPHA if alpha is None else float(alpha)
    k = smallest_significant_change(n, level)
    units = f"{unit}(s)"
    turning = "turning from fail to pass" if unit == "prompt" else "turning from wrong to right"
    warning = None
    if k is None:
        need = smallest_significant_change(10**6, level) or 0
        text = f"{n} held-out {units}: no change on them can be significant at p < {level:g} (exact McNemar)"
        warning = (f"no result on {n} held-out {units} can be significant at p < {level:g}: exact McNemar "
                   f"needs at least {need} {unit}s that change the same way. Give the held-out side more "
                   f"{unit}s ({growth}), or drop "
                   f"expect.holdout_gain_significant")
    else:
        text = (f"{n} held-out {units}: the smallest change that can be significant at p < {level:g} "
                f"(exact McNemar) is {k} {units} {turning} with none the other way "
                f"(a gain of {rate_text(k / n)})")
    return {"n": n, "unit": unit, "alpha": level, "min_change": k,
            "min_gain": (k / n if k is not None and n else None), "warning": warning, "text": text}
