"""A run's logged series as columns, and each column downsampled for a chart.

The store keeps every point (one JSON object of metrics per row) and ``get_run``
answers them all. A chart needs at most CHART_MAX_POINTS per series: more is
cut into CHART_BUCKETS buckets of consecutive points, each sending its minimum
and its maximum in step order, so a spike is never averaged away. A zoomed
range is cut the same way from the points inside it, which is full resolution
once the range holds few enough.

Decoding 100,000 points is the expensive part (one indexed scan, then orjson),
so decoded columns are kept per run (SERIES_CACHE_RUNS) and topped up with only
the rows stored since; a count check falls back to a full read whenever rows
arrived out of key order (concurrent writers on PostgreSQL).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from whileai.platform.store.tables import Point
from whileai.platform.store.values import loads
from whileai.platform.pages import defaults

__all__ = ["Columns", "columns", "downsample", "chart_series", "points_after"]


@dataclass
class Columns:
    """One run's points as arrays in insertion order: ``step`` (NaN when logged without) and each metric."""

    max_pk: int = 0
    count: int = 0
    step: np.ndarray = field(default_factory=lambda: np.empty(0))
    metrics: dict[str, np.ndarray] = field(default_factory=dict)
    _order: dict[str, np.ndarray] = field(default_factory=dict)  # per metric: finite points, sorted by step

    def extended(self, rows: list[tuple[int, Any, str]]) -> Columns:
        """These columns with ``rows`` (pk, step, metrics text) appended, as a new object (readers keep theirs)."""
        if not rows:
            return self
        nan = math.nan
        decoded = loads("[" + ",".join(r[2] for r in rows) + "]")
        names = set(self.metrics).union(*decoded)
        n_old = self.count
        metrics = {}
        for name in names:
            new = _column(decoded, name)
            old = self.metrics.get(name)
            metrics[name] = new if not n_old else np.concatenate([np.full(n_old, nan) if old is None else old, new])
        steps = np.array([nan if r[1] is None else r[1] for r in rows], dtype=float)
        return Columns(max_pk=max(self.max_pk, max(r[0] for r in rows)), count=n_old + len(rows),
                       step=np.concatenate([self.step, steps]) if n_old else steps, metrics=metrics)

    def xy(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """The metric's points that have a step and a finite value, sorted by step (stable)."""
        order = self._order.get(name)
        y = self.metrics.get(name)
        if y is None:
            return np.empty(0), np.empty(0)
        if order is None:
            keep = np.flatnonzero(np.isfinite(y) & np.isfinite(self.step))
            order = keep[np.argsort(self.step[keep], kind="stable")]
            self._order[name] = order
        return self.step[order], y[order]


def _column(decoded: list[dict[str, Any]], name: str) -> np.ndarray:
    try:  # stored metrics are finite numbers (clean_points), so this is the path taken
        return np.fromiter((d.get(name, math.nan) for d in decoded), dtype=float, count=len(decoded))
    except (TypeError, ValueError):
        return np.array([_number(d.get(name, math.nan)) for d in decoded], dtype=float)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value)


_cache: OrderedDict[tuple[int, str], Columns] = OrderedDict()
_lock = threading.Lock()  # guards _cache and _reading
_reading: dict[tuple[int, str], threading.Lock] = {}  # one reader per run at a time


def columns(store: Any, run_id: str) -> Columns:
    """The run's decoded columns, read once and topped up with new rows on later calls.

    The caller has already checked that ``run_id`` belongs to its account.
    """
    key = (id(store), run_id)
    with _lock:
        reading = _reading.setdefault(key, threading.Lock())

    def work(s: Session) -> Columns:
        with _lock:
            found = _cache.get(key)
        if found is not None:
            fresh = _rows(s, run_id, found.max_pk)
            total = s.scalar(select(func.count()).select_from(Point).where(Point.run_id == run_id)) or 0
            if total == found.count + len(fresh):
                return found.extended(fresh)
        return Columns().extended(_rows(s, run_id, 0))

    with reading:  # two page reads of one run decode it once, not twice side by side
        result = store._tx(work, write=False)
        with _lock:
            _cache[key] = result
            _cache.move_to_end(key)
            while len(_cache) > defaults.SERIES_CACHE_RUNS:
                gone, _ = _cache.popitem(last=False)
                _reading.pop(gone, None)
    return result


def _rows(s: Session, run_id: str, after_pk: int) -> list[tuple[int, Any, str]]:
    """``(pk, step, metrics text)`` of the run's points past ``after_pk``, in key order (one indexed scan).

    Read through the driver's own cursor: for 100,000 rows the ORM's row objects
    cost as much as the read itself.
    """
    conn = s.connection()
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    cursor = conn.connection.cursor()
    try:
        cursor.execute(f"SELECT pk, step, metrics FROM points WHERE run_id = {mark} AND pk > {mark} ORDER BY pk",
                       (run_id, after_pk))
        return cursor.fetchall()
    finally:
        cursor.close()


def downsample(x: np.ndarray, y: np.ndarray, buckets: int = defaults.CHART_BUCKETS) -> tuple[np.ndarray, np.ndarray]:
    """At most ``2 * buckets`` points: each bucket of consecutive points keeps its min and its max, in step order."""
    n = len(x)
    if n <= 2 * buckets:
        return x, y
    edges = np.linspace(0, n, buckets + 1).astype(np.int64)
    keep = np.empty(2 * buckets, dtype=np.int64)
    for b in range(buckets):
        lo, hi = edges[b], edges[b + 1]
        part = y[lo:hi]
        i, j = lo + int(np.argmin(part)), lo + int(np.argmax(part))
        keep[2 * b], keep[2 * b + 1] = (i, j) if i <= j else (j, i)
    keep = np.unique(keep)  # a flat bucket's min and max are one point
    return x[keep], y[keep]


def _jsonable(a: np.ndarray) -> list[float]:
    return [int(v) if v.is_integer() else v for v in a.tolist()]


def chart_series(cols: Columns, names: list[str] | None = None, start: float | None = None,
                 end: float | None = None, buckets: int = defaults.CHART_BUCKETS) -> dict[str, dict[str, Any]]:
    """Per metric: ``x`` (steps), ``y``, ``points`` (how many in range), ``downsampled``, ``first``/``last`` step."""
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(cols.metrics) if names is None else names:
        if name not in cols.metrics:
            continue
        x, y = cols.xy(name)
        if start is not None or end is not None:
            lo = 0 if start is None else int(np.searchsorted(x, start, side="left"))
            hi = len(x) if end is None else int(np.searchsorted(x, end, side="right"))
            x, y = x[lo:hi], y[lo:hi]
        dx, dy = downsample(x, y, buckets)
        out[name] = {
            "x": _jsonable(dx),
            "y": dy.tolist(),
            "points": int(len(x)),
            "downsampled": bool(len(dx) < len(x)),
            "buckets": buckets if len(dx) < len(x) else None,
        }
    return out


def points_after(cols: Columns, after: float) -> dict[str, dict[str, Any]]:
    """Per metric, the points whose step is past ``after`` (downsampled past LIVE_MAX_POINTS)."""
    out = {}
    for name in sorted(cols.metrics):
        x, y = cols.xy(name)
        lo = int(np.searchsorted(x, after, side="right"))
        if lo < len(x):
            dx, dy = downsample(x[lo:], y[lo:], defaults.LIVE_MAX_POINTS // 2)
            out[name] = {"x": _jsonable(dx), "y": dy.tolist(), "points": int(len(x) - lo)}
    return out


def unstepped(cols: Columns) -> int:
    """How many points were logged without a step (kept in the store, not drawn on a step axis)."""
    return int(np.count_nonzero(~np.isfinite(cols.step))) if cols.count else 0
