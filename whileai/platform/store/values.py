"""Checking and encoding what clients store: JSON values, metric points, and a run's cost.

Everything here is pure (no database), so the store and the HTTP API share one
set of rules and one wording for every refusal.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any, TypedDict

from whileai.core import codec
from whileai.core.errors import InvalidError, NotFoundError, RetiredIdError  # re-exported: their old home
from whileai.core.launch import split_gpu
from whileai.core.statuses import FINISHED_STATUSES, JOB_STATUSES, REPORTED_ENDS, RUN_STATUSES  # re-exported
from whileai.platform import defaults
from whileai.core import defaults as core_defaults

__all__ = [
    "InvalidError",
    "NotFoundError",
    "RetiredIdError",
    "RUN_STATUSES",
    "JOB_STATUSES",
    "FINISHED_STATUSES",
    "REPORTED_ENDS",
    "RUN_STOP_MARK",
    "dumps",
    "loads",
    "canonical_json",
    "check_json_value",
    "clean_points",
    "run_cost",
    "CostBasis",
]

#: The summary key of a run stopped on request (``POST /runs/{id}/stop``): such a run
#: keeps status ``stopped``, so a late finish from the job it stopped cannot undo it.
RUN_STOP_MARK = "stop"

_MAX_STEP = 2**62
_POINT_KEYS = frozenset({"step", "metrics", "ts"})


# --------------------------------------------------------------------------- JSON


#: Compact JSON text (whileai.core.codec.dumps: orjson when installed); NaN never reaches it,
#: check_json_value refuses non-finite numbers first.
dumps = codec.dumps

#: Parse JSON text (whileai.core.codec.loads); NaN and Infinity literals come back as floats so
#: callers can name them.
loads = codec.loads


def canonical_json(value: Any) -> str:
    """The stored text of a JSON value: stdlib, compact, key order kept (stable across installs)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _path(parent: str, key: Any) -> str:
    return f"{parent}[{key}]" if isinstance(key, int) else f"{parent}.{key}"


def check_json_value(value: Any, where: str) -> str:
    """Validate a JSON-shaped value and return its canonical text, naming the first bad spot."""
    try:
        return canonical_json(value)
    except (ValueError, TypeError):
        pass
    stack: list[tuple[str, Any]] = [(where, value)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            raise InvalidError(
                f"{path} is {v!r}, which JSON cannot carry; send a finite number or null instead"
            )
        if isinstance(v, dict):
            for k, item in v.items():
                if not isinstance(k, str):
                    raise InvalidError(f"{path} has the key {k!r}; object keys must be strings")
                stack.append((_path(path, k), item))
        elif isinstance(v, (list, tuple)):
            stack.extend((_path(path, i), item) for i, item in enumerate(v))
        elif not (v is None or isinstance(v, (str, int, float, bool))):
            raise InvalidError(
                f"{path} is a {type(v).__name__}; send JSON values only "
                "(objects, arrays, strings, numbers, booleans, null)"
            )
    raise InvalidError(f"{where} is not JSON-shaped; send objects, arrays, strings, numbers, booleans or null")


# --------------------------------------------------------------------------- points


def _bad_point(i: int, message: str) -> InvalidError:
    return InvalidError(f"points[{i}] {message}; nothing from this batch was stored")


def _check_point(i: int, p: Any, now: float) -> tuple[int | None, float, str]:
    """The precise check of one point: ``(step, ts, metrics_json)``, or InvalidError saying what is wrong."""
    if type(p) is not dict:
        raise _bad_point(i, f"is a {type(p).__name__}; each point is an object with step, metrics and ts")
    extra = sorted(set(p) - _POINT_KEYS)
    if extra:
        raise _bad_point(i, f"has unknown fields {extra}; a point has step, metrics and ts")
    metrics = p.get("metrics")
    if type(metrics) is not dict:
        raise _bad_point(
            i, f"has metrics={metrics!r:.80}; send an object of metric name to number, e.g. {{\"loss\": 0.5}}"
        )
    max_key = defaults.PLATFORM_MAX_KEY_CHARS
    for k, v in metrics.items():
        if not k or len(k) > max_key:
            raise _bad_point(i, f"has a metric name of {len(k)} characters; names are 1 to {max_key} characters")
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise _bad_point(i, f"metric {k!r} is {v!r:.80} ({type(v).__name__}); metrics are numbers")
        if not math.isfinite(v):
            raise _bad_point(
                i, f"metric {k!r} is {v!r}; only finite numbers are stored (drop the value or log a finite one)"
            )
    step = p.get("step")
    if step is not None and (type(step) is not int or not 0 <= step < _MAX_STEP):
        raise _bad_point(i, f"has step={step!r}; send a whole number >= 0, or null")
    ts = p.get("ts")
    if ts is None:
        ts = now
    elif isinstance(ts, bool) or not isinstance(ts, (int, float)):
        raise _bad_point(i, f"has ts={ts!r:.80}; send seconds since the epoch as a number, or leave it out")
    elif not math.isfinite(ts):
        raise _bad_point(i, f"has ts={ts!r}; send a finite number of seconds since the epoch")
    return step, float(ts), dumps(metrics)


def clean_points(points: Any, run_id: str, now: float | None = None) -> list[tuple[str, int | None, float, str]]:
    """Validate a batch of points and return insert rows ``(run_id, step, ts, metrics_json)``.

    Each point is ``{"step": int >= 0 | null, "metrics": {name: finite number}, "ts": float?}``;
    ``metrics`` becomes compact JSON text. A missing ``ts`` is the time of arrival.
    One bad point refuses the whole batch, so a retry after a fix is idempotent.

    The loop is the hot path of ingestion (100,000 points a request), so it
    checks each point with a few C-level operations and hands anything unusual
    to ``_check_point``, which either accepts it or says precisely what is wrong.
    """
    if not isinstance(points, list):
        raise InvalidError(
            f"points is a {type(points).__name__}; send a list of "
            '{"step": int|null, "metrics": {name: number}, "ts": seconds}'
        )
    now = time.time() if now is None else now
    encode = codec.fast_dumps
    keys = _POINT_KEYS
    names: set[str] = set()
    out: list[tuple[str, int | None, float, str]] = []
    append = out.append
    for i, p in enumerate(points):
        try:
            metrics = p["metrics"]
            total = sum(metrics.values())  # TypeError unless every value is a number
            step = p.get("step")
            ts = p.get("ts")
        except (TypeError, KeyError, AttributeError):
            append((run_id, *_check_point(i, p, now)))
            continue
        if encode is not None:
            raw = encode(metrics)
            text = raw.decode()
            plain = b":true" not in raw and b":false" not in raw  # no booleans among the values
        else:
            text, plain = "", False
        if (
            not plain
            or total - total != 0.0  # an inf or nan somewhere (inf - inf is nan)
            or type(ts) is not float
            or ts - ts != 0.0
            or (step is not None and (type(step) is not int or step < 0 or step >= _MAX_STEP))
            or not p.keys() <= keys
        ):
            append((run_id, *_check_point(i, p, now)))
            continue
        names.update(metrics)
        append((run_id, step, ts, text))
    if names and (min(map(len, names)) == 0 or max(map(len, names)) > defaults.PLATFORM_MAX_KEY_CHARS):
        for i, p in enumerate(points):  # find and name the point that carries it
            _check_point(i, p, now)
    return out


# --------------------------------------------------------------------------- cost


class CostBasis(TypedDict):
    """How :func:`run_cost` priced a run: the GPU and its count, the seconds, the rate and where it was read."""

    gpu: str  #: the table's name for it, or the summary's as given where the table has none
    count: int
    seconds: int | float
    source: str
    read_on: str
    usd_per_hour: float | None  #: None where the table names no price for the GPU
    estimate: bool
    text: str  #: the basis in one line, for a page or a log


def _find_cost_inputs(summary: dict[str, Any]) -> tuple[Any, Any]:
    for source in (summary, summary.get("training")):
        if isinstance(source, dict) and source.get("gpu") is not None and source.get("seconds") is not None:
            return source["gpu"], source["seconds"]
    return None, None


def run_cost(summary: Any) -> tuple[float | None, CostBasis | None]:
    """``(cost_usd, cost_basis)`` for a run whose summary carries ``gpu`` and ``seconds``.

    Looks at the summary's top level, then ``summary["training"]``. The rate is
    ``GPU_USD_PER_HOUR[gpu]`` (Modal's on-demand list price on GPU_PRICE_READ_ON);
    ``"H100:2"`` counts two GPUs. A GPU the table does not name gives
    ``cost_usd=None`` and a basis that says so. ``(None, None)`` when the
    summary has no GPU time at all.
    """
    if not isinstance(summary, dict):
        return None, None
    gpu, seconds = _find_cost_inputs(summary)
    if gpu is None or isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        return None, None
    if not math.isfinite(seconds) or seconds < 0:
        return None, None
    name, parsed = split_gpu(str(gpu))
    count = parsed or 1
    table = {k.upper(): k for k in core_defaults.GPU_USD_PER_HOUR}
    key = table.get(name.strip().upper())
    source, read_on = core_defaults.GPU_PRICE_SOURCE, core_defaults.GPU_PRICE_READ_ON
    if key is None:
        text = (f"no estimate: GPU {str(gpu)!r} has no list price in the table "
                f"(GPU_USD_PER_HOUR names {', '.join(core_defaults.GPU_USD_PER_HOUR)})")
        return None, {"gpu": str(gpu), "count": count, "seconds": seconds, "source": source, "read_on": read_on,
                      "usd_per_hour": None, "estimate": False, "text": text}
    rate = core_defaults.GPU_USD_PER_HOUR[key]
    who = f"{count} x {key}" if count > 1 else key
    each = " each" if count > 1 else ""
    text = f"estimate: {who} at ${rate:.2f}/h{each}, {source} {read_on}"
    basis: CostBasis = {"gpu": key, "count": count, "seconds": seconds, "source": source, "read_on": read_on,
                        "usd_per_hour": rate, "estimate": True, "text": text}
    return round(seconds / 3600 * rate * count, 2), basis
