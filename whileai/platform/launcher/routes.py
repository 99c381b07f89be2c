"""/api/v1/jobs/launch, /api/v1/jobs/{id}/end, /api/v1/runs/{id}/stop and /resume, and the reconcile-on-read hook.

An account launches a job and stops its run; ``end`` is the job's own worker's
last word and takes only that job's key.

``install(app)`` adds the router and a small middleware that settles a run's
unfinished jobs whenever the run or job is read (``GET /api/v1/runs/{id}``,
``GET /api/v1/jobs/{id}``, the run page ``GET /runs/{id}``): that is how a
killed worker's run turns failed and how a Modal job's progress is pulled,
with no watcher process.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import ConfigDict
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from whileai.core.spec import updated
from whileai.domain.client import API_PREFIX
from whileai.platform.api.common import ParsedBodyRoute, ApiError, Body, account_id, api_key_from, job_account, job_scope, json_response, store
from whileai.platform.launcher import jobs as launcher_jobs
from whileai.core import defaults as core_defaults
from whileai.platform._rewards import reward_path
from whileai.platform.launcher._rules import bounded, launch_problems
from whileai.platform.store.records import RunRecord
from whileai.platform.store.values import REPORTED_ENDS

__all__ = ["router", "install"]

router = APIRouter(route_class=ParsedBodyRoute)
_log = logging.getLogger("whileai.platform.launcher")


class LaunchBody(Body):
    """A launch as a client sends it. ``spec`` is the JSON edge: the client's ``spec_json``, read once into its
    method's model by the route (``launch_problems``), which is what the job row is written from. Beside
    ``run_id``, every field is checked by the route, so a launch refused for any of them fails its run."""

    model_config = ConfigDict(extra="allow", strict=True)

    run_id: str
    kind: Any = None
    target: Any = None
    spec: Any = None


class EndBody(Body):
    status: str
    error: str | None = None


@router.post("/jobs/launch", status_code=201)
def launch_job(body: LaunchBody, request: Request, acct: str = Depends(account_id)) -> Response:
    """Create the job for a run and start it; ``target`` None means the platform's default.

    The spec arrives as JSON from a client the platform does not trust: it is read here, once, into its
    method's model (every problem refused at once), and that model is what the job row is written from.
    """
    the_store = store(request)
    run = the_store.get_run(acct, body.run_id, series=False)  # the account's run, or 404
    refuse = _refusal(the_store, acct, run)
    refused = getattr(request.state, "body_refused", None)  # the request guard's JSON rules (NUL, 64 bits, ...)
    if refused is not None:
        raise refuse(str(refused))
    shape = _body_problems(body)
    if shape:
        raise refuse("; ".join(shape))
    target = body.target or launcher_jobs.default_target()
    embedded = bool(getattr(request.app.state, "embedded", False))
    spec, problems = launch_problems(the_store, acct, body.run_id, body.kind, body.spec, embedded)
    if spec is None or problems:  # every problem at once
        raise refuse("; ".join(problems))
    spec = updated(spec, target=target)
    if isinstance(run.get("config"), dict) and run["config"].get("target") != target:
        the_store.update_run(acct, body.run_id, {"config": {**run["config"], "target": target}})
    try:
        job = launcher_jobs.launch(the_store, acct, run_id=body.run_id, kind=spec.method, target=target, spec=spec,
                                   reward_path=reward_path(spec, embedded), embedded=embedded)
    except ValueError as exc:
        raise refuse(str(exc)) from exc
    except Exception as exc:  # e.g. no Modal token: the run is already failed with this reason
        raise ApiError(503, f"the job could not start on {target} ({type(exc).__name__}: {exc}); its run "
                            f"{body.run_id} is marked failed. Fix the cause and train again", "job_not_started") from exc
    return json_response(job, 201)


def _refusal(the_store: Any, acct: str, run: RunRecord) -> Callable[[str], ApiError]:
    """How a launch on ``run`` is refused: a 422 with the reason (bounded, LAUNCH_REFUSAL_MAX_CHARS), and the run
    failed with it. A run left running with no job reads as crashed and never ends, so waiting on it (or
    resubmitting the same config, which answers with that run) would wait for ever."""

    def refuse(message: str) -> ApiError:
        message = bounded(message)
        if run.get("status") == "running":
            try:
                the_store.update_run(acct, run["id"], {"status": "failed", "error": f"the job was refused: {message}"})
            except Exception:  # noqa: BLE001  the refusal itself is what the caller must see
                _log.warning("could not mark run %s failed after a refused launch", run["id"], exc_info=True)
        return ApiError(422, message, "invalid_value")

    return refuse


def _body_problems(body: LaunchBody) -> list[str]:
    """What is wrong with the launch's own fields: unknown ones, a kind that is no method, a target that is no
    place jobs run, a spec that is no JSON object."""
    problems = []
    extra = sorted(body.model_extra or {})
    if extra:
        problems.append(f"{bounded(', '.join(extra))[:200]} {'is' if len(extra) == 1 else 'are'} not a field of a "
                        "launch; send run_id, kind, target and spec")
    if not isinstance(body.kind, str) or body.kind not in core_defaults.TRAIN_METHODS:
        problems.append(f"kind={repr(body.kind)[:80]} is not a training method; send one of "
                        f"{', '.join(core_defaults.TRAIN_METHODS)}")
    if body.target is not None and (not isinstance(body.target, str) or body.target not in core_defaults.TRAIN_TARGETS):
        problems.append(f"target={repr(body.target)[:80]} is not a place jobs run; send one of "
                        f"{', '.join(core_defaults.TRAIN_TARGETS)} (or null for the platform's default)")
    if not isinstance(body.spec, dict):
        problems.append(f"spec is {type(body.spec).__name__}, not a JSON object; send the run's spec (wai.train "
                        "resolves it)")
    return problems


@router.post("/jobs/{job_id}/end")
def end_job(job_id: str, body: EndBody, request: Request, acct: str = Depends(job_account)) -> Response:
    """A worker's last word: the job's status and error. Its key is revoked; a settled job keeps its status."""
    the_store = store(request)
    job = the_store.get_job(acct, job_id)
    if job_scope(request) is None:
        raise ApiError(403, "a job's end is reported by its own worker, with the job's key; to end a job "
                            f"yourself, stop its run: POST {API_PREFIX}/runs/{job['run_id']}/stop", "forbidden")
    if body.status not in REPORTED_ENDS:
        raise ApiError(422, f"status={body.status!r} does not end a job; send one of {', '.join(REPORTED_ENDS)}",
                       "invalid_value")
    if job["status"] in launcher_jobs.FINISHED:
        launcher_jobs.end_job(the_store, acct, job, job["status"])
        return json_response(the_store.get_job(acct, job_id))
    return json_response(launcher_jobs.end_job(the_store, acct, job, body.status, body.error))


@router.post("/runs/{run_id}/stop")
def stop_run(run_id: str, request: Request, acct: str = Depends(account_id)) -> Response:
    """Stop a run's job (local worker killed with its process group, Modal call cancelled) and mark it stopped.

    Answers ``{"run": record, "stopped": bool, "detail": text}``; a run that has
    already ended is left as it is (``stopped`` false, ``detail`` says how it
    ended). Another account's run answers 404.
    """
    from whileai.platform.api.runs import with_url

    answer = launcher_jobs.stop_run(store(request), acct, run_id)
    answer["run"] = with_url(answer["run"], request)
    return json_response(answer)


@router.post("/runs/{run_id}/resume", status_code=201)
def resume_run(run_id: str, request: Request, acct: str = Depends(account_id)) -> Response:
    """Continue a stopped, failed or crashed run from its last checkpoint in a new job of the same run.

    Answers 201 with ``{"run": record, "job": record}``; 409 with why when there is nothing to resume
    (the run is done, still running, has no job or saved no checkpoint); 404 for another account's run.
    """
    from whileai.platform.api.runs import with_url

    the_store = store(request)
    try:
        job = launcher_jobs.resume_run(the_store, acct, run_id, bool(getattr(request.app.state, "embedded", False)))
    except launcher_jobs.ResumeRefused as exc:
        raise ApiError(409, str(exc), "not_resumable") from exc
    except LookupError:
        raise  # another account's run, or none: the API's 404
    except ValueError as exc:  # the new job could not start: its run is failed again with the reason
        raise ApiError(422, str(exc), "invalid_value") from exc
    except Exception as exc:
        raise ApiError(503, f"the resumed job could not start ({type(exc).__name__}: {exc}); its run {run_id} is "
                            "marked failed. Fix the cause and resume again", "job_not_started") from exc
    run = with_url(the_store.get_run(acct, run_id, series=False), request)
    return json_response({"run": run, "job": job}, 201)


_RUN_API = re.compile(rf"^{re.escape(API_PREFIX)}/runs/(run_[0-9a-f]+)/?$")
_JOB_API = re.compile(rf"^{re.escape(API_PREFIX)}/jobs/(job_[0-9a-f]+)/?$")
_RUN_PAGE = re.compile(r"^/(?:page-data/)?runs/(run_[0-9a-f]+)(?:/live)?/?$")  # the run page and its data


def _settle(app: Any, scope: Scope, kind: str, ident: str, page: bool) -> None:
    from whileai.platform.pages.auth import page_account  # a page reader may hold a session, not a key

    request = Request(scope)
    the_store = app.state.store
    key = api_key_from(request)
    acct = page_account(request, count=False) if page else the_store.account_for_key(key) if key else None
    if acct is None:
        return  # the route answers 401 itself
    try:
        if kind == "run":
            launcher_jobs.reconcile_run(the_store, acct, ident)
        else:
            launcher_jobs.reconcile(the_store, acct, the_store.get_job(acct, ident))
    except LookupError:
        return  # the route answers 404 itself


class _ReconcileOnRead:
    """Settle the jobs behind a run or job before the route reads it (never fails the read)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("method") == "GET":
            path = scope.get("path", "")
            found = None
            for pattern, kind, cookie in ((_RUN_API, "run", False), (_JOB_API, "job", False), (_RUN_PAGE, "run", True)):
                match = pattern.match(path)
                if match:
                    found = (kind, match.group(1), cookie)
                    break
            if found is not None and "app" in scope:
                try:
                    await run_in_threadpool(_settle, scope["app"], scope, *found)
                except Exception:  # reading a run must work even when settling its job does not
                    _log.exception("could not settle the jobs behind %s", path)
        await self.app(scope, receive, send)


def install(app: Any) -> None:
    """Add the job routes under /api/v1 and the reconcile-on-read middleware to a platform app."""
    app.include_router(router, prefix=API_PREFIX)
    app.add_middleware(_ReconcileOnRead)
