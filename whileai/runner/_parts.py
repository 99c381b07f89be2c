"""A part of a run's record read back: the record arrives as JSON, so a part may be missing or of another shape."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["json_object"]


def json_object(value: Any) -> dict[str, Any]:
    """``value`` as a plain dict where it is a JSON object (a mapping); {} for anything else, None included."""
    return dict(value) if isinstance(value, Mapping) else {}
