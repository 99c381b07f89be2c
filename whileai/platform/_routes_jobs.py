"""/api/v1/jobs: the job runner's rows (one per hosted training job) and their heartbeats."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from whileai.platform._routes_common import Body, account_id, json_response, store
from whileai.platform.store import JOB_STATUSES

__all__ = ["router"]

router = APIRouter()


class JobFields(Body):
    run_id: str | None = None
    kind: str | None = None
    target: str | None = None
    status: str | None = None
    pid: int | None = None
    call_id: str | None = None
    spec: Any = None
    heartbeat_at: float | None = None
    error: str | None = None


@router.post("/jobs", status_code=201)
def create_job(body: JobFields, request: Request, acct: str = Depends(account_id)) -> Response:
    fields = body.model_dump(exclude_unset=True)
    if fields.get("status") is None:
        fields.pop("status", None)
    return json_response(store(request).create_job(acct, **fields), 201)


@router.get("/jobs")
def list_jobs(
    request: Request,
    status: str | None = Query(None, description=f"one of {', '.join(JOB_STATUSES)}"),
    run_id: str | None = None,
    limit: int | None = None,
    acct: str = Depends(account_id),
) -> Response:
    return json_response({"jobs": store(request).list_jobs(acct, status=status, run_id=run_id, limit=limit)})


@router.get("/jobs/{job_id}")
def get_job(job_id: str, request: Request, acct: str = Depends(account_id)) -> Response:
    return json_response(store(request).get_job(acct, job_id))


@router.patch("/jobs/{job_id}")
def update_job(job_id: str, body: JobFields, request: Request, acct: str = Depends(account_id)) -> Response:
    return json_response(store(request).update_job(acct, job_id, body.model_dump(exclude_unset=True)))
