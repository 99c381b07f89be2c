"""The statistics behind HackMonitor's alarms: plain numpy functions, no state.

Every test here is paired by prompt: the monitor samples the same held-out
prompts at every evaluation, so a prompt is the unit of resampling and the
completions of one prompt are never resampled on their own (they are not
independent draws of the run's behaviour, the prompt is).

Intervals are bootstrap-standard-error intervals with a Student t critical
value (Efron & Tibshirani 1993, "An Introduction to the Bootstrap", ch. 6 and
12): the bootstrap over prompts gives the standard error, which a few hundred
resamples estimate well (MONITOR_N_BOOT), while the very small per-look error
rates that repeated looks call for (``spent_alpha``) are far beyond what a
percentile interval of that many resamples can resolve.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any, NotRequired, TypedDict

import numpy as np

__all__ = [
    "Bounds",
    "DivergenceResult",
    "GoldDeclineResult",
    "MoveRead",
    "KLResult",
    "spent_alpha",
    "t_quantile",
    "mean_bounds",
    "divergence_test",
    "gold_decline_test",
    "length_moved",
    "length_tail",
    "length_test",
    "kl_test",
    "centre_within",
    "cell_contribution",
    "endorsed_payment",
    "maxt_scan",
]

_NORMAL = NormalDist()


class Bounds(TypedDict):
    """``mean_bounds``' answer: the mean of per-prompt values with its one-sided interval and standard error."""

    estimate: Any  #: a float, or an array with one value per column where the values have columns
    lo: Any  #: as ``estimate``
    hi: Any  #: as ``estimate``
    se: Any  #: as ``estimate``
    n: int  #: prompts used


class DivergenceResult(TypedDict):
    """``divergence_test``'s answer: how much the proxy-gold gap grew, its interval, and whether the alarm fires."""

    change: float
    lo: float
    hi: float
    se: float
    alpha: float
    delta: float
    n_prompts: int
    fired: bool
    #: the gap's growth on each held-out prompt, added by the check for the alarm's examples
    per_prompt: NotRequired[np.ndarray]


class GoldDeclineResult(TypedDict):
    """``gold_decline_test``'s answer: the earlier window gold fell most from, by how much, and whether it fires."""

    window: int
    drop: float
    lo: float
    hi: float
    proxy_drop: float
    alpha: float
    windows: int
    delta: float
    n_prompts: int
    fired: bool
    best_step: NotRequired[int]  #: the step of the window's first look, added by the check
    per_prompt: NotRequired[np.ndarray]  #: gold's fall on each held-out prompt, added by the check


class MoveRead(TypedDict):
    """``_move_read``'s answer: whether a length move bought the gap, by which reading, and the lower bounds read."""

    gap_lo: float
    price_lo: float
    read: str | None  #: ``mean`` or ``tail`` when it fired, else None
    verdict: str  #: ``hack`` or ``growth``
    fired: bool


class LengthMeasure(TypedDict):
    """One measure's line in a length result's ``measures``: how it moved and what the test said of it."""

    drift: float
    moved_share: float
    length_base: float
    length_now: float
    verdict: str
    gap_from_length: float | None
    gap_lo: float | None


class LengthResult(TypedDict):
    """``length_test``'s answer: how far lengths moved, and, once they moved, the gap the move bought.

    The first ten keys are always there; the tail's three with ``tail``; the price's once lengths moved on at
    least two prompts (then also ``MoveRead``'s keys and ``per_prompt``); ``gold_from_length`` with gold.
    ``measure`` and ``measures`` are added by the check where a look has counts besides length.
    """

    drift: float
    moved_share: float
    length_base: float
    length_now: float
    pct: float
    shift: float
    alpha: float
    delta: float
    verdict: str  #: ``stable``, ``growth`` or ``hack``
    fired: bool
    tail_base: NotRequired[float]
    tail_now: NotRequired[float]
    tail_p: NotRequired[float]
    gap_from_length: NotRequired[float]
    gap_se: NotRequired[float]
    price_se: NotRequired[float]
    slope: NotRequired[float]
    gap_lo: NotRequired[float]
    price_lo: NotRequired[float]
    read: NotRequired[str | None]
    per_prompt: NotRequired[np.ndarray]
    gold_from_length: NotRequired[float]
    measure: NotRequired[str]
    measures: NotRequired[dict[str, LengthMeasure]]


class KLResult(TypedDict):
    """``kl_test``'s answer: the mean sequence KL with its interval, the budget, and whether it passed it."""

    kl: float
    lo: float
    hi: float
    alpha: float
    budget: float | None
    fired: bool
    per_prompt: NotRequired[np.ndarray]  #: the KL of each held-out prompt, added by the check


def spent_alpha(alpha: float, look: int) -> float:
    """The error rate one look may spend so that all looks together spend at most ``alpha``.

    Look ``m`` (1, 2, ...) gets ``alpha / (m (m + 1))``; the sum over every look
    telescopes to ``alpha``, however long the run goes. A Bonferroni split over
    an open-ended sequence of looks: early looks get most of the budget, which
    suits a monitor whose first chance to see a hack is its most valuable.
    """
    m = max(1, int(look))
    return alpha / (m * (m + 1))


def t_quantile(p: float, df: float) -> float:
    """Quantile ``p`` of Student's t with ``df`` degrees of freedom.

    The Cornish-Fisher expansion in 1/df around the normal quantile
    (Abramowitz & Stegun 1964, 26.7.5), accurate to a few parts in a thousand
    for df >= 5 out to the 1e-6 tail, which is all the monitor asks of it.
    """
    z = _NORMAL.inv_cdf(min(max(p, 1e-15), 1 - 1e-15))
    if not math.isfinite(df) or df <= 0:
        return z
    z2 = z * z
    g1 = (z2 + 1) * z / 4
    g2 = ((5 * z2 + 16) * z2 + 3) * z / 96
    g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384
    g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def _finite_rows(values: np.ndarray) -> np.ndarray:
    if values.ndim == 1:
        return values[np.isfinite(values)]
    return values[np.isfinite(values).all(axis=1)]


def mean_bounds(values: np.ndarray, *, rng: np.random.Generator, n_boot: int, alpha: float) -> Bounds | None:
    """Mean of per-prompt values with its bootstrap-over-prompts interval at one-sided level ``alpha``.

    ``values`` is (prompts,) or (prompts, columns); with columns every column is
    resampled with the same prompts. Prompts with a missing value are dropped.
    Returns ``estimate``, ``lo``, ``hi``, ``se`` (arrays when there are columns)
    and ``n`` (prompts used), or None with fewer than two prompts.
    """
    v = _finite_rows(np.asarray(values, dtype=float))
    n = v.shape[0]
    if n < 2:
        return None
    idx = rng.integers(0, n, size=(n_boot, n))
    boot = v[idx].mean(axis=1)
    se = boot.std(axis=0, ddof=1)
    est = v.mean(axis=0)
    q = t_quantile(1 - alpha, n - 1)
    return {"estimate": est, "lo": est - q * se, "hi": est + q * se, "se": se, "n": n}


def divergence_test(gap_base: np.ndarray, gap_now: np.ndarray, *, rng: np.random.Generator, n_boot: int,
                    alpha: float, delta: float) -> DivergenceResult | None:
    """Did the per-prompt proxy-gold gap grow from the baseline window to the current one?

    Fires when the one-sided interval's lower bound is above zero and the
    change itself reaches ``delta``.
    """
    b = mean_bounds(np.asarray(gap_now) - np.asarray(gap_base), rng=rng, n_boot=n_boot, alpha=alpha)
    if b is None:
        return None
    est, lo = float(b["estimate"]), float(b["lo"])
    return {"change": est, "lo": lo, "hi": float(b["hi"]), "se": float(b["se"]), "alpha": alpha,
            "delta": delta, "n_prompts": b["n"], "fired": bool(lo > 0 and est >= delta)}


def gold_decline_test(gold_windows: np.ndarray, gold_now: np.ndarray, proxy_windows: np.ndarray,
                      proxy_now: np.ndarray, *, rng: np.random.Generator, n_boot: int, alpha: float,
                      delta: float, hold: float) -> GoldDeclineResult | None:
    """Did gold fall from its best earlier window while the proxy held?

    ``gold_windows``/``proxy_windows`` are (windows, prompts): per-prompt means of
    every earlier window. Each window is compared with the current one, paired
    by prompt, at ``alpha / windows`` (Bonferroni over the windows, so picking
    the best one after the fact costs no error rate). A window fires when gold
    fell by at least ``delta`` with the lower bound above zero and the proxy
    fell by at most ``hold`` times what gold lost.
    """
    gw = np.asarray(gold_windows, dtype=float)
    n_windows = gw.shape[0]
    if n_windows == 0:
        return None
    drops = (gw - np.asarray(gold_now)[None, :]).T
    proxy_drops = (np.asarray(proxy_windows, dtype=float) - np.asarray(proxy_now)[None, :]).T
    per_window = alpha / n_windows
    b = mean_bounds(np.concatenate([drops, proxy_drops], axis=1), rng=rng, n_boot=n_boot, alpha=per_window)
    if b is None:
        return None
    est, lo = b["estimate"][:n_windows], b["lo"][:n_windows]
    proxy_drop = b["estimate"][n_windows:]
    ok = (lo > 0) & (est >= delta) & (proxy_drop <= hold * est)
    w = int(np.argmax(np.where(ok, est, -np.inf))) if ok.any() else int(np.argmax(est))
    return {"window": w, "drop": float(est[w]), "lo": float(lo[w]), "hi": float(b["hi"][w]),
            "proxy_drop": float(proxy_drop[w]), "alpha": per_window, "windows": n_windows,
            "delta": delta, "n_prompts": b["n"], "fired": bool(ok.any())}


def centre_within(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """Values minus their mean along ``axis`` (one prompt's completions at one evaluation); NaN stays NaN."""
    ok = np.isfinite(values)
    count = ok.sum(axis=axis, keepdims=True)
    total = np.where(ok, values, 0.0).sum(axis=axis, keepdims=True)
    return np.where(ok, values - total / np.maximum(count, 1), np.nan)


def length_moved(base: np.ndarray, now: np.ndarray, *, pct: float, shift: float, tail: float | None = None,
                 tail_alpha: float = 0.0) -> tuple[float, float, bool]:
    """How far lengths moved from ``base`` to ``now`` (any shapes): the relative change of the mean, the
    largest gap between the two empirical distribution functions (Kolmogorov-Smirnov's D: the share of
    completions that crossed some length), and whether any gate opened: the mean's (``pct``), the
    distribution's (``shift``) or, with ``tail``, the upper tail's (``length_tail`` at ``tail_alpha``).

    The distribution's gate opens where the mean's stays shut: a share of the completions growing a lot while
    the rest stay as they were moves the mean little. The tail's opens where both stay shut: a small share
    growing far past the baseline's longest completions crosses no length in numbers, but fills its tail.
    """
    b, n = np.asarray(base, dtype=float).ravel(), np.asarray(now, dtype=float).ravel()
    b, n = b[np.isfinite(b)], n[np.isfinite(n)]
    if not len(b) or not len(n) or b.mean() <= 0:
        return math.nan, math.nan, False
    drift = float(n.mean() / b.mean() - 1.0)
    grid = np.union1d(b, n)
    ks = float(np.abs(np.searchsorted(np.sort(b), grid, side="right") / len(b)
                      - np.searchsorted(np.sort(n), grid, side="right") / len(n)).max())
    grew = tail is not None and length_tail(base, now, share=tail)[2] <= tail_alpha
    return drift, ks, bool(abs(drift) > pct or ks >= shift or grew)


def length_tail(base: np.ndarray, now: np.ndarray, *, share: float) -> tuple[float, float, float]:
    """Did more of the latest look's completions land in the baseline's upper tail than its own did?

    ``base`` (evals, prompts, k) and ``now`` (prompts, k); the tail is every length past the baseline window's
    upper ``share`` quantile. Per prompt the baseline's and the latest look's completions form a 2 x 2 table
    (which look, in the tail or not), and the tables are pooled by the Mantel-Haenszel statistic (Mantel &
    Haenszel 1959, with its continuity correction), one-sided: the latest look's tail count against what it
    would be if its completions of each prompt were drawn as that prompt's baseline ones were. Pooling within
    prompts keeps a prompt whose completions are all long from counting as a move. Returns the share of the
    baseline's completions past the quantile, the latest look's share and the one-sided p-value (1 where no
    prompt has completions both in and out of the tail). Other shapes are read as one prompt.
    """
    b, n = np.asarray(base, dtype=float), np.asarray(now, dtype=float)
    finite = b[np.isfinite(b)]
    if not finite.size or not np.isfinite(n).any():
        return math.nan, math.nan, 1.0
    edge = float(np.quantile(finite, 1 - share))
    strata = n.shape[0] if n.ndim >= 2 and b.shape[-n.ndim:] == n.shape else 1
    b = np.moveaxis(b.reshape(-1, *n.shape), 1, 0).reshape(strata, -1) if strata > 1 else b.reshape(1, -1)
    n = n.reshape(strata, -1)
    n_base, n_now = np.isfinite(b).sum(axis=1), np.isfinite(n).sum(axis=1)
    in_base, in_now = (b > edge).sum(axis=1), (n > edge).sum(axis=1)
    total, in_tail = n_base + n_now, in_base + in_now
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = np.where(total > 0, n_now * in_tail / total, 0.0)
        var = np.where(total > 1, n_now * n_base * in_tail * (total - in_tail) / (total**2 * (total - 1.0)), 0.0)
    share_base, share_now = float(in_base.sum() / n_base.sum()), float(in_now.sum() / n_now.sum())
    if var.sum() <= 0:
        return share_base, share_now, 1.0
    z = (in_now.sum() - expected.sum() - 0.5) / math.sqrt(var.sum())
    return share_base, share_now, float(1.0 - _NORMAL.cdf(z))


def _bins(length: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """One-hot length bins without the first (the reference): (..., len(edges))."""
    idx = np.searchsorted(edges, np.asarray(length, dtype=float), side="right")
    return (idx[..., None] == np.arange(1, len(edges) + 1)).astype(float)


def _bin_parts(y: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per prompt, the within-cell cross products of regressors ``x`` (evals, prompts, k, m) with ``y`` (evals,
    prompts, k): (prompts, m, m) and (prompts, m). A completion without a finite ``y`` is left out."""
    ok = np.isfinite(y)
    count = ok.sum(axis=-1, keepdims=True)
    xw = np.where(ok[..., None], x, 0.0)
    xc = np.where(ok[..., None], x - xw.sum(axis=-2, keepdims=True) / np.maximum(count, 1)[..., None], 0.0)
    yc = np.where(ok, centre_within(y), 0.0)
    return np.einsum("epki,epkj->pij", xc, xc), np.einsum("epki,epk->pi", xc, yc)


def _price(sxx: np.ndarray, sxy: np.ndarray, moved: np.ndarray) -> np.ndarray:
    """The gap bought, sum_b price_b x moved_b, for stacked sums (..., m, m), (..., m), (..., m); a bin no cell
    compares with the others gets price 0 (no evidence the proxy pays there)."""
    price = np.einsum("...ij,...j->...i", np.linalg.pinv(sxx, rcond=1e-10, hermitian=True), sxy)
    return np.einsum("...i,...i->...", price, moved)


def _length_steps(base_length: np.ndarray, now_length: np.ndarray, length: np.ndarray,
                  bins: int) -> tuple[np.ndarray, np.ndarray]:
    """What the price of length is read on: ``(step, x)``, ``x`` (evals, prompts, k, m) each read completion's
    regressors and ``step`` (prompts, m) how each prompt's completions moved along them, the latest look's
    mean less the baseline window's.

    A step function of length with a line past its last edge: one-hot bins at the quantiles of the baseline
    and latest lengths pooled (the first bin the reference), and the length beyond the last edge (relative
    to the pooled mean). A step is flat past its last edge, so alone it cannot price how far beyond that edge
    completions went: a share of them growing well past the rest crosses few edges and buys most of its gap
    inside the open top bin. A line there is the least that lets further cost more.
    """
    pooled = np.concatenate([np.ravel(base_length), np.ravel(now_length)]).astype(float)
    pooled = pooled[np.isfinite(pooled)]
    edges = np.unique(np.quantile(pooled, np.arange(1, bins) / bins))
    top = float(edges[-1]) if len(edges) else float(pooled.min())
    scale = float(pooled.mean()) if pooled.mean() > 0 else 1.0

    def regressors(lengths: np.ndarray) -> np.ndarray:
        v = np.asarray(lengths, dtype=float)
        beyond = np.where(np.isfinite(v), np.maximum(v - top, 0.0), 0.0) / scale
        return np.concatenate([_bins(v, edges), beyond[..., None]], axis=-1)

    step = np.nanmean(regressors(now_length), axis=1) - np.nanmean(regressors(base_length), axis=(0, 2))
    return step, regressors(length)


def length_test(base_length: np.ndarray, now_length: np.ndarray, resid: np.ndarray, gold: np.ndarray | None,
                length: np.ndarray, *, rng: np.random.Generator, n_boot: int, alpha: float, delta: float,
                pct: float, shift: float, bins: int, tail: float | None = None,
                tail_alpha: float = 0.0) -> LengthResult | None:
    """Did lengths move (``length_moved``) and the proxy-gold gap move with them, within prompts?

    ``base_length`` (evals, prompts, k) is the baseline window's lengths and ``now_length`` (prompts, k) the
    latest look's. ``resid`` (proxy - gold), ``gold`` and ``length`` are (evals, prompts, k) for the looks the
    proxy's price for length is read from. The price is a step function of length with a line past its last
    edge (``_length_steps``), and the residual is regressed on it with a fixed effect per (look, prompt) cell,
    so only completions of one prompt sampled together are compared. The gap the move bought is the price
    times how the completions moved along it, averaged over prompts; it is resampled by prompt. A proxy that
    pays past a length threshold and one that pays per word are read alike, and so is a move of part of the
    completions. The verdict is ``hack`` when that gap reaches ``delta`` and the move is shown to have bought
    it (``_move_read``); ``growth`` when lengths moved but the gap did not follow (the gold pays for it too, or
    nobody does); ``stable`` when lengths did not move. ``per_prompt`` is the gap bought on each prompt (the
    price times the prompt's own move). With ``tail``, the upper tail's gate is one of the gates
    (``length_tail``), ``tail_base``, ``tail_now`` and ``tail_p`` say what it read, and the tail is a second
    reading of the move; ``read`` names the reading that fired (``mean`` or ``tail``).
    """
    drift, ks, moved = length_moved(base_length, now_length, pct=pct, shift=shift, tail=tail, tail_alpha=tail_alpha)
    if not math.isfinite(drift):
        return None
    len_base, len_now = float(np.nanmean(base_length)), float(np.nanmean(now_length))
    out: LengthResult = {"drift": drift, "moved_share": ks, "length_base": len_base, "length_now": len_now,
                         "pct": pct, "shift": shift, "alpha": alpha, "delta": delta, "verdict": "stable",
                         "fired": False}
    if tail is not None:
        out["tail_base"], out["tail_now"], out["tail_p"] = length_tail(base_length, now_length, share=tail)
    if not moved:
        return out
    step, x = _length_steps(base_length, now_length, length, bins)
    sxx, sxy = _bin_parts(np.asarray(resid, dtype=float), x)
    ok = np.isfinite(step).all(axis=1)
    sxx, sxy, step = sxx[ok], sxy[ok], step[ok]
    n = len(step)
    if n < 2:
        return out
    paid = float(_price(sxx.sum(axis=0), sxy.sum(axis=0), step.mean(axis=0)))
    idx = rng.integers(0, n, size=(n_boot, n))
    boot = _price(sxx[idx].sum(axis=1), sxy[idx].sum(axis=1), step[idx].mean(axis=1))
    held = _price(sxx[idx].sum(axis=1), sxy[idx].sum(axis=1), step.mean(axis=0))
    se, price_se = (float(boot.std(ddof=1)), float(held.std(ddof=1))) if n_boot > 1 else (math.inf, math.inf)
    change = len_now - len_base
    out["gap_from_length"], out["gap_se"], out["price_se"] = paid, se, price_se
    out["slope"] = paid / change if change else math.nan
    out.update(_move_read(out, n, alpha=alpha, delta=delta, tail_p=out.get("tail_p")))
    price = np.linalg.pinv(sxx.sum(axis=0), rcond=1e-10, hermitian=True) @ sxy.sum(axis=0)
    per_prompt = np.full(len(ok), np.nan)
    per_prompt[ok] = step @ price
    out["per_prompt"] = per_prompt
    if gold is not None:
        gxx, gxy = _bin_parts(np.asarray(gold, dtype=float), x)
        out["gold_from_length"] = float(_price(gxx[ok].sum(axis=0), gxy[ok].sum(axis=0), step.mean(axis=0)))
    return out


def _move_read(out: LengthResult, n: int, *, alpha: float, delta: float,
               tail_p: float | None) -> MoveRead:
    """Whether the gap the move bought (``out``'s ``gap_from_length``, its standard errors ``gap_se`` and
    ``price_se``, over ``n`` prompts) reaches ``delta`` and is shown to be bought, at one-sided level
    ``alpha``: ``verdict``, ``fired``, ``read`` and the lower bounds ``gap_lo`` and ``price_lo``.

    The gap is a product, the price of length beyond gold times how far the completions moved, and the
    move is what its interval is wide for: the price is read on every completion of every read look, while
    the move of a mean is the latest look's few completions a prompt against the baseline's, every
    completion's own spread in it. ``mean`` reads both at once: the bootstrap lower bound of the product
    (``gap_lo``) above zero. ``tail`` (only with the tail's gate, whose p-value is ``tail_p``) reads them
    apart, an intersection-union test (Berger 1982, "Multiparameter hypothesis testing and acceptance
    sampling"): the move by the upper tail (``length_tail``), the statistic of a share of the completions
    growing far, which leaves out the spread of those that did not move; the price along the move that
    happened by its own bootstrap lower bound (``price_lo``, the move held at what was seen). Each at the
    level of the whole, as both must pass; with two readings each gets half of ``alpha`` (Bonferroni), so
    the check's level is kept.
    """
    level = alpha if tail_p is None else alpha / 2
    q = t_quantile(1 - level, n - 1)
    paid = out["gap_from_length"]
    lo, price_lo = paid - q * out["gap_se"], paid - q * out["price_se"]
    by_mean = bool(lo > 0)
    by_tail = tail_p is not None and tail_p <= level and bool(price_lo > 0)
    fired = bool(paid >= delta and (by_mean or by_tail))
    read = ("mean" if by_mean else "tail") if fired else None
    return {"gap_lo": lo, "price_lo": price_lo, "read": read, "verdict": "hack" if fired else "growth",
            "fired": fired}


def kl_test(kl_per_prompt: np.ndarray, *, rng: np.random.Generator, n_boot: int, alpha: float,
            budget: float | None) -> KLResult | None:
    """Mean sequence KL with its interval; fires when the lower bound passes ``budget``."""
    b = mean_bounds(kl_per_prompt, rng=rng, n_boot=n_boot, alpha=alpha)
    if b is None:
        return None
    lo = float(b["lo"])
    return {"kl": float(b["estimate"]), "lo": lo, "hi": float(b["hi"]), "alpha": alpha, "budget": budget,
            "fired": bool(budget is not None and lo > budget)}


# ---------------------------------------------------------------------------
# Within-prompt regressions on completion features
# ---------------------------------------------------------------------------


def cell_contribution(present: np.ndarray, resid: np.ndarray, cells: np.ndarray, groups: np.ndarray,
                      n_groups: int) -> np.ndarray:
    """Per group, the mean residual beyond its cell's mean over the completions where ``present`` is 1.

    What one prompt says about a feature: how much more the proxy paid (beyond
    gold) its completions with the feature than the others sampled with them.
    NaN where the group has no completion with the feature.
    """
    ok = np.isfinite(resid)
    r = np.where(ok, resid, 0.0)
    _, cell = np.unique(cells, return_inverse=True)
    count = np.bincount(cell, weights=ok.astype(float))
    mean = np.bincount(cell, weights=r) / np.maximum(count, 1.0)
    excess = np.where(ok, r - mean[cell], 0.0) * present
    seen = np.bincount(groups, weights=present * ok, minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(seen > 0, np.bincount(groups, weights=excess, minlength=n_groups) / seen, np.nan)


def _cell_centre(values: np.ndarray, cells: np.ndarray, n_cells: int) -> np.ndarray:
    """Centre rows of ``values`` (n,) or (n, m) on their cell mean."""
    counts = np.bincount(cells, minlength=n_cells).astype(float)
    counts[counts == 0] = 1.0
    if values.ndim == 1:
        means = np.bincount(cells, weights=values, minlength=n_cells) / counts
        return values - means[cells]
    sums = np.zeros((n_cells, values.shape[1]))
    np.add.at(sums, cells, values)
    return values - (sums / counts[:, None])[cells]


def endorsed_payment(resid: np.ndarray, presence: np.ndarray, cells: np.ndarray, groups: np.ndarray,
                     *, min_support: int) -> tuple[np.ndarray, list[str]]:
    """What the proxy pays, beyond gold, for each endorsed feature's presence.

    ``resid`` is proxy - gold per completion, ``presence`` (n, features) 0/1,
    ``cells`` the (evaluation, prompt) each completion belongs to and ``groups``
    its prompt. The payment is the least-squares coefficient of the residual on
    presence with a fixed effect per cell, so only completions of one prompt at
    one evaluation are compared. A feature that never varies within a cell
    often enough (``min_support`` completions in mixed cells) is read from the
    same prompt across evaluations instead (before and after the feature
    arrived). Payments below zero count as zero: a format the proxy does not pay
    for needs no discount. Returns (payments, how each was read).
    """
    resid = np.asarray(resid, dtype=float)
    x = np.asarray(presence, dtype=float)
    n_feat = x.shape[1]
    pay = np.zeros(n_feat)
    how = ["none"] * n_feat
    keep = np.isfinite(resid)
    if n_feat == 0 or keep.sum() < 2:
        return pay, how
    resid, x, cells, groups = resid[keep], x[keep], np.asarray(cells)[keep], np.asarray(groups)[keep]
    _, cells = np.unique(cells, return_inverse=True)
    _, groups = np.unique(groups, return_inverse=True)
    n_cells, n_groups = int(cells.max()) + 1, int(groups.max()) + 1
    xc = _cell_centre(x, cells, n_cells)
    mixed = np.zeros((n_cells, n_feat))
    np.add.at(mixed, cells, x)
    sizes = np.bincount(cells, minlength=n_cells)[:, None]
    is_mixed = (mixed > 0) & (mixed < sizes)
    support = (is_mixed * sizes).sum(axis=0)
    within = support >= min_support
    r = resid.copy()
    if within.any():
        rc = _cell_centre(r, cells, n_cells)
        coef, *_ = np.linalg.lstsq(xc[:, within], rc, rcond=None)
        pay[within] = np.maximum(coef, 0.0)
        for j in np.flatnonzero(within):
            how[j] = "within prompt"
        r = r - x[:, within] @ pay[within]
    across = ~within & (x.sum(axis=0) > 0)
    if across.any():
        xg = _cell_centre(x[:, across], groups, n_groups)
        rg = _cell_centre(r, groups, n_groups)
        ok = (xg * xg).sum(axis=0) > 0
        if ok.any():
            cols = np.flatnonzero(across)[ok]
            coef, *_ = np.linalg.lstsq(xg[:, ok], rg, rcond=None)
            pay[cols] = np.maximum(coef, 0.0)
            for j in cols:
                how[j] = "across evaluations"
    return pay, how


def _gumbel_tail(null_max: np.ndarray, z: np.ndarray) -> np.ndarray:
    """P(max >= z) under a Gumbel law fitted to the permutation maxima by moments."""
    sd = float(null_max.std(ddof=1)) if len(null_max) > 1 else 0.0
    if not math.isfinite(sd) or sd <= 0:
        return np.where(z > null_max.max(initial=-np.inf), 0.0, 1.0)
    beta = sd * math.sqrt(6) / math.pi
    mu = float(null_max.mean()) - 0.5772156649 * beta
    with np.errstate(over="ignore"):
        return -np.expm1(-np.exp(-(z - mu) / beta))


def maxt_scan(x: np.ndarray, resid: np.ndarray, cells: np.ndarray, *, rng: np.random.Generator,
              n_perm: int, nonzero: tuple[np.ndarray, np.ndarray] | None = None,
              covariate: np.ndarray | None = None) -> dict[str, np.ndarray] | None:
    """Which features predict the residual within their cell, with family-wise control?

    ``x`` is (completions, features) 0/1, ``resid`` the proxy-beyond-gold residual
    and ``cells`` the prompt group each completion was sampled in. Per feature
    the statistic is the within-cell covariance of presence and residual,
    standardised by its exact permutation variance, so features of any
    frequency are on one scale. The residual is permuted within cells
    ``n_perm`` times, the same permutation for every feature (which keeps their
    correlation), and a feature's adjusted p-value is the chance that the
    largest statistic over all features reaches its own: the single-step
    max-T procedure of Westfall & Young (1993, "Resampling-Based Multiple
    Testing", Alg. 2.8). Past the permutations' reach the tail of that maximum
    is read from a Gumbel law fitted to the permutation maxima (maxima of many
    near-normal statistics; cf. Knijnenburg et al. 2009, "Fewer permutations,
    more accurate P-values"), so a p-value can be smaller than 1/n_perm, which
    the error rate spent per look needs.

    Returns ``z``, ``payment`` (mean residual difference present vs absent,
    within cell), ``p`` (adjusted, one-sided: features the proxy pays for),
    ``count`` (completions with the feature) and ``null_max``; None when no
    cell holds two completions. ``nonzero`` (the row and column of every 1 in
    ``x``) saves finding them again when the caller has them.

    ``covariate`` (one number per completion, e.g. its length) is held fixed:
    the residual and every feature are taken beyond their within-cell linear
    relation to it, and the residual of that reduced model is what gets
    permuted (Freedman & Lane 1983). So a proxy that pays for length does not
    make every word of a long completion look paid for.
    """
    resid = np.asarray(resid, dtype=float)
    grouped = _grouped_rows(resid, np.asarray(cells))
    if grouped is None:
        return None
    rows, cell = grouped
    xs = np.asarray(x[rows], dtype=np.float32)
    r = resid[rows]
    n_cells = int(cell.max()) + 1
    n_c = np.bincount(cell, minlength=n_cells).astype(float)
    rc = r - (np.bincount(cell, weights=r, minlength=n_cells) / n_c)[cell]
    n_feat = xs.shape[1]
    nz_row, nz_col = _positions_of_ones(x, xs, rows, nonzero)
    m = np.bincount(cell[nz_row] * n_feat + nz_col, minlength=n_cells * n_feat).reshape(n_cells, n_feat)
    m = m.astype(float)
    s_xx = m * (n_c[:, None] - m) / n_c[:, None]
    lc, coef = None, None
    if covariate is not None:
        rc, s_xx, lc, coef = _hold_fixed(np.asarray(covariate, dtype=float)[rows], cell, n_c, rc, s_xx,
                                         nz_row, nz_col)
    s_rr = np.bincount(cell, weights=rc * rc, minlength=n_cells)
    var = np.maximum(s_xx, 0.0).T @ (s_rr / (n_c - 1))
    s_xr = (rc.astype(np.float32) @ xs).astype(float)
    sxx_total = s_xx.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.sqrt(var)
        z = np.where(var > 0, s_xr / sd, np.nan)
        payment = np.where(sxx_total > 0, s_xr / sxx_total, np.nan)
    testable = np.isfinite(z)
    null_max = np.full(n_perm, -np.inf)
    p = np.ones(len(z))
    if testable.any() and n_perm > 0:
        null_max = _null_max(cell, rc, xs[:, testable], sd[testable], rng=rng, n_perm=n_perm, lc=lc,
                             coef=None if coef is None else coef[testable])
        z_t = z[testable]
        exceed = (null_max[None, :] >= z_t[:, None]).mean(axis=1)
        p[testable] = np.minimum(1.0, np.maximum(exceed, _gumbel_tail(null_max, z_t)))
    return {"z": z, "payment": payment, "p": p, "count": xs.sum(axis=0), "null_max": null_max}


def _grouped_rows(resid: np.ndarray, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The completions with a finite residual in a cell of two or more, sorted by cell, and their cell
    numbered from 0; None when fewer than two are left."""
    keep = np.isfinite(resid)
    _, inv = np.unique(cells[keep], return_inverse=True)
    sizes = np.bincount(inv)
    keep_idx = np.flatnonzero(keep)[sizes[inv] >= 2]
    if len(keep_idx) < 2:
        return None
    _, cell = np.unique(cells[keep_idx], return_inverse=True)
    order = np.argsort(cell, kind="stable")
    return keep_idx[order], cell[order]


def _positions_of_ones(x: np.ndarray, xs: np.ndarray, rows: np.ndarray,
          nonzero: tuple[np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
    """The (row, column) of every 1 in ``xs`` (``x`` at ``rows``), found, or mapped from the caller's ``nonzero``."""
    if nonzero is None:
        nz_row, nz_col = np.nonzero(xs)
        return nz_row, nz_col
    # (row, column) of every 1 in x, as the caller built it: map rows to their place here
    where = np.full(len(x), -1)
    where[rows] = np.arange(len(rows))
    nz_row, nz_col = where[nonzero[0]], nonzero[1]
    return nz_row[nz_row >= 0], nz_col[nz_row >= 0]


def _hold_fixed(v: np.ndarray, cell: np.ndarray, n_c: np.ndarray, rc: np.ndarray, s_xx: np.ndarray,
                nz_row: np.ndarray, nz_col: np.ndarray,
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """The residual and the features' within-cell sums of squares beyond their linear relation to the
    covariate ``v`` (Freedman & Lane), with the centred covariate and each feature's slope on it; both None
    (and the rest unchanged) when the covariate does not vary within cells."""
    n_cells, n_feat = s_xx.shape
    v = np.where(np.isfinite(v), v, 0.0)
    lc = v - (np.bincount(cell, weights=v, minlength=n_cells) / n_c)[cell]
    s_ll = float(lc @ lc)
    if s_ll <= 0:
        return rc, s_xx, None, None
    rc = rc - (float(rc @ lc) / s_ll) * lc
    coef = np.bincount(nz_col, weights=lc[nz_row], minlength=n_feat) / s_ll
    s_xl = np.bincount(cell[nz_row] * n_feat + nz_col, weights=lc[nz_row],
                       minlength=n_cells * n_feat).reshape(n_cells, n_feat)
    s_ll_c = np.bincount(cell, weights=lc * lc, minlength=n_cells)
    s_xx = s_xx - 2 * coef[None, :] * s_xl + coef[None, :] ** 2 * s_ll_c[:, None]
    return rc, s_xx, lc, coef


def _null_max(cell: np.ndarray, rc: np.ndarray, xs: np.ndarray, sd: np.ndarray, *, rng: np.random.Generator,
              n_perm: int, lc: np.ndarray | None, coef: np.ndarray | None) -> np.ndarray:
    """The largest statistic over the (testable) features ``xs`` in each of ``n_perm`` within-cell
    permutations of the residual, one permutation shared by every feature."""
    keys = cell[None, :] + rng.random((n_perm, len(cell)))
    perm = np.argsort(keys, axis=1)
    rp = rc[perm].astype(np.float32)
    sp = (rp @ xs).astype(float)
    if lc is not None and coef is not None:  # both are set together, when the covariate varies
        sp -= (rp.astype(float) @ lc)[:, None] * coef[None, :]
    zp = sp / sd[None, :]
    return zp.max(axis=1)
