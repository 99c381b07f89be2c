"""Every exception and warning whileai raises, in one hierarchy.

Errors derive from :class:`WhileaiError` (messages name the bad value, what is accepted,
and the fix); warnings from :class:`WhileaiWarning`, so
``warnings.simplefilter("ignore", wai.WhileaiWarning)`` silences all of ours and nothing
else. The SDK re-exports every name here (``wai.TrainingWarning``, ``wai.NotFoundError``).
"""

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
    "WhileaiWarning",
    "TrainingWarning",
    "ExportWarning",
    "MissingPolicyWarning",
    "MonitorWarning",
    "ServingWarning",
    "TrackingWarning",
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

    def __init__(self, message: str, problems: list[dict[str, Any]] | None = None, report: dict[str, Any] | None = None):
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

    def __init__(self, message: str, report: dict[str, Any] | None = None):
        super().__init__(message)
        self.report = report or {}


class TrainingConfigError(WhileaiError, ValueError):
    """One or more training knobs are out of range; ``problems`` lists every one, not just the first."""

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = problems or []


class WhileaiWarning(UserWarning):
    """Base class of every warning whileai issues: probably a mistake, never fatal."""


class TrainingWarning(WhileaiWarning):
    """Something about a hosted run is probably a mistake (silence with the warnings module)."""


class ExportWarning(WhileaiWarning):
    """An export went through, but something in the rows is probably not what the trainer should learn."""


class MissingPolicyWarning(ExportWarning):
    """Rows lack the system message or tools the policy needs, and none were passed to the export."""


class MonitorWarning(WhileaiWarning):
    """The HackMonitor could not watch as configured (too few held-out rows, an evaluation failed); training goes on."""


class ServingWarning(WhileaiWarning):
    """A served model may not answer as expected (for example, an adapter whose base cannot be loaded here)."""


class TrackingWarning(WhileaiWarning, RuntimeWarning):
    """Points or run updates could not be delivered or spooled; counted on the run, never raised into the loop."""
