"""The statuses of runs and jobs, one vocabulary for the platform that stores them and the SDK that reads them."""

from __future__ import annotations

__all__ = ["RUN_STATUSES", "FINISHED_STATUSES", "REPORTED_ENDS", "JOB_STATUSES", "CRASHED"]

#: the process ended without a word (killed with its launcher, a lost machine): the platform's reading, never
#: reported by the process itself; a running run whose own writer went silent also reads ``crashed`` when shown
CRASHED = "crashed"
#: what a run's or job's own process may report as its end (``POST /jobs/{id}/end``, an SDK run's finish)
REPORTED_ENDS = ("done", "failed", "stopped")
FINISHED_STATUSES = (*REPORTED_ENDS, CRASHED)
RUN_STATUSES = ("running", *FINISHED_STATUSES)
JOB_STATUSES = ("queued", "running", *FINISHED_STATUSES)
