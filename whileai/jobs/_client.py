"""The client a job reports through (the worker's, and the loads that read the job's own row)."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["job_client"]


def job_client() -> Any:
    """The client a job reports through: the embedded platform on the launcher's store, with the job's key."""
    from whileai.simulations.client import embedded_client, get_client

    key = os.environ.get("WHILEAI_API_KEY")
    if not key:
        raise RuntimeError("a job worker needs WHILEAI_API_KEY (the runner passes a job-scoped key)")
    if os.environ.get("WHILEAI_BASE_URL"):
        return get_client(api_key=key)
    return embedded_client(api_key=key)
