"""A platform error in the command line's words: its own sentence (what failed, what to do), never HTTP's."""

from __future__ import annotations

import re

__all__ = ["said"]

#: the client's request line in front of a platform error (``POST /api/v1/runs/x/resume -> 409: ``)
_REQUEST_LINE = re.compile(r"^(?:GET|POST|PUT|PATCH|DELETE|HEAD) \S+(?: -> \d{3})?: ")


def said(exc: Exception) -> str:
    """A platform error in the command line's words: its own sentence (what failed, what to do), no HTTP."""
    text = _REQUEST_LINE.sub("", str(exc), count=1)
    if getattr(exc, "status", None) in (401, 403):
        text += ("; the platform did not accept these credentials: sign in again, or set WHILEAI_API_KEY to a key "
                 "of this platform (python -m whileai accounts)")
    return text
