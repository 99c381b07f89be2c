"""/api/v1/jobs: read the account's jobs; a job's own worker beats on its row.

Job rows are the platform's: the runner writes their spec, pid, host and
status (``POST /jobs/launch`` creates and starts one, ``POST /runs/{id}/stop``
stops a run's job; both live in ``whileai.platform.launcher.routes``). An account reads its
jobs; the only write a client makes here is the heartbeat, and only with the
job's own key.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from whileai.platform.api.common import ParsedBodyRoute, ApiError, Body, account_id, job_account, job_scope, json_response, store
from whileai.platform.store import JOB_STATUSES
from whileai.platform.store.records import JobRecord

__all__ = ["router"]

router = APIRouter(route_class=ParsedBodyRoute)


class Heartbeat(Body):
    heartbeat_at: float


class JobsAnswer(TypedDict):
    """``GET /jobs``' answer: the job records, and why the list was cut short where it was."""

    jobs: list[JobRecord]
    truncated: NotRequired[str]


@router.get("/jobs")
def list_jobs(
    request: Request,
    status: str | None = Query(None, description=f"one of {', '.join(JOB_STATUSES)}"),
    run_id: str | None = None,
    limit: int | None = None,
    acct: str = Depends(account_id),
) -> Response:
    jobs = store(request).list_jobs(acct, status=status, run_id=run_id, limit=limit)
    answer: JobsAnswer = {"jobs": jobs}
    if getattr(jobs, "truncated", False):
        answer["truncated"] = (f"cut at PLATFORM_LIST_MAX_BYTES after {len(jobs)} jobs; ask for fewer (limit) or "
                               "filter (status, run_id), and read each job with GET /jobs/{id}")
    return json_response(answer)


@router.get("/jobs/{job_id}")
def get_job(job_id: str, request: Request, acct: str = Depends(job_account)) -> Response:
    return json_response(store(request).get_job(acct, job_id))


@router.patch("/jobs/{job_id}")
def beat(job_id: str, body: Heartbeat, request: Request, acct: str = Depends(job_account)) -> Response:
    """The job's worker marks it alive (``heartbeat_at``); only the job's own key may."""
    if job_scope(request) is None:
        store(request).get_job(acct, job_id)  # another account's id answers 404 first
        raise ApiError(
            403,
            "a job's row is written by the platform and the job's own worker; an account launches a job "
            "(POST /api/v1/jobs/launch), reads it, and stops it (POST /api/v1/runs/{run_id}/stop)",
            "forbidden",
        )
    return json_response(store(request).update_job(acct, job_id, {"heartbeat_at": body.heartbeat_at}))
