"""The named exceptions whileai raises. Every message names the bad value, what is accepted, and the fix."""

from __future__ import annotations

from typing import Any

__all__ = [
    "WhileaiError",
    "PlatformError",
    "NotFoundError",
    "ExportValidationError",
    "RowFormatError",
    "TrainingSelectionError",
    "TrainingConfigError",
    "TrainingWarning",
]


class WhileaiError(Exception):
    """Base class of every error whileai raises on purpose."""


class PlatformError(WhileaiError):
    """The platform refused a request. ``status`` is the HTTP status (0 when it was never reached)."""

    def __init__(self, message: str, status: int = 0, body: Any = None):
        super().__init__(message)
        self.status = status
        self.body = body


class NotFoundError(PlatformError, LookupError):
    """The id or name is not in this account (another account's ids look the same as missing ones)."""


class ExportValidationError(WhileaiError, ValueError):
    """The export gate refused the data. ``problems`` lists each offending row: index, kind, detail."""

    def __init__(self, message: str, problems: list[dict[str, Any]] | None = None, report: dict | None = None):
        super().__init__(message)
        self.problems = problems or []
        self.report = report or {}


class RowFormatError(WhileaiError, ValueError):
    """Rows that do not follow the rollout-row contract (or a JSONL file that is not valid).

    ``problems`` lists each one: ``{"row": index, "line": line number or None,
    "path": file or None, "detail": what is wrong}``.
    """

    def __init__(self, message: str, problems: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.problems = problems or []


class TrainingSelectionError(WhileaiError, ValueError):
    """The dataset cannot teach this method; ``report`` is the selection report that decided it."""

    def __init__(self, message: str, report: dict | None = None):
        super().__init__(message)
        self.report = report or {}


class TrainingConfigError(WhileaiError, ValueError):
    """One or more training knobs are out of range; ``problems`` lists every one, not just the first."""

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = problems or []


class TrainingWarning(UserWarning):
    """Something about a hosted run is probably a mistake (silence with the warnings module)."""
