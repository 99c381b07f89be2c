"""Record ids: ``<prefix>_`` and ID_HEX_BYTES random bytes as lowercase hex. One format for the platform and the SDK.

The platform names every record this way; the SDK names a run itself when the
platform cannot be reached (or ``WHILEAI_MODE=offline``), so that the platform
creates it later under the same id (``POST /runs`` with ``id``).

    new_id("run")                   # 'run_3f9c2a7d01b4e6c8'
    is_id("run_3f9c2a7d01b4e6c8", "run")   # True
"""

from __future__ import annotations

import os
import re
import secrets
from typing import Any

from whileai.core.defaults import ID_HEX_BYTES

__all__ = ["new_id", "is_id", "id_shape"]

_HEX = re.compile(rf"[0-9a-f]{{{2 * ID_HEX_BYTES}}}")


def new_id(prefix: str) -> str:
    """A fresh random id, e.g. ``new_id("run")``."""
    return f"{prefix}_{secrets.token_hex(ID_HEX_BYTES)}"


def is_id(value: Any, prefix: str) -> bool:
    """Whether ``value`` has the shape :func:`new_id` gives for ``prefix``."""
    if not isinstance(value, str) or not value.startswith(prefix + "_"):
        return False
    return _HEX.fullmatch(value, len(prefix) + 1) is not None


def names_id(value: Any, prefix: str) -> bool:
    """Whether ``value``, given where an id or a file path is accepted, names an id of kind ``prefix``.

    The one id-or-path rule: a string starting ``prefix_`` is an id unless a file of that
    name exists (a file a user named wins over an id-like spelling).
    """
    return isinstance(value, str) and value.startswith(prefix + "_") and not os.path.exists(value)


def id_shape(prefix: str) -> str:
    """The shape in words, for error messages: ``run_ followed by 16 lowercase hex digits``."""
    return f"{prefix}_ followed by {2 * ID_HEX_BYTES} lowercase hex digits"
