"""The JSON codec: orjson when it is installed, else the standard library. One copy for the SDK's client, the store and the exporter.

orjson is several times faster than the standard library on point batches and
row-sized objects. Whatever it refuses (integers past 64 bits, lone surrogates,
the ``NaN`` literal Python's json reads) falls back to the standard library, so
the codec in use never changes what can be read or written. A value that is not
JSON (an object, a set, bytes) is refused with ``TypeError`` naming its type:
it is never sent or stored as its ``repr``.

    from whileai.core import codec
    codec.dumps({"a": 1})            # '{"a":1}'
    codec.dumps_bytes([1, 2])        # b'[1,2]'
    codec.loads('{"a": 1}')          # {'a': 1}
    codec.loads_exact("18446744073709551616")  # 18446744073709551616, not a rounded float
"""

from __future__ import annotations

import json
from typing import Any

_orjson: Any
try:  # optional speed-up; the standard library is the fallback
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised only where orjson is absent
    _orjson = None

__all__ = ["NAME", "dumps", "dumps_bytes", "loads", "loads_exact", "parse_fast", "fast_dumps", "JSONDecodeError"]

#: The codec in use ("orjson" or "json"), for benchmark reports.
NAME = "orjson" if _orjson is not None else "json"

#: What a failed parse raises (a ValueError).
JSONDecodeError = json.JSONDecodeError

#: orjson's encoder (bytes out) when installed, else None: for hot loops that do their own fallback
#: on its TypeError (the store's point ingestion encodes 100,000 metric dicts a request).
fast_dumps = _orjson.dumps if _orjson is not None else None

#: The fastest parser installed, with no fallback and no exactness check: for quick "is this a JSON
#: object?" verdicts, where a ValueError or any other type sends the caller to :func:`loads_exact`.
parse_fast = _orjson.loads if _orjson is not None else json.loads


def _stdlib_dumps(value: Any, *, ascii_only: bool, allow_nan: bool) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=ascii_only, allow_nan=allow_nan)
    except TypeError as exc:
        raise TypeError(f"{exc}; only JSON values can be encoded (str, int, float, bool, None, list, dict "
                        "with str keys): convert it first") from None


def dumps(value: Any, *, allow_nan: bool = False) -> str:
    """Compact JSON text, non-ASCII kept as is. Refuses a value that is not JSON (``TypeError``).

    With orjson, NaN and infinities are written as ``null`` (orjson's rule); the
    standard library refuses them (``ValueError``) unless ``allow_nan``. Callers
    that must not store either check their values first (the store's
    ``check_json_value``).
    """
    if _orjson is not None:
        try:
            text: str = _orjson.dumps(value).decode()
            return text
        except TypeError:  # an int beyond 64 bits, a lone surrogate, or not JSON at all: the stdlib decides
            pass
    return _stdlib_dumps(value, ascii_only=False, allow_nan=allow_nan)


def dumps_bytes(value: Any, *, allow_nan: bool = False) -> bytes:
    """:func:`dumps` as bytes that are always valid UTF-8 (a request body, a JSONL line).

    The standard-library fallback escapes non-ASCII, which is how a lone surrogate
    (which UTF-8 cannot carry) still becomes valid text.
    """
    if _orjson is not None:
        try:
            data: bytes = _orjson.dumps(value)
            return data
        except TypeError:
            pass
    return _stdlib_dumps(value, ascii_only=True, allow_nan=allow_nan).encode()


def loads(text: str | bytes) -> Any:
    """Parse JSON text; ``NaN``/``Infinity`` literals come back as floats, so a caller can name them.

    Fast: an integer outside [-2**63, 2**64) may come back as a rounded float with
    orjson. Use :func:`loads_exact` where that matters (tool-call arguments).
    """
    if _orjson is not None:
        try:
            return _orjson.loads(text)
        except _orjson.JSONDecodeError:
            pass  # NaN/Infinity literals, or malformed: the stdlib says which, with a position
    return json.loads(text)


def loads_exact(text: str | bytes) -> Any:
    """:func:`loads`, but a result holding a float too large to be an exact orjson integer is parsed again by the stdlib."""
    value = loads(text)
    if _orjson is not None and has_huge_float(value):
        return json.loads(text)
    return value


def has_huge_float(value: Any) -> bool:
    """Whether a parsed value holds a float outside (-9.2e18, 9.2e18), where orjson's rounded integers land."""
    kind = type(value)
    if kind is dict:
        values: Any = value.values()
    elif kind is list:
        values = value
    else:
        return kind is float and not -9.2e18 < value < 9.2e18
    for item in values:
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is float:
            if not -9.2e18 < item < 9.2e18:
                return True
        elif has_huge_float(item):
            return True
    return False
