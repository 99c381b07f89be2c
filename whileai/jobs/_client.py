"""How a job reports: the client it reports through, and the text of the error that ended it."""

from __future__ import annotations

import os
import traceback
from typing import Any

__all__ = ["job_client", "error_text"]


def job_client() -> Any:
    """The client a job reports through: the embedded platform on the launcher's store, with the job's key."""
    from whileai.domain.client import embedded_client, get_client

    key = os.environ.get("WHILEAI_API_KEY")
    if not key:
        raise RuntimeError("a job worker needs WHILEAI_API_KEY (the runner passes a job-scoped key)")
    if os.environ.get("WHILEAI_BASE_URL"):
        return get_client(api_key=key)
    return embedded_client(api_key=key)


def error_text(exc: BaseException) -> str:
    """First line ``Type: message`` (what ``print(run)`` shows), then the traceback."""
    head = f"{type(exc).__name__}: {exc}".strip()
    tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return f"{head}\n\n{tail[-8000:]}"
