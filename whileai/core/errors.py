"""Every exception and warning whileai raises, in one hierarchy.

Errors derive from :class:`WhileaiError` (messages name the bad value, what is accepted,
and the fix); warnings from :class:`WhileaiWarning`, so
``warnings.simplefilter("ignore", wai.WhileaiWarning)`` silences all of ours and nothing
else. The SDK re-exports every name a caller can meet (``wai.TrainingWarning``,
``wai.NotFoundError``); the rest are named in :data:`NOT_IN_SDK` with the reason.
Builtin exceptions (``ValueError``, ``TypeError``, ``FileNotFoundError``) are raised
as themselves where Python's own meaning fits.

The whole tree::

    WhileaiError
    ├── PlatformError                the platform refused a request or a store operation
    │   ├── NotFoundError            (LookupError) no such id in this account
    │   ├── InvalidError             (ValueError) a value the store refuses (HTTP 422)
    │   │   ├── RetiredIdError       a deleted run's id, never used again (HTTP 409)
    │   │   └── ResumeRefused        a run with nothing to resume: done, running, no job or checkpoint (HTTP 409)
    │   ├── StoreBusyError           (RuntimeError) the SQLite file stayed locked (HTTP 503)
    │   └── StoreVersionError        the store's schema is newer than this code, or upgrading failed
    ├── ServerRefusal                the server's own refusal, answered as an HTTP error body
    │   ├── ApiError                 an HTTP API route's ``{"error": {"message", "type"}}``
    │   ├── BodyRefused              (ValueError) a JSON body the API will not take
    │   └── ChatRequestError         a chat request the serving endpoint cannot serve (OpenAI's shape)
    ├── ExportValidationError        (ValueError) the export gate refused the data
    ├── RowFormatError               (ValueError) rows that break the rollout-row contract
    ├── TrainingSelectionError       (ValueError) the dataset cannot teach this method
    │   └── ToolFormatError          tool_format='native' on a base whose template drops tools
    ├── TrainingConfigError          (ValueError) training knobs out of range
    ├── NonFiniteTraining            (RuntimeError) a training step's loss or grad_norm not finite (the job's)
    ├── NamespaceImportError         (ImportError) ``whileai`` imported as a namespace package
    └── WarmSocketNotOurs            (PermissionError) the warm socket's listener is another user's

    RankEnded                        (BaseException, like KeyboardInterrupt) a job's rank ended by its launcher

    WhileaiWarning                   (UserWarning)
    ├── TrainingWarning
    ├── ExportWarning
    │   └── MissingPolicyWarning
    ├── MonitorWarning
    ├── ServingWarning
    └── TrackingWarning              (RuntimeWarning)
        └── MirrorWarning            a report_to tracker failed mid-run
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "RankEnded",
    "WhileaiError",
    "NonFiniteTraining",
    "PlatformError",
    "NotFoundError",
    "InvalidError",
    "StoreBusyError",
    "RetiredIdError",
    "ResumeRefused",
    "StoreVersionError",
    "ServerRefusal",
    "ApiError",
    "BodyRefused",
    "ChatRequestError",
    "ExportValidationError",
    "RowFormatError",
    "TrainingSelectionError",
    "ToolFormatError",
    "TrainingConfigError",
    "NamespaceImportError",
    "WarmSocketNotOurs",
    "WhileaiWarning",
    "TrainingWarning",
    "ExportWarning",
    "MissingPolicyWarning",
    "MonitorWarning",
    "ServingWarning",
    "TrackingWarning",
    "MirrorWarning",
]


class RankEnded(BaseException):
    """torchrun ended this rank because another rank of the job failed (or the launcher was asked to end).

    A ``BaseException``, like ``KeyboardInterrupt``: no ``except Exception`` in training code may swallow it.
    """


class WhileaiError(Exception):
    """Base class of every error whileai raises on purpose."""


class PlatformError(WhileaiError):
    """The platform refused a request. ``status`` is the HTTP status (0 when it was never reached).

    The SDK's client raises it for an error answer; the store raises its subclasses itself, and
    the HTTP API answers each with its status.
    """

    def __init__(self, message: str, status: int = 0, body: Any = None):
        super().__init__(message)
        self.status = status
        self.body = body


class NotFoundError(PlatformError, LookupError):
    """The id or name is not in this account (another account's ids look the same as missing ones).

    The client raises it for a 404; the store raises it for an id it does not hold (answered 404).
    """


class InvalidError(PlatformError, ValueError):
    """A value the store refuses (answered 422); the message names it, what is accepted, and the fix."""


class RetiredIdError(InvalidError):
    """A run id that belonged to a deleted run: ids are never reused (answered 409)."""


class ResumeRefused(InvalidError):
    """A run that cannot be resumed, with why and what to do instead (the resume route answers 409)."""


class StoreBusyError(PlatformError, RuntimeError):
    """The SQLite file stayed locked through every retry (STORE_LOCK_RETRIES); answered 503 with Retry-After."""


class StoreVersionError(PlatformError):
    """This code cannot use the store's schema: it was made by a newer whileai, or upgrading it failed."""


class ServerRefusal(WhileaiError):
    """The server's own refusal of a request, answered as an HTTP error body with ``status`` and ``type``.

    It never crosses the wire as itself: a caller of the SDK meets the answer as :class:`PlatformError`.
    """

    def __init__(self, message: str, status: int, type_: str):
        super().__init__(message)
        self.message = message
        self.status = status
        self.type = type_


class ApiError(ServerRefusal):
    """An HTTP API error answered as ``{"error": {"message", "type"}}``, with ``headers`` (e.g. ``Retry-After``)."""

    def __init__(self, status: int, message: str, type_: str, headers: dict[str, str] | None = None):
        super().__init__(message, status, type_)
        self.headers = headers


class BodyRefused(ServerRefusal, ValueError):
    """A JSON body the platform will not take: ``status`` (400 or 422), ``type`` and a message naming the field."""

    def __init__(self, status: int, message: str, type_: str):
        super().__init__(message, status, type_)


class ChatRequestError(ServerRefusal):
    """A chat request the serving endpoint cannot serve, carried to an OpenAI-shaped error body."""

    def __init__(self, message: str, status: int = 400, param: str | None = None, code: str | None = None,
                 type: str = "invalid_request_error"):
        super().__init__(message, status, type)
        self.param, self.code = param, code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class ExportValidationError(WhileaiError, ValueError):
    """The export gate refused the data. ``problems`` lists each offending row: index, kind, detail."""

    def __init__(self, message: str, problems: Sequence[Mapping[str, Any]] | None = None,
                 report: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.problems = problems or []
        self.report = report or {}


class RowFormatError(WhileaiError, ValueError):
    """Rows that do not follow the rollout-row contract (or a JSONL file that is not valid).

    ``problems`` lists each one, mostly a ``jsonl.RowProblem``: ``{"row": index, "line": line number or None,
    "path": file or None, "detail": what is wrong}`` (a BFCL entry's gives its id as ``row``, and only ``detail``).
    """

    def __init__(self, message: str, problems: Sequence[Mapping[str, Any]] | None = None):
        super().__init__(message)
        self.problems = problems or []


class TrainingSelectionError(WhileaiError, ValueError):
    """The dataset cannot teach this method; ``report`` is the selection report that decided it."""

    def __init__(self, message: str, report: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.report = report or {}


class ToolFormatError(TrainingSelectionError):
    """``tool_format='native'`` on a base whose chat template drops tools, or an unknown ``tool_format``."""


class TrainingConfigError(WhileaiError, ValueError):
    """One or more training knobs are out of range; ``problems`` lists every one, not just the first."""

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = problems or []


class NonFiniteTraining(WhileaiError, RuntimeError):
    """A training step's loss or gradient norm was not finite (``jobs._finite_guard``); the message names the step,
    the method's likely causes and fixes, and what ``resume`` would continue from."""


class NamespaceImportError(WhileaiError, ImportError):
    """``whileai`` was imported as a namespace package; the message says why and what to do."""


class WarmSocketNotOurs(WhileaiError, PermissionError):
    """What listens at the warm process's socket is not this user's process: nothing may be sent to it (the command
    runs in its own interpreter instead)."""


class WhileaiWarning(UserWarning):
    """Base class of every warning whileai issues: probably a mistake, never fatal."""


class TrainingWarning(WhileaiWarning):
    """Something about a run is probably a mistake (silence with the warnings module)."""


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


class MirrorWarning(TrackingWarning):
    """A ``report_to`` tracker (W&B, MLflow, trackio) failed mid-run; noted on the run, training goes on."""


#: The classes a caller of the SDK never meets as themselves, so ``whileai.simulations`` does not
#: export them (every other class here is a ``wai`` name); the reason beside each.
NOT_IN_SDK: dict[str, str] = {
    "WarmSocketNotOurs": "raised and caught inside the warm command line's hand-off, which then runs the command itself",
    "ToolFormatError": "a TrainingSelectionError, met and caught as one (wai.TrainingSelectionError)",
    "RankEnded": "raised inside a job's rank when torchrun ends it; it never leaves the worker process",
    "NonFiniteTraining": "raised inside the job; the run fails with its message, which the SDK meets as the run's error",
    "InvalidError": "raised by the store inside the platform; the SDK meets it as a 422 PlatformError",
    "StoreBusyError": "raised by the store inside the platform; the SDK meets it as a 503 PlatformError",
    "RetiredIdError": "raised by the store inside the platform; the SDK meets it as a 409 PlatformError",
    "ResumeRefused": "raised by the platform's resume; the SDK meets it as a 409 PlatformError",
    "ServerRefusal": "the server's own refusals, answered as HTTP error bodies; the SDK meets them as PlatformError",
    "ApiError": "answered by the HTTP API as an error body; the SDK meets it as PlatformError",
    "BodyRefused": "answered by the HTTP API's request guard as a 400/422; the SDK meets it as PlatformError",
    "ChatRequestError": "answered by the serving endpoint in OpenAI's error shape; the openai client raises its own",
    "NamespaceImportError": "raised by `python -m whileai` before the SDK can load (whileai/__init__.py never ran)",
}
