"""Shared by the tests that start real hosted jobs: the job of a run, and waiting for a condition."""

from __future__ import annotations

import time
from collections.abc import Callable


def job_of(run_id: str) -> dict:
    """The (first) job record of hosted run ``run_id``, read through the platform."""
    from whileai.simulations.client import get_client

    return get_client().request("GET", "/jobs", params={"run_id": run_id})["jobs"][0]


def wait_for(predicate: Callable[[], object], timeout: float = 60.0, what: str = "condition",
             every: float = 0.2) -> None:
    """Poll ``predicate`` until it is true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
