"""What a request's JSON may hold, checked once where the body is parsed (the request guard, _guard.py).

Anything a JSON parser can produce reaches the store only when the store can
keep it on SQLite and PostgreSQL alike: strings and keys without NUL (PostgreSQL
text cannot hold it) and without lone surrogates (UTF-8 cannot carry them),
integers that fit in 64 bits, and nesting no deeper than PLATFORM_MAX_JSON_DEPTH.
A refusal names the field (``points[3000].metrics``), what is wrong and the fix.
"""

from __future__ import annotations

import json
from typing import Any

from whileai.core import codec
from whileai.core.errors import BodyRefused  # re-exported: its old home
from whileai.platform import defaults

__all__ = ["BodyRefused", "parse_strict", "check_value", "shown"]

_INT_MIN, _INT_MAX = -(2**63), 2**64  # what orjson and a 64-bit column take


def shown(value: Any, limit: int = 60) -> str:
    """A short, always printable picture of a value (never recursive, so any depth is safe)."""
    if isinstance(value, dict):
        return f"an object of {len(value)} keys"
    if isinstance(value, list):
        return f"an array of {len(value)} items"
    if isinstance(value, str):
        text = ascii(value)
    else:
        text = repr(value) if isinstance(value, (int, float, bool)) or value is None else f"a {type(value).__name__}"
    if isinstance(value, int) and not isinstance(value, bool) and len(text) > limit:
        return f"a {value.bit_length()}-bit integer"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _where(path: tuple[Any, ...] | None) -> str:
    parts: list[str] = []
    while path is not None:
        path, key = path
        parts.append(f"[{key}]" if isinstance(key, int) else "." + str(key))
    text = "".join(reversed(parts)).lstrip(".")
    return text or "the body"


def _bad_text(text: str) -> str | None:
    if text.isascii():
        return "holds a NUL character (\\u0000)" if "\x00" in text else None
    if "\x00" in text:
        return "holds a NUL character (\\u0000)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "holds a lone surrogate (not valid Unicode; a name read from a non-UTF-8 file name gives one)"
    return None


def _refuse(path: tuple[Any, ...] | None, what: str, fix: str) -> BodyRefused:
    return BodyRefused(422, f"{_where(path)} {what}; {fix}; nothing from this request was stored", "invalid_value")


def check_value(value: Any, max_depth: int | None = None) -> None:
    """Refuse (BodyRefused) the first string, key, integer or nesting level the store cannot keep, naming it."""
    limit = defaults.PLATFORM_MAX_JSON_DEPTH if max_depth is None else max_depth
    stack: list[tuple[Any, int, tuple[Any, ...] | None]] = [(value, 0, None)]
    pop, push = stack.pop, stack.append
    while stack:
        v, depth, path = pop()
        kind = type(v)
        if kind is str:
            bad = _bad_text(v)
            if bad:
                raise _refuse(path, f"is {shown(v)}, which {bad}", "send valid Unicode text without NUL")
        elif kind is int:
            if not _INT_MIN <= v < _INT_MAX:
                raise _refuse(path, f"is {shown(v)}", "send integers that fit in 64 bits, or the value as a string")
        elif kind is dict or kind is list:
            if depth >= limit:
                raise BodyRefused(
                    400,
                    f"{_where(path)} is nested more than {limit} levels deep (PLATFORM_MAX_JSON_DEPTH); "
                    "send a flatter value; nothing from this request was stored",
                    "too_deep",
                )
            if kind is dict:
                for key, item in v.items():
                    bad = _bad_text(key)
                    if bad:
                        raise _refuse(path, f"has the key {shown(key)}, which {bad}", "rename the key")
                    push((item, depth + 1, (path, key)))
            else:
                for i, item in enumerate(v):
                    push((item, depth + 1, (path, i)))


def parse_strict(raw: bytes, *, trust_fast: bool = False) -> Any:
    """Parse a JSON body and check it with :func:`check_value`; ValueError when it is not JSON at all.

    With ``trust_fast`` (a large points batch) a body orjson parses is checked
    only for NUL: orjson itself refuses lone surrogates and nesting past 1024
    levels, and reads integers past 64 bits as floats; the points check refuses
    anything that is not a number where numbers go, at any depth.
    """
    if trust_fast and codec.NAME == "orjson":
        try:
            value = codec.parse_fast(raw)
        except ValueError:
            pass
        else:
            if b"\\u0000" in raw:
                check_value(value, max_depth=10_000)
            return value
    try:
        value = json.loads(raw)
    except RecursionError:
        raise BodyRefused(
            400,
            f"the body is nested too deeply to read (more than PLATFORM_MAX_JSON_DEPTH="
            f"{defaults.PLATFORM_MAX_JSON_DEPTH} levels); send a flatter value; nothing was stored",
            "too_deep",
        ) from None
    check_value(value)
    return value
