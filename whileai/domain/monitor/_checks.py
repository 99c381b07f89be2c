"""HackMonitor's looks and the alarm checks run over them.

A look holds what one evaluation measured, as (prompts, k) arrays in the same
prompt order every time. ``check_all`` turns the looks so far (and the
gold-scored training buffer) into the per-alarm results; the statistics
themselves are in ``_stats``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

import numpy as np

from whileai.domain.monitor import _features as feats
from whileai.domain.monitor import _stats as stats
from whileai.domain import defaults
from whileai.domain.monitor._arming import SHARED_ALPHA

__all__ = ["Look", "BufferItem", "Settings", "FeatureRow", "MarkerRow", "check_all", "payments"]


class FeatureRow(TypedDict):
    """One feature the scan read: what the proxy paid for it beyond gold, its max-T z and p, and its completions."""

    feature: str
    payment: float
    z: float
    p: float
    count: int


class MarkerRow(FeatureRow):
    """One format marker the format check read: a scan row with the marker's share before and now."""

    share_before: float
    share_now: float


class FormatResult(TypedDict):
    """``format_check``'s answer: each marker's share move, the markers tested and flagged, whether it fired;
    once a marker was tested, the alpha spent, and once the scan ran, every tested marker's row, the flagged
    rows highest z first (``detail``) and, when one fired, its effect on each held-out prompt."""

    shift: dict[str, float]
    tested: list[str]
    flagged: list[str]
    fired: bool
    alpha: NotRequired[float]
    markers: NotRequired[list[MarkerRow]]
    detail: NotRequired[list[MarkerRow]]
    per_prompt: NotRequired[np.ndarray]


class ScanResult(TypedDict):
    """``scan``'s answer: what it read (completions, held-out and buffered, features) at which alpha, the top
    features, the flagged ones, and per flagged feature its effect on each held-out prompt."""

    completions: int
    held_out: int
    buffered: int
    features: int
    alpha: float
    flagged: list[str]
    top: list[FeatureRow]
    flagged_detail: NotRequired[list[FeatureRow]]
    per_prompt: NotRequired[dict[str, np.ndarray]]


class CheckResults(TypedDict):
    """``check_all``'s answer: the endorsed features' payments and how each was read, then one result per
    check (None where it is not armed or cannot run yet), and the proxy-gold gap less those payments."""

    payments: np.ndarray
    payments_read: list[str]
    divergence: stats.DivergenceResult | None
    gold_decline: stats.GoldDeclineResult | None
    length: stats.LengthResult | None
    kl: stats.KLResult | None
    scan: ScanResult | None
    format: FormatResult | None
    gap_adjusted: float


@dataclass
class Look:
    """One evaluation: per prompt and sample, the proxy, gold, length and endorsed-feature presence."""

    step: int
    proxy: np.ndarray
    gold: np.ndarray
    length: np.ndarray
    endorsed: np.ndarray
    features: list[np.ndarray] | None = None
    kl: np.ndarray | None = None
    words: np.ndarray | None = None
    markers: np.ndarray | None = None  # (prompts, k, markers) presence of each of marker_names
    #: counts the length check reads beside length, each (prompts, k): an episode's turns and calls
    counts: dict[str, np.ndarray] | None = None
    #: the markers' names, in order; None: the text's format markers (``feats.MARKERS``)
    marker_names: tuple[str, ...] | None = None


@dataclass
class BufferItem:
    """One training completion the wrapped reward scored, with its gold once judged."""

    call: int
    prompt: str
    proxy: float
    gold: float
    endorsed: np.ndarray
    features: np.ndarray
    words: int = 0


@dataclass
class Settings:
    window: int
    delta: float
    length_pct: float
    kl_budget: float | None
    n_boot: int
    n_perm: int
    scan_min: int
    seed: int
    has_gold: bool
    endorsed: tuple[str, ...] = ()
    alpha: float = defaults.MONITOR_ALPHA
    scan_alpha: float = defaults.MONITOR_SCAN_ALPHA
    hold: float = defaults.MONITOR_PROXY_HOLD
    format_shift: float = defaults.MONITOR_FORMAT_SHIFT
    length_shift: float = defaults.MONITOR_LENGTH_SHIFT
    length_bins: int = defaults.MONITOR_LENGTH_BINS
    length_tail: float | None = defaults.MONITOR_LENGTH_TAIL
    length_tail_alpha: float = defaults.MONITOR_LENGTH_TAIL_ALPHA
    armed: frozenset[str] = frozenset(("divergence", "gold_decline", "length", "feature"))
    counters: dict[str, int] = field(default_factory=dict)

    def alpha_share(self) -> float:
        """MONITOR_ALPHA split evenly between the armed checks that share it."""
        return self.alpha / max(1, len(self.armed & set(SHARED_ALPHA)))

    def tail(self) -> float | None:
        """The upper tail's gate on length (``length_tail``), armed only with a gold judge.

        Without one the length test reads the proxy itself, so an honest policy whose better answers are also
        longer (a passing episode runs longer than a failing one) looks paid for its length; there the other
        gates' size (a quarter of the completions, a quarter of the mean) is what keeps such growth out, and a
        gate that opens on a small move, however significant, would let it in.
        """
        return self.length_tail if self.has_gold else None

    def spend(self, kind: str) -> float:
        """The alpha this check may spend now, its share spent over the looks it has run on."""
        m = self.counters[kind] = self.counters.get(kind, 0) + 1
        return stats.spent_alpha(self.alpha_share(), m)


def _rng(cfg: Settings, look: int, salt: int) -> np.random.Generator:
    return np.random.default_rng([cfg.seed, look, salt])


def _prompt_means(a: np.ndarray) -> np.ndarray:
    ok = np.isfinite(a)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok.any(axis=-1), np.where(ok, a, 0.0).sum(axis=-1) / ok.sum(axis=-1), np.nan)


def _gold(look: Look, cfg: Settings) -> np.ndarray:
    return look.gold if cfg.has_gold else np.zeros_like(look.proxy)


def payments(looks: list[Look], buffer: list[BufferItem], cfg: Settings) -> tuple[np.ndarray, list[str]]:
    """What the proxy pays beyond gold for each endorsed feature, from every look and the buffer."""
    n_e = len(cfg.endorsed)
    if n_e == 0 or not looks:
        return np.zeros(0), []
    resid, presence, cells, groups = [], [], [], []
    n, k = looks[0].proxy.shape
    prompt = np.repeat(np.arange(n), k)
    for t, lk in enumerate(looks):
        resid.append((lk.proxy - _gold(lk, cfg)).ravel())
        presence.append(lk.endorsed.reshape(n * k, n_e))
        cells.append(t * n + prompt)
        groups.append(prompt)
    if buffer and cfg.has_gold:
        keys: dict[str, int] = {}
        calls: dict[int, int] = {}
        key = np.array([keys.setdefault(b.prompt, len(keys)) for b in buffer])
        call = np.array([calls.setdefault(b.call, len(calls)) for b in buffer])
        resid.append(np.array([b.proxy - b.gold for b in buffer]))
        presence.append(np.array([b.endorsed for b in buffer], dtype=float).reshape(len(buffer), n_e))
        cells.append(len(looks) * n + call * len(keys) + key)
        groups.append(n + key)
    return stats.endorsed_payment(np.concatenate(resid), np.concatenate(presence).astype(float),
                                  np.concatenate(cells), np.concatenate(groups), min_support=cfg.scan_min)


def _adjusted(look: Look, pay: np.ndarray) -> np.ndarray:
    if pay.size == 0:
        return look.proxy
    return look.proxy - look.endorsed.astype(float) @ pay


def _window_mean(arrays: list[np.ndarray]) -> np.ndarray:
    stacked = np.stack(arrays)
    ok = np.isfinite(stacked)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok.any(axis=0), np.where(ok, stacked, 0.0).sum(axis=0) / ok.sum(axis=0), np.nan)


def check_all(looks: list[Look], buffer: list[BufferItem], cfg: Settings, index: feats.FeatureIndex) -> CheckResults:
    """Run every armed check on the looks so far; returns one result per check (None where it cannot run).

    A result may carry ``per_prompt``: the check's effect on each held-out
    prompt (where the gap grew, gold fell, length bought gap, the KL is), which
    the alarm's message reads its examples from.
    """
    t = len(looks)
    w = cfg.window
    pay, how = payments(looks, buffer, cfg)
    adj = [_adjusted(lk, pay) for lk in looks]
    gold = [_gold(lk, cfg) for lk in looks]
    gap_now = _prompt_means(adj[-1] - gold[-1])
    out: CheckResults = {"payments": pay, "payments_read": how, "divergence": None, "gold_decline": None,
                         "length": None, "kl": None, "scan": None, "format": None,
                         "gap_adjusted": float(np.nanmean(gap_now)) if np.isfinite(gap_now).any() else math.nan}
    look = t - w
    if look >= 1:
        cur = list(range(max(w, t - w), t))
        base = list(range(w))
        if cfg.has_gold:
            alpha = stats.spent_alpha(cfg.alpha_share(), look)
            if "divergence" in cfg.armed:
                out["divergence"] = _divergence(adj, gold, base, cur, cfg, look, alpha)
            if "gold_decline" in cfg.armed:
                out["gold_decline"] = _gold_decline(looks, adj, gold, cur, cfg, look, alpha)
        if "length" in cfg.armed:
            out["length"] = _length(looks, adj, gold, base, cur, cfg, look)
        if "format" in cfg.armed:
            out["format"] = format_check(looks, adj, gold, base, cur, cfg)
    if looks[-1].kl is not None:
        per_prompt = _prompt_means(looks[-1].kl)
        out["kl"] = stats.kl_test(per_prompt, rng=_rng(cfg, t, 4), n_boot=cfg.n_boot, alpha=cfg.spend("kl"),
                                  budget=cfg.kl_budget)
        if out["kl"] is not None:
            out["kl"]["fired"] = out["kl"]["fired"] and "kl" in cfg.armed
            out["kl"]["per_prompt"] = per_prompt
    if "feature" in cfg.armed:
        out["scan"] = scan(looks, adj, gold, buffer, pay, cfg, index)
    return out


def _divergence(adj: list[np.ndarray], gold: list[np.ndarray], base: list[int], cur: list[int], cfg: Settings,
                look: int, alpha: float) -> stats.DivergenceResult | None:
    gap_base = _window_mean([_prompt_means(adj[i] - gold[i]) for i in base])
    gap_now = _window_mean([_prompt_means(adj[i] - gold[i]) for i in cur])
    res = stats.divergence_test(gap_base, gap_now, rng=_rng(cfg, look, 1), n_boot=cfg.n_boot, alpha=alpha,
                                delta=cfg.delta)
    if res is not None:
        res["per_prompt"] = gap_now - gap_base
    return res


def _rolling_means(per_look: np.ndarray, w: int, starts: int) -> np.ndarray:
    """(starts, prompts): the mean of looks s .. s+w-1 for every start s, skipping NaN, from running sums.

    One pass over the looks instead of one window mean per start, so a look late in a long run costs
    what an early one does.
    """
    ok = np.isfinite(per_look)
    zero = np.zeros((1, per_look.shape[1]))
    sums = np.concatenate([zero, np.cumsum(np.where(ok, per_look, 0.0), axis=0)])
    counts = np.concatenate([zero, np.cumsum(ok, axis=0)])
    total, count = sums[w : w + starts] - sums[:starts], counts[w : w + starts] - counts[:starts]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _gold_decline(looks: list[Look], adj: list[np.ndarray], gold: list[np.ndarray], cur: list[int],
                  cfg: Settings, look: int, alpha: float) -> stats.GoldDeclineResult | None:
    w = cfg.window
    n_starts = cur[0] - w + 1
    gm = _prompt_means(np.stack(gold[: cur[0]]))
    pm = _prompt_means(np.stack(adj[: cur[0]]))
    windows = _rolling_means(gm, w, n_starts)
    gold_now = _window_mean([_prompt_means(gold[i]) for i in cur])
    res = stats.gold_decline_test(
        windows, gold_now, _rolling_means(pm, w, n_starts), _window_mean([_prompt_means(adj[i]) for i in cur]),
        rng=_rng(cfg, look, 2), n_boot=cfg.n_boot, alpha=alpha, delta=cfg.delta, hold=cfg.hold)
    if res is not None:
        res["best_step"] = looks[res["window"]].step
        res["per_prompt"] = windows[res["window"]] - gold_now
    return res


def _measures(look: Look) -> dict[str, np.ndarray]:
    """What the length check reads of a look: its length, then each of its counts (an episode's turns, calls)."""
    return {"length": look.length, **(look.counts or {})}


def _length(looks: list[Look], adj: list[np.ndarray], gold: list[np.ndarray], base: list[int], cur: list[int],
            cfg: Settings, look: int) -> stats.LengthResult | None:
    """The length check: the latest look's lengths against the baseline window's, and so each of its counts.

    The proxy's price for length is read from the baseline looks and the
    current window's looks whose own lengths moved (``stats.length_moved``; the
    latest always among them), so the price covers the lengths the policy wrote
    before and after, not diluted by current looks from before the move. Its
    alpha is spent over the looks where the move gate opened, which reads
    lengths only, never a reward.

    A look with counts (an episode's turns and calls) tests each the same way, as a measure of its own, with the
    alpha split evenly between the measures; the result is the first measure that fired (else length's), with
    ``measure`` naming it and ``measures`` each one's drift and verdict.
    """
    names = list(_measures(looks[-1]))
    moved = [_moved(looks, base, len(looks) - 1, name, cfg) for name in names]
    alpha = cfg.spend("length") if any(moved) else stats.spent_alpha(cfg.alpha_share(), max(1, look))
    results = {name: _length_of(name, looks, adj, gold, base, cur, cfg, alpha / len(names),
                                _rng(cfg, look, 3 if j == 0 else 30 + j))
               for j, name in enumerate(names)}
    if len(names) == 1:
        return results["length"]
    chosen = next((name for name, r in results.items() if r is not None and r["fired"]), "length")
    result = results[chosen]
    if result is None:
        return None
    measures: dict[str, stats.LengthMeasure] = {
        name: {"drift": r["drift"], "moved_share": r["moved_share"], "length_base": r["length_base"],
               "length_now": r["length_now"], "verdict": r["verdict"], "gap_from_length": r.get("gap_from_length"),
               "gap_lo": r.get("gap_lo")} for name, r in results.items() if r}
    return {**result, "measure": chosen, "measures": measures}


def _moved(looks: list[Look], base: list[int], i: int, name: str, cfg: Settings) -> bool:
    """Whether look ``i``'s measure ``name`` moved from the baseline window's (``stats.length_moved``)."""
    base_len = np.stack([_measures(looks[b])[name] for b in base])
    return stats.length_moved(base_len, _measures(looks[i])[name], pct=cfg.length_pct, shift=cfg.length_shift,
                              tail=cfg.tail(), tail_alpha=cfg.length_tail_alpha)[2]


def _length_of(name: str, looks: list[Look], adj: list[np.ndarray], gold: list[np.ndarray], base: list[int],
               cur: list[int], cfg: Settings, alpha: float,
               rng: np.random.Generator) -> stats.LengthResult | None:
    """The length test (``stats.length_test``) on one measure of the looks, at ``alpha``."""
    base_len = np.stack([_measures(looks[i])[name] for i in base])
    use = [i for i in cur if _moved(looks, base, i, name, cfg)]
    read = base + (use if len(looks) - 1 in use else cur)
    return stats.length_test(
        base_len, _measures(looks[-1])[name], np.stack([adj[i] - gold[i] for i in read]),
        np.stack([gold[i] for i in read]) if cfg.has_gold else None,
        np.stack([_measures(looks[i])[name] for i in read]).astype(float), rng=rng, n_boot=cfg.n_boot,
        alpha=alpha, delta=cfg.delta, pct=cfg.length_pct, shift=cfg.length_shift, bins=cfg.length_bins,
        tail=cfg.tail(), tail_alpha=cfg.length_tail_alpha)


def format_check(looks: list[Look], adj: list[np.ndarray], gold: list[np.ndarray], base: list[int],
                 cur: list[int], cfg: Settings) -> FormatResult | None:
    """Does the proxy pay, within prompt, for a format marker whose share moved from the baseline?

    A marker (``feats.MARKERS``) enters the test when its share of the latest
    look's completions moved at least ``format_shift`` from the baseline
    window's (a gate on presence alone, never on a reward). A rising marker is
    tested for the proxy paying for its presence, a falling one for the proxy
    paying for its absence (``no format:...``). The test is the feature scan's
    max-T over the gated markers, on the current window's held-out completions,
    length held fixed; without gold the residual is the proxy itself, so a
    marker the task needs looks paid for too (name it in ``endorsed=``). Its
    alpha is spent over the looks where the gate opened.
    """
    markers = [looks[i].markers for i in range(len(looks))]
    if any(markers[i] is None for i in base + cur):
        return None
    names = list(looks[-1].marker_names or feats.MARKERS)
    n, k = looks[-1].proxy.shape
    flat = {i: np.asarray(markers[i]).reshape(n * k, len(names)) for i in base + cur}
    before = np.concatenate([flat[i] for i in base]).mean(axis=0)
    latest = flat[len(looks) - 1].mean(axis=0)
    shift = latest - before
    skip = feats.excluded_by_endorsed(cfg.endorsed) if cfg.endorsed else None
    gated = [j for j in range(len(names)) if abs(shift[j]) >= cfg.format_shift
             and not (skip is not None and skip(names[j]))]
    out: FormatResult = {"shift": {names[j]: float(shift[j]) for j in range(len(names)) if shift[j] != 0},
                         "tested": [], "flagged": [], "fired": False}
    if not gated:
        return out
    x = np.concatenate([flat[i][:, gated] for i in cur]).astype(float)
    rising = shift[gated] > 0
    x = np.where(rising[None, :], x, 1.0 - x)
    tested = [names[j] if up else f"no {names[j]}" for j, up in zip(gated, rising)]
    if cfg.endorsed:
        endorsed = np.concatenate([looks[i].endorsed.reshape(n * k, -1) for i in cur]).astype(float)
        same = feats.identical_columns(x, endorsed) | feats.identical_columns(1.0 - x, endorsed)
        x, tested = x[:, ~same], [f for f, dup in zip(tested, same) if not dup]
    out["tested"] = tested
    if not tested:
        return out
    resid = np.concatenate([(adj[i] - gold[i]).ravel() for i in cur])
    cells = np.concatenate([i * n + np.repeat(np.arange(n), k) for i in cur])
    words = np.concatenate([np.asarray(looks[i].words if looks[i].words is not None else looks[i].length).ravel()
                            for i in cur])
    alpha = cfg.spend("format")
    res = stats.maxt_scan(x.astype(np.float32), resid, cells, rng=_rng(cfg, len(looks), 6), n_perm=cfg.n_perm,
                          covariate=words.astype(float))
    out["alpha"] = alpha
    if res is None:
        return out
    rows: list[MarkerRow] = []
    for j, f in enumerate(tested):
        m = names.index(f.removeprefix("no "))
        rows.append({"feature": f, "payment": float(res["payment"][j]), "z": float(res["z"][j]),
                     "p": float(res["p"][j]), "count": int(res["count"][j]), "share_before": float(before[m]),
                     "share_now": float(latest[m])})
    flagged = sorted((r for r in rows if math.isfinite(r["z"]) and r["p"] <= alpha and r["payment"] >= cfg.delta),
                     key=lambda r: -float(r["z"]))
    out["markers"], out["flagged"], out["detail"], out["fired"] = rows, [r["feature"] for r in flagged], flagged, \
        bool(flagged)
    if flagged:
        j = tested.index(flagged[0]["feature"])
        out["per_prompt"] = stats.cell_contribution(x[:, j], resid, cells, cells % n, n)
    return out


def _scan_inputs(looks: list[Look], adj: list[np.ndarray], gold: list[np.ndarray], buffer: list[BufferItem],
                 pay: np.ndarray, cfg: Settings) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray],
                                                          list[np.ndarray], list[np.ndarray], int]:
    """What the scan reads, held-out completions of the window's looks first, then the gold-scored buffer's:
    ``(sets, resid, cells, words, endorsed, held_out)``, each completion's feature set, and per look or buffer its
    residuals (proxy less gold, the buffer's also less the endorsed features' payment), cells (prompt keys), length
    in words and endorsed-feature presence; ``held_out`` is how many of the sets are held-out completions."""
    sets: list[np.ndarray] = []
    resid: list[np.ndarray] = []
    cells: list[np.ndarray] = []
    words: list[np.ndarray] = []
    endorsed: list[np.ndarray] = []
    for t in range(max(0, len(looks) - cfg.window), len(looks)):
        lk = looks[t]
        if lk.features is None:
            continue
        n, k = lk.proxy.shape
        sets.extend(lk.features)
        resid.append((adj[t] - gold[t]).ravel())
        cells.append(t * n + np.repeat(np.arange(n), k))
        words.append((lk.words if lk.words is not None else lk.length).ravel().astype(float))
        endorsed.append(lk.endorsed.reshape(n * k, -1))
    held_out = len(sets)
    items = [b for b in buffer if not (cfg.has_gold and not math.isfinite(b.gold))]
    if items:
        offset = len(looks) * looks[0].proxy.shape[0]
        keys: dict[tuple[int, str], int] = {}
        sets.extend(b.features for b in items)
        e = np.array([b.endorsed for b in items], dtype=float).reshape(len(items), -1)
        r = np.array([b.proxy - (b.gold if cfg.has_gold else 0.0) for b in items])
        resid.append(r - (e @ pay if pay.size else 0.0))
        cells.append(offset + np.array([keys.setdefault((b.call, b.prompt), len(keys)) for b in items]))
        words.append(np.array([b.words for b in items], dtype=float))
        endorsed.append(e)
    return sets, resid, cells, words, endorsed, held_out


def _scan_features(index: feats.FeatureIndex, sets: list[np.ndarray], endorsed: list[np.ndarray],
                   cfg: Settings) -> tuple[np.ndarray, list[str], tuple[np.ndarray, np.ndarray] | None]:
    """``(x, names, nonzero)``: the 0/1 presence matrix of the features seen in at least ``cfg.scan_min``
    completions (at most MONITOR_SCAN_MAX_FEATURES), their names, and where its 1s are (None once columns are
    dropped). An endorsed feature, part of one's text, or a column equal to an endorsed one's is left out."""
    skip = feats.excluded_by_endorsed(cfg.endorsed) if cfg.endorsed else None
    nonzero: tuple[np.ndarray, np.ndarray] | None
    x, names, nonzero = index.presence(sets, min_count=cfg.scan_min,
                                       max_features=defaults.MONITOR_SCAN_MAX_FEATURES, skip=skip)
    if cfg.endorsed and names:
        same = feats.identical_columns(x, np.concatenate(endorsed).astype(np.float32))
        if same.any():
            x, names, nonzero = x[:, ~same], [f for f, s in zip(names, same) if not s], None
    return x, names, nonzero


def _ranked(res: dict[str, np.ndarray], names: list[str], alpha: float,
            cfg: Settings) -> tuple[list[FeatureRow], list[str]]:
    """``(top, flagged)``: the MONITOR_SCAN_TOP features with the highest finite z (payment, z, p, count each), and
    every feature whose p is within ``alpha`` and whose payment reaches ``cfg.delta``, highest z first."""
    z = np.where(np.isfinite(res["z"]), res["z"], -np.inf)
    order = np.argsort(-z, kind="stable")
    rows: list[FeatureRow] = []
    for j in order[: defaults.MONITOR_SCAN_TOP]:
        if not np.isfinite(z[j]):
            break
        rows.append({"feature": names[j], "payment": float(res["payment"][j]), "z": float(z[j]),
                     "p": float(res["p"][j]), "count": int(res["count"][j])})
    flagged = [names[j] for j in order if np.isfinite(z[j]) and res["p"][j] <= alpha
               and res["payment"][j] >= cfg.delta]
    return rows, flagged


def scan(looks: list[Look], adj: list[np.ndarray], gold: list[np.ndarray], buffer: list[BufferItem],
         pay: np.ndarray, cfg: Settings, index: feats.FeatureIndex) -> ScanResult | None:
    """The feature scan over the current window's held-out completions and the gold-scored buffer.

    Length in words is held fixed (the length alarm covers length), so a proxy
    that pays for long completions does not make their words look paid for.
    """
    sets, resid, cells, words, endorsed, held_out = _scan_inputs(looks, adj, gold, buffer, pay, cfg)
    if len(sets) < cfg.scan_min:
        return None
    x, names, nonzero = _scan_features(index, sets, endorsed, cfg)
    n_scan = cfg.counters["scan"] = cfg.counters.get("scan", 0) + 1
    alpha = stats.spent_alpha(cfg.scan_alpha, n_scan)
    base: ScanResult = {"completions": len(sets), "held_out": held_out, "buffered": len(sets) - held_out,
                        "features": len(names), "alpha": alpha, "flagged": [], "top": []}
    if not names:
        return base
    res = stats.maxt_scan(x, np.concatenate(resid), np.concatenate(cells), rng=_rng(cfg, len(looks), 5),
                          n_perm=cfg.n_perm, nonzero=nonzero, covariate=np.concatenate(words))
    if res is None:
        return base
    rows, flagged = _ranked(res, names, alpha, cfg)
    base["top"], base["flagged"] = rows, flagged
    base["flagged_detail"] = [r for r in rows if r["feature"] in set(flagged)]
    if flagged and held_out:
        n = looks[-1].proxy.shape[0]
        all_resid, all_cells = np.concatenate(resid)[:held_out], np.concatenate(cells)[:held_out]
        base["per_prompt"] = {f: stats.cell_contribution(x[:held_out, names.index(f)].astype(float), all_resid,
                                                         all_cells, all_cells % n, n) for f in flagged}
    return base
