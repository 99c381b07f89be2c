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
from array import array
from collections import OrderedDict
from dataclasses import dataclass, field
from collections.abc import Iterable, Iterator
from typing import Any, TypedDict

import numpy as np

try:  # the page's series are encoded straight from numpy when orjson is installed
    import orjson as _orjson
except ImportError:  # pragma: no cover - the standard library path: plain lists
    _orjson = None  # type: ignore[assignment]
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from whileai.platform.store.tables import Point
from whileai.platform.store.values import loads
from whileai.platform import defaults

__all__ = ["Columns", "columns", "downsample", "chart_series", "points_after"]


#: rows fetched at a time, and metrics text decoded at a time: a run of 10,000 points x 1,000 names is
#: never held as Python objects all at once (decoded, a value costs ~100 bytes; stored here, 12)
_CHUNK_ROWS = 256
_CHUNK_TEXT_BYTES = 256 * 1024


@dataclass
class Columns:
    """One run's points in insertion order: ``step`` (NaN when logged without) and, per metric, only the
    values that were logged: ``metrics[name] = (rows, values)``, the row indices (int32) and their values.

    Memory is proportional to the values stored (12 bytes each), not to names x points: a run that logs a
    new name on every point costs what its points cost. A name logged on every point keeps no row indices
    (``rows`` is None: 8 bytes a value).
    """

    max_pk: int = 0
    count: int = 0
    step: np.ndarray = field(default_factory=lambda: np.empty(0))
    metrics: dict[str, tuple[np.ndarray | None, np.ndarray]] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        return int(self.step.nbytes + sum((0 if r is None else r.nbytes) + v.nbytes + 100
                                          for r, v in self.metrics.values()))

    def extended(self, rows: Iterable[tuple[int, Any, str]]) -> Columns:
        """These columns with ``rows`` (pk, step, metrics text) appended, as a new object (readers keep theirs)."""
        # per name, growing buffers (one allocation each, grown in place): small numpy pieces per chunk would
        # cost more in object headers than the values they hold
        parts: dict[str, tuple[array, array]] = {}
        steps: list[np.ndarray] = []
        n = self.count
        max_pk = self.max_pk
        nan = math.nan
        for chunk in _chunks(rows):
            decoded = loads("[" + ",".join(r[2] for r in chunk) + "]")
            steps.append(np.array([nan if r[1] is None else r[1] for r in chunk], dtype=float))
            max_pk = max(max_pk, max(r[0] for r in chunk))
            for name in set().union(*decoded):
                dense = _column(decoded, name)
                keep = np.flatnonzero(~np.isnan(dense))
                found = parts.get(name)
                if found is None:
                    found = parts[name] = (array("i"), array("d"))
                found[0].frombytes((keep + n).astype(np.int32).tobytes())
                found[1].frombytes(dense[keep].tobytes())
            n += len(chunk)
            del decoded
        if n == self.count:
            return self
        metrics = dict(self.metrics)
        for name in list(parts):
            rows_buf, vals_buf = parts.pop(name)
            new_rows, new_vals = np.frombuffer(rows_buf, dtype=np.int32), np.frombuffer(vals_buf, dtype=np.float64)
            old = metrics.get(name)
            if old is not None:  # a top-up: join once (the old arrays are shared with readers of the old columns)
                old_rows = np.arange(len(old[1]), dtype=np.int32) if old[0] is None else old[0]
                new_rows, new_vals = np.concatenate([old_rows, new_rows]), np.concatenate([old[1], new_vals])
            metrics[name] = (None if len(new_rows) == n else new_rows, new_vals)  # on every row: no indices
        for name, (indices, vals) in list(metrics.items()):
            if indices is None and len(vals) != n:  # was on every row, is not on the new ones
                metrics[name] = (np.arange(len(vals), dtype=np.int32), vals)
        return Columns(max_pk=max_pk, count=n, step=np.concatenate([self.step, *steps]), metrics=metrics)

    def values(self, name: str) -> np.ndarray:
        """The metric's logged values in insertion order (no gaps: only points that carried it)."""
        found = self.metrics.get(name)
        return np.empty(0) if found is None else found[1]

    def xy(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """The metric's points that have a step and a finite value, sorted by step (stable)."""
        found = self.metrics.get(name)
        if found is None:
            return np.empty(0), np.empty(0)
        rows, y = found
        x = self.step if rows is None else self.step[rows]
        keep = np.isfinite(x) & np.isfinite(y)
        if not keep.all():
            x, y = x[keep], y[keep]
        if len(x) > 1 and not bool(np.all(x[1:] >= x[:-1])):
            order = np.argsort(x, kind="stable")
            x, y = x[order], y[order]
        return x, y


def _chunks(rows: Iterable[tuple[int, Any, str]]) -> Iterator[list[tuple[int, Any, str]]]:
    batch: list[tuple[int, Any, str]] = []
    size = 0
    for row in rows:
        batch.append(row)
        size += len(row[2])
        if len(batch) >= 8 * _CHUNK_ROWS or size >= _CHUNK_TEXT_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


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
    Kept for SERIES_CACHE_RUNS runs and SERIES_CACHE_BYTES at most.
    """
    key = (id(store), run_id)
    with _lock:
        reading = _reading.setdefault(key, threading.Lock())

    def work(s: Session) -> Columns:
        with _lock:
            found = _cache.get(key)
        if found is not None:
            total = s.scalar(select(func.count()).select_from(Point).where(Point.run_id == run_id)) or 0
            fresh = list(_rows(s, run_id, found.max_pk))
            if total == found.count + len(fresh):
                return found.extended(fresh)
        with _lock:  # the old copy is not kept alive while the new one is decoded
            _cache.pop(key, None)
        found = None
        return Columns().extended(_rows(s, run_id, 0))

    with reading:  # two page reads of one run decode it once, not twice side by side
        result = store._tx(work, write=False)
        with _lock:
            _cache[key] = result
            _cache.move_to_end(key)
            total = sum(c.nbytes for c in _cache.values())
            while _cache and (len(_cache) > defaults.SERIES_CACHE_RUNS or total > defaults.SERIES_CACHE_BYTES):
                gone, dropped = _cache.popitem(last=False)
                total -= dropped.nbytes
                _reading.pop(gone, None)
    return result


def _rows(s: Session, run_id: str, after_pk: int) -> Iterator[tuple[int, Any, str]]:
    """``(pk, step, metrics text)`` of the run's points past ``after_pk``, in key order (one indexed scan),
    fetched a chunk at a time.

    Read through the driver's own cursor: for 100,000 rows the ORM's row objects
    cost as much as the read itself.
    """
    conn = s.connection()
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    cursor = conn.connection.cursor()
    try:
        cursor.execute(f"SELECT pk, step, metrics FROM points WHERE run_id = {mark} AND pk > {mark} ORDER BY pk",
                       (run_id, after_pk))
        while True:
            batch = cursor.fetchmany(_CHUNK_ROWS)
            if not batch:
                return
            yield from batch
    finally:
        cursor.close()


def downsample(x: np.ndarray, y: np.ndarray, buckets: int = defaults.CHART_BUCKETS) -> tuple[np.ndarray, np.ndarray]:
    """At most ``2 * buckets`` points: each bucket of consecutive points keeps its min and its max, in step order.

    Vectorised (one pass of numpy per series, no loop over buckets): a page of a
    thousand series costs milliseconds each.
    """
    n = len(x)
    if n <= 2 * buckets:
        return x, y
    edges = np.linspace(0, n, buckets + 1).astype(np.int64)
    starts = edges[:-1]
    bucket = np.repeat(np.arange(buckets), np.diff(edges))
    keep = []
    for reduce in (np.minimum, np.maximum):
        extreme = reduce.reduceat(y, starts)
        hits = np.flatnonzero(y == extreme[bucket])
        _, first = np.unique(bucket[hits], return_index=True)  # each bucket's first min (max), as argmin does
        keep.append(hits[first])
    chosen = np.unique(np.concatenate(keep))  # in step order; a flat bucket's min and max are one point
    return x[chosen], y[chosen]


class NewPoints(TypedDict):
    """One metric's points past a step (``points_after``): steps, values, and how many there were before any cut.

    ``x`` and ``y`` are lists of numbers, or JSON text for orjson to splice in (``encoded``)."""

    x: Any
    y: Any
    points: int


class ChartSeries(NewPoints):
    """One metric as a chart draws it (``chart_series``): its points in range, and whether they were downsampled
    (to ``buckets``; None where they were not)."""

    downsampled: bool
    buckets: int | None


def _out_x(a: np.ndarray, encoded: bool) -> Any:
    """Steps for the page: whole numbers as integers; with ``encoded``, JSON text orjson splices in as is."""
    if encoded and _orjson is not None and bool(np.all(np.abs(a) < 2**53)) and bool(np.all(a == np.floor(a))):
        return _orjson.Fragment(_orjson.dumps(a.astype(np.int64), option=_orjson.OPT_SERIALIZE_NUMPY).decode())
    return _jsonable(a)


def _out_y(a: np.ndarray, encoded: bool) -> Any:
    """Values for the page; with ``encoded``, JSON text (a thousand series never become millions of floats)."""
    if encoded and _orjson is not None:
        return _orjson.Fragment(_orjson.dumps(a, option=_orjson.OPT_SERIALIZE_NUMPY).decode())
    return a.tolist()


def _jsonable(a: np.ndarray) -> list[float]:
    return [int(v) if v.is_integer() else v for v in a.tolist()]


def chart_series(cols: Columns, names: list[str] | None = None, start: float | None = None,
                 end: float | None = None, buckets: int = defaults.CHART_BUCKETS,
                 encoded: bool = False) -> dict[str, ChartSeries]:
    """Per metric: ``x`` (steps), ``y``, ``points`` (how many in range), ``downsampled``, ``first``/``last`` step.

    With ``encoded`` (the page routes) ``x`` and ``y`` are JSON text for orjson to splice in.
    """
    out: dict[str, ChartSeries] = {}
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
            "x": _out_x(dx, encoded),
            "y": _out_y(dy, encoded),
            "points": int(len(x)),
            "downsampled": bool(len(dx) < len(x)),
            "buckets": buckets if len(dx) < len(x) else None,
        }
    return out


def points_after(cols: Columns, after: float, encoded: bool = False) -> dict[str, NewPoints]:
    """Per metric, the points whose step is past ``after`` (downsampled past LIVE_MAX_POINTS)."""
    out: dict[str, NewPoints] = {}
    for name in sorted(cols.metrics):
        x, y = cols.xy(name)
        lo = int(np.searchsorted(x, after, side="right"))
        if lo < len(x):
            dx, dy = downsample(x[lo:], y[lo:], defaults.LIVE_MAX_POINTS // 2)
            out[name] = {"x": _out_x(dx, encoded), "y": _out_y(dy, encoded), "points": int(len(x) - lo)}
    return out


def unstepped(cols: Columns) -> int:
    """How many points were logged without a step (kept in the store, not drawn on a step axis)."""
    return int(np.count_nonzero(~np.isfinite(cols.step))) if cols.count else 0
