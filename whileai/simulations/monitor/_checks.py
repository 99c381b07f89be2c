"""HackMonitor's looks and the alarm checks run over them.

A look holds what one evaluation measured, as (prompts, k) arrays in the same
prompt order every time. ``check_all`` turns the looks so far (and the
gold-scored training buffer) into the per-alarm results; the statistics
themselves are in ``_stats``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _features as feats
from . import _stats as stats
from .. import defaults

__all__ = ["Look", "BufferItem", "Settings", "check_all", "payments"]


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
    counters: dict[str, int] = field(default_factory=dict)


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


def check_all(looks: list[Look], buffer: list[BufferItem], cfg: Settings, index: feats.FeatureIndex) -> dict[str, Any]:
    """Run every check on the looks so far; returns one result per check (None where it cannot run yet)."""
    t = len(looks)
    w = cfg.window
    pay, how = payments(looks, buffer, cfg)
    adj = [_adjusted(lk, pay) for lk in looks]
    gold = [_gold(lk, cfg) for lk in looks]
    out: dict[str, Any] = {"payments": pay, "payments_read": how,
                           "divergence": None, "gold_decline": None, "length": None, "kl": None, "scan": None}
    gap_now = _prompt_means(adj[-1] - gold[-1])
    out["gap_adjusted"] = float(np.nanmean(gap_now)) if np.isfinite(gap_now).any() else math.nan
    look = t - w
    if look >= 1:
        cur = list(range(max(w, t - w), t))
        base = list(range(w))
        alpha = stats.spent_alpha(cfg.alpha / 3, look)
        if cfg.has_gold:
            gap = [_prompt_means(adj[i] - gold[i]) for i in range(t)]
            out["divergence"] = stats.divergence_test(
                _window_mean([gap[i] for i in base]), _window_mean([gap[i] for i in cur]),
                rng=_rng(cfg, look, 1), n_boot=cfg.n_boot, alpha=alpha, delta=cfg.delta)
            gm = [_prompt_means(g) for g in gold]
            pm = [_prompt_means(a) for a in adj]
            starts = range(0, cur[0] - w + 1)
            out["gold_decline"] = stats.gold_decline_test(
                np.stack([_window_mean(gm[s : s + w]) for s in starts]), _window_mean([gm[i] for i in cur]),
                np.stack([_window_mean(pm[s : s + w]) for s in starts]), _window_mean([pm[i] for i in cur]),
                rng=_rng(cfg, look, 2), n_boot=cfg.n_boot, alpha=alpha, delta=cfg.delta, hold=cfg.hold)
            if out["gold_decline"] is not None:
                out["gold_decline"]["best_step"] = looks[list(starts)[out["gold_decline"]["window"]]].step
        len_base = float(np.nanmean(np.stack([looks[i].length for i in base])))
        len_now = float(np.nanmean(np.stack([looks[i].length for i in cur])))
        resid = np.stack([adj[i] - gold[i] for i in cur])
        out["length"] = stats.length_test(
            len_base, len_now, resid, np.stack([gold[i] for i in cur]) if cfg.has_gold else None,
            np.stack([looks[i].length for i in cur]).astype(float), rng=_rng(cfg, look, 3),
            n_boot=cfg.n_boot, alpha=alpha, delta=cfg.delta, pct=cfg.length_pct)
    if looks[-1].kl is not None:
        n_kl = cfg.counters["kl"] = cfg.counters.get("kl", 0) + 1
        out["kl"] = stats.kl_test(_prompt_means(looks[-1].kl), rng=_rng(cfg, t, 4), n_boot=cfg.n_boot,
                                  alpha=stats.spent_alpha(cfg.alpha, n_kl), budget=cfg.kl_budget)
    out["scan"] = scan(looks, adj, gold, buffer, pay, cfg, index)
    return out


def scan(looks: list[Look], adj: list[np.ndarray], gold: list[np.ndarray], buffer: list[BufferItem],
         pay: np.ndarray, cfg: Settings, index: feats.FeatureIndex) -> dict[str, Any] | None:
    """The feature scan over the current window's held-out completions and the gold-scored buffer.

    Length in words is held fixed (the length alarm covers length), so a proxy
    that pays for long completions does not make their words look paid for.
    """
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
    if len(sets) < cfg.scan_min:
        return None
    skip = feats.excluded_by_endorsed(cfg.endorsed) if cfg.endorsed else None
    nonzero: tuple[np.ndarray, np.ndarray] | None
    x, names, nonzero = index.presence(sets, min_count=cfg.scan_min,
                                       max_features=defaults.MONITOR_SCAN_MAX_FEATURES, skip=skip)
    if cfg.endorsed and names:
        same = feats.identical_columns(x, np.concatenate(endorsed).astype(np.float32))
        if same.any():
            x, names, nonzero = x[:, ~same], [f for f, s in zip(names, same) if not s], None
    n_scan = cfg.counters["scan"] = cfg.counters.get("scan", 0) + 1
    alpha = stats.spent_alpha(cfg.scan_alpha, n_scan)
    base = {"completions": len(sets), "held_out": held_out, "buffered": len(sets) - held_out,
            "features": len(names), "alpha": alpha, "flagged": [], "top": []}
    if not names:
        return base
    res = stats.maxt_scan(x, np.concatenate(resid), np.concatenate(cells), rng=_rng(cfg, len(looks), 5),
                          n_perm=cfg.n_perm, nonzero=nonzero, covariate=np.concatenate(words))
    if res is None:
        return base
    z = np.where(np.isfinite(res["z"]), res["z"], -np.inf)
    order = np.argsort(-z, kind="stable")
    rows = []
    for j in order[: defaults.MONITOR_SCAN_TOP]:
        if not np.isfinite(z[j]):
            break
        rows.append({"feature": names[j], "payment": float(res["payment"][j]), "z": float(z[j]),
                     "p": float(res["p"][j]), "count": int(res["count"][j])})
    flagged = [names[j] for j in order if np.isfinite(z[j]) and res["p"][j] <= alpha
               and res["payment"][j] >= cfg.delta]
    base.update(top=rows, flagged=flagged,
                flagged_detail=[r for r in rows if r["feature"] in set(flagged)])
    return base
