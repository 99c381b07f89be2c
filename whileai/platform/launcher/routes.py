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
import os
import re
from typing import Any, get_args

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from whileai.core.defaults import GPU_USD_PER_HOUR
from whileai.core.ids import id_shape, is_id
from whileai.core.launch import split_gpu
from whileai.core.spec import RunSpec
from whileai.core.paths import data_root
from whileai.platform.api.common import ParsedBodyRoute, API_PREFIX, ApiError, Body, account_id, api_key_from, job_account, job_scope, json_response, store
from whileai.platform.launcher import jobs as launcher_jobs
from whileai.platform import defaults
from whileai.platform._rewards import reward_code_problems, reward_path
from whileai.platform.store.values import REPORTED_ENDS

__all__ = ["router", "install"]

router = APIRouter(route_class=ParsedBodyRoute)
_log = logging.getLogger("whileai.platform.launcher")


class LaunchBody(Body):
    """A launch as a client sends it. ``spec`` is the JSON edge: the client's ``spec_json``, read once into its
    method's model by the route (``_read_launch``), which is what the job row is written from."""

    run_id: str
    kind: str
    target: str | None = None
    spec: dict[str, Any]


class EndBody(Body):
    status: str
    error: str | None = None


@router.post("/jobs/launch", status_code=201)
def launch_job(body: LaunchBody, request: Request, acct: str = Depends(account_id)) -> Response:
    """Create the job for a run and start it; ``target`` None means the platform's default.

    The spec arrives as JSON from a client the platform does not trust: it is read here, once, into its
    method's model (every problem refused at once), and that model is what the job row is written from.
    """
    target = _launch_target(body)
    the_store = store(request)
    run = the_store.get_run(acct, body.run_id, series=False)  # the account's run, or 404

    def refuse(message: str) -> ApiError:
        """The 422 for a launch that cannot start, with its run failed for that reason: a run left running
        with no job reads as crashed and never ends, so waiting on it (or resubmitting the same config,
        which answers with that run) would wait for ever."""
        if run.get("status") == "running":
            try:
                the_store.update_run(acct, body.run_id, {"status": "failed", "error": f"the job was refused: {message}"})
            except Exception:  # noqa: BLE001  the refusal itself is what the caller must see
                _log.warning("could not mark run %s failed after a refused launch", body.run_id, exc_info=True)
        return ApiError(422, message, "invalid_value")

    owned = sorted(set(body.spec) & set(launcher_jobs.PLATFORM_SPEC_KEYS))
    if owned:
        raise refuse(f"spec fields {owned} are the platform's to write (where a job runs, logs and "
                     "reports); leave them out of the spec")
    embedded = bool(getattr(request.app.state, "embedded", False))
    spec, problems = _read_launch(body, the_store, acct, embedded)
    if spec is None or problems:  # every problem at once
        raise refuse("; ".join(problems))
    spec = spec.model_copy(update={"target": target})
    if isinstance(run.get("config"), dict) and run["config"].get("target") != target:
        the_store.update_run(acct, body.run_id, {"config": {**run["config"], "target": target}})
    try:
        job = launcher_jobs.launch(the_store, acct, run_id=body.run_id, kind=body.kind, target=target, spec=spec,
                            reward_path=reward_path(body.spec, embedded), embedded=embedded)
    except ValueError as exc:
        raise refuse(str(exc)) from exc
    except Exception as exc:  # e.g. no Modal token: the run is already failed with this reason
        raise ApiError(503, f"the job could not start on {target} ({type(exc).__name__}: {exc}); its run "
                            f"{body.run_id} is marked failed. Fix the cause and train again", "job_not_started") from exc
    return json_response(job, 201)


def _launch_target(body: LaunchBody) -> str:
    """Where the launch runs (the platform's default for None), after its kind and target are checked."""
    if body.kind not in defaults.TRAIN_METHODS:
        raise ApiError(422, f"kind={body.kind!r} is not a training method; send one of "
                            f"{', '.join(defaults.TRAIN_METHODS)}", "invalid_value")
    target = body.target or launcher_jobs.default_target()
    if target not in defaults.TRAIN_TARGETS:
        raise ApiError(422, f"target={target!r} is not a place jobs run; send one of "
                            f"{', '.join(defaults.TRAIN_TARGETS)} (or null for the platform's default)", "invalid_value")
    return target


def _read_launch(body: LaunchBody, the_store: Any, acct: str, embedded: bool) -> tuple[RunSpec | None, list[str]]:
    """The launch's spec read into its method's model, and every problem with it: the model's own (unknown keys,
    types, ranges), a method that is not the launch's kind, what the model's coercion lets through, ids of other
    accounts, reward code this platform does not run, and knobs left unresolved."""
    spec, problems = launcher_jobs.launch_spec({"method": body.kind, **body.spec}, embedded)
    if body.spec.get("method") != body.kind:
        problems.insert(0, f"spec method={body.spec.get('method')!r} does not name this launch's kind={body.kind!r}; "
                           f"send the run's spec with \"method\": {body.kind!r} (wai.train does)")
    problems += _strict_problems(body.run_id, body.spec)
    problems += _foreign_ids(the_store, acct, body.spec)
    problems += reward_code_problems(body.spec, embedded)
    missing = launcher_jobs.missing_keys({"method": body.kind, **body.spec})
    if missing:  # the platform trains what it is given and fills nothing: a spec arrives resolved (wai.train's)
        problems.insert(0, f"the spec is not resolved: it does not name {', '.join(missing)}; send the spec "
                           "wai.train resolves (every knob of its method with its value), or start the run with "
                           "wai.train")
    return spec, problems


def _strict_problems(run_id: str, spec: dict[str, Any]) -> list[str]:
    """What the typed spec's coercion lets through and a job must not get: a bool where a number goes, no
    dataset, a GPU no price table names, a run id that is not this run's, a base named like a hub id that
    is a folder of the platform's own data."""
    from whileai.core.spec import SPEC_MODELS

    problems = []
    model = SPEC_MODELS.get(str(spec.get("method")))
    for key, value in spec.items():
        field = model.model_fields.get(key) if model is not None else None
        if isinstance(value, bool) and field is not None and not _takes_bool(field.annotation):
            problems.append(f"spec {key}={value!r} is a bool where a number goes (a bool is not an int); send a "
                            "number")
    if not isinstance(spec.get("dataset"), str):
        problems.append(f"spec dataset={spec.get('dataset')!r} is not a dataset id; send the id of a dataset of "
                        "this account (wai.push returns it)")
    gpu = spec.get("gpu")
    if gpu is not None and not _known_gpu(gpu):
        problems.append(f"spec gpu={str(gpu)[:80]!r} is not a GPU jobs run on; send one of "
                        f"{', '.join(GPU_USD_PER_HOUR)}, optionally with a count (\"H100:8\"), or null for "
                        "the platform's default")
    if "run_id" in spec and spec["run_id"] is not None and spec["run_id"] != run_id:
        problems.append(f"spec run_id={str(spec['run_id'])[:80]!r} is not this launch's run_id={run_id!r}; leave "
                        f"it out, or send the launch's own ({id_shape('run')})")
    base = spec.get("base_model")
    if isinstance(base, str) and _platform_folder(base):
        problems.append(f"spec base_model={base[:200]!r} names a folder of the platform's own data (a run's "
                        "adapter, a job's files), not a hub id; send a hub id, the kit's base, or a directory "
                        "under the platform's model folders")
    return problems


def _takes_bool(annotation: Any) -> bool:
    return annotation is bool or any(_takes_bool(arg) for arg in get_args(annotation))


def _known_gpu(gpu: Any) -> bool:
    if not isinstance(gpu, str):
        return False
    name, count = split_gpu(gpu)
    return name in GPU_USD_PER_HOUR and (":" not in gpu or count is not None)


def _platform_folder(base: str) -> bool:
    """Whether a relative ``base`` is a path into the platform's data: a run id in it, or a first part that
    the data root holds (a loader resolves a name that exists on disk before it looks at the hub)."""
    if os.path.isabs(os.path.expanduser(base)):
        return False  # an absolute path is launch_base_problem's (under the model folders, never adapters)
    parts = [part for part in base.replace("\\", "/").split("/") if part]
    if any(is_id(part, "run") or is_id(part, "job") for part in parts):
        return True
    return bool(parts) and (data_root() / parts[0]).exists()


def _foreign_ids(the_store: Any, acct: str, spec: dict[str, Any]) -> list[str]:
    """The datasets and runs a spec names that are not this account's (a worker would only fail on them later)."""
    problems = []
    for field in ("dataset", "holdout"):
        ident = spec.get(field)
        if ident is None:
            continue
        try:
            the_store.get_dataset(acct, str(ident))
        except LookupError:
            problems.append(f"spec {field}={str(ident)[:80]!r} is not a dataset of this account; send the id of one "
                            "of yours (wai.push returns it)")
    for field in ("init_from", "gold_judge", "reward_model"):
        ident = spec.get(field)
        if ident is None:
            continue
        try:
            the_store.get_run(acct, str(ident), series=False)
        except LookupError:
            problems.append(f"spec {field}={str(ident)[:80]!r} is not a run of this account; send the id of one of "
                            "its finished runs")
    return problems


@router.post("/jobs/{job_id}/end")
def end_job(job_id: str, body: EndBody, request: Request, acct: str = Depends(job_account)) -> Response:
    """A worker's last word: the job's status and error. Its key is revoked; a settled job keeps its status."""
    the_store = store(request)
    job = the_store.get_job(acct, job_id)
    if job_scope(request) is None:
        raise ApiError(403, "a job's end is reported by its own worker, with the job's key; to end a job "
                            f"yourself, stop its run: POST /api/v1/runs/{job['run_id']}/stop", "forbidden")
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


_RUN_API = re.compile(r"^/api/v1/runs/(run_[0-9a-f]+)/?$")
_JOB_API = re.compile(r"^/api/v1/jobs/(job_[0-9a-f]+)/?$")
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
