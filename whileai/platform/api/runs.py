"""/api/v1/runs: create, read, list, update and delete runs, and ingest their points."""

from __future__ import annotations

import json
from typing import Any, NotRequired, TypedDict

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from whileai.platform.api.common import ParsedBodyRoute, ApiError, Body, account_id, base_url, json_response, run_account, store
from whileai.platform.store.values import dumps, loads
from whileai.platform.store import FINISHED_STATUSES, RUN_STATUSES
from whileai.platform.store.records import PointsAccepted, RunRecord
from whileai.platform import defaults
from whileai.core.collector import gc_paused  # one process-wide, counted pause of the collector

__all__ = ["router"]

router = APIRouter(route_class=ParsedBodyRoute)


class RunCreate(Body):
    id: str | None = None
    name: str | None = None
    dataset: str | None = None
    after_dataset: str | None = None
    config: Any = None
    kind: str | None = None
    status: str = "running"
    summary: dict[str, Any] | None = None
    step: int | None = None
    total_steps: int | None = None
    once: bool = False


class RunPatch(Body):
    status: str | None = None
    error: str | None = None
    summary: dict[str, Any] | None = None
    step: int | None = None
    total_steps: int | None = None
    name: str | None = None
    config: Any = None
    kind: str | None = None


class RunsAnswer(TypedDict):
    """``GET /runs``' answer: the run records, and why the list was cut short where it was."""

    runs: list[RunRecord]
    truncated: NotRequired[str]


def with_url(record: RunRecord, request: Request) -> RunRecord:
    record["url"] = f"{base_url(request)}/runs/{record['id']}"
    return record


@router.post("/runs", status_code=201)
def create_run(body: RunCreate, request: Request, acct: str = Depends(account_id)) -> Response:
    """201 with a new run. With ``id`` (a client that named its run itself): 200 with the run when this
    account already has it, 404 when the id is another account's, as for any id not in the account.
    With ``once`` (and no ``id``): 200 with the account's running run of the same dataset, kind and config
    when there is one (a training submit sent twice; a config ``target`` of null reads as the platform's
    default), else 201 with a new run; its ``created`` says which."""
    fields = body.model_dump()
    run_id = fields.pop("id")
    once = fields.pop("once")
    if once and run_id is not None:
        raise ApiError(422, "once and id were both sent; send id to name the run, or once to answer a running "
                       "run of the same dataset and config, not both", "invalid_request")
    if once:
        if isinstance(fields["config"], dict) and "target" in fields["config"] and fields["config"]["target"] is None:
            from whileai.platform.launcher.jobs import default_target  # None is where the launch will run it

            fields["config"] = {**fields["config"], "target": default_target()}
        record, created = store(request).create_run_once(acct, **fields)
        return json_response({**with_url(record, request), "created": created}, 201 if created else 200)
    if run_id is None:
        return json_response(with_url(store(request).create_run(acct, **fields), request), 201)
    record, created = store(request).ensure_run(acct, run_id, **fields)
    return json_response(with_url(record, request), 201 if created else 200)


@router.get("/runs")
def list_runs(
    request: Request,
    status: str | None = Query(None, description=f"one of {', '.join(RUN_STATUSES)}"),
    dataset: str | None = None,
    name: str | None = None,
    kind: str | None = None,
    limit: int | None = Query(None, description="most runs to answer (PLATFORM_LIST_LIMIT when left out)"),
    acct: str = Depends(account_id),
) -> Response:
    runs = store(request).list_runs(acct, status=status, dataset=dataset, name=name, kind=kind, limit=limit)
    answer: RunsAnswer = {"runs": [with_url(r, request) for r in runs]}
    if getattr(runs, "truncated", False):
        answer["truncated"] = (f"cut at PLATFORM_LIST_MAX_BYTES after {len(runs)} runs; ask for fewer (limit) or "
                               "filter (status, dataset, name, kind), and read each run with GET /runs/{id}")
    return json_response(answer)


@router.get("/runs/{run_id}")
def get_run(
    run_id: str,
    request: Request,
    series: bool = Query(True, description="false answers the record without its points"),
    since: float | None = Query(None, description="the record's updated_at as last read: with wait, a long poll"),
    wait: float = Query(0.0, ge=0, description=f"seconds to hold the answer until the record's updated_at differs "
                                                f"from since (at most {defaults.RUN_WAIT_MAX_S:g})"),
    acct: str = Depends(run_account),
) -> Response:
    """A run's record, with its points unless ``series=false``.

    With ``since`` (the ``updated_at`` of the record the caller holds) and ``wait``, a long poll: the answer comes
    once the record has changed (a point, a status, a summary: each moves ``updated_at``), and after ``wait``
    seconds (at most RUN_WAIT_MAX_S) in any case, as the record then stands.
    """
    waited = None
    if since is not None and wait > 0:
        waited = _wait_for_change(request, acct, run_id, since, min(wait, defaults.RUN_WAIT_MAX_S))
    if not series:
        return json_response(with_url(waited or store(request).get_run(acct, run_id, series=False), request))
    record, series_json = store(request).get_run_with_series_json(acct, run_id)
    head = dumps(with_url(record, request))
    # The series is spliced in as stored text: 100,000 points are never decoded and re-encoded.
    return Response(head[:-1] + ',"series":' + series_json + "}", media_type="application/json")


def _wait_for_change(request: Request, acct: str, run_id: str, since: float, wait: float) -> RunRecord:
    """The run's record (without points) once its updated_at differs from ``since``, or as it stands after ``wait``
    seconds. Runs in the server's worker thread (a plain ``def`` endpoint), reading the store every RUN_WAIT_POLL_S."""
    import time

    deadline = time.monotonic() + wait
    while True:
        record = store(request).get_run(acct, run_id, series=False)
        if record["updated_at"] != since:  # every write to a run (a point, a status, a summary) moves updated_at
            return record
        left = deadline - time.monotonic()
        if left <= 0:
            return record
        time.sleep(min(defaults.RUN_WAIT_POLL_S, left))


@router.get("/runs/{run_id}/adapter")
def get_adapter(run_id: str, request: Request, acct: str = Depends(account_id)) -> Response:
    """The weights a finished run of the caller's account loads from, resolved by the platform's rule
    (``_loadable``), never taken from the run's summary: ``{"run_id", "adapter", "base_model", "method"}``.

    The adapter is the one its job saved (``<data_root>/adapters/<run_id>``), or a folder the run noted that
    lies under a folder the operator added (SERVE_DIRS_ENV). Answers 409 naming why when the run is not done
    or has no such adapter, and when its base is a run's adapter folder.
    """
    from whileai.core.paths import adapter_dir
    from whileai.platform._loadable import _inside, adapter_problem, allowed_roots

    record = store(request).get_run(acct, run_id, series=False)
    found_config = record.get("config")
    config: dict[str, Any] = found_config if isinstance(found_config, dict) else {}
    if record["status"] != "done":
        raise ApiError(409, f"run {run_id} is {record['status']!r}, not 'done': only a finished run has weights to "
                            "load; wait for it, or train again", "not_done")
    folder = adapter_dir(record["id"])
    noted = (record.get("summary") or {}).get("adapter")
    if (folder / "adapter_config.json").is_file():
        adapter = str(folder)
    elif isinstance(noted, str) and noted and adapter_problem(noted, record["id"]) is None:
        adapter = noted
    else:
        raise ApiError(409, f"run {run_id} has no adapter this platform loads: nothing at {folder} (where its job "
                            "saves one), and its summary names no folder under one its operator added "
                            f"({defaults.SERVE_DIRS_ENV}); train it with wai.train, or ask the operator to add the "
                            "folder", "no_adapter")
    base = config.get("base_model")
    if isinstance(base, str) and _inside(base, [allowed_roots()[1]]):
        raise ApiError(409, f"run {run_id}'s base_model={base[:200]!r} is a run's adapter folder, not a base: an "
                            "adapter loads only on top of its own run's base", "invalid_base")
    return json_response({"run_id": record["id"], "adapter": adapter, "base_model": base,
                          "method": config.get("method")})


@router.get("/runs/{run_id}/points")
def get_points(run_id: str, request: Request, acct: str = Depends(run_account)) -> Response:
    _, series_json = store(request).get_run_with_series_json(acct, run_id)
    return Response('{"points":' + series_json + "}", media_type="application/json")


@router.patch("/runs/{run_id}")
def update_run(run_id: str, body: RunPatch, request: Request, acct: str = Depends(run_account)) -> Response:
    record = store(request).update_run(acct, run_id, body.model_dump(exclude_unset=True))
    return json_response(with_url(record, request))


@router.delete("/runs/{run_id}")
def delete_run(run_id: str, request: Request, acct: str = Depends(account_id)) -> Response:
    """Delete a run for good: its job stopped first, then its rows, the models served from it, its adapter and
    its jobs' folders; its id is retired (a create under it answers 409)."""
    from whileai.platform.launcher.jobs import remove_run_files, stop_run

    the_store = store(request)
    if the_store.get_run(acct, run_id, series=False)["status"] not in FINISHED_STATUSES:
        stop_run(the_store, acct, run_id)  # a live worker would write its adapter after the folder is gone
    answer = the_store.delete_run(acct, run_id)
    remove_run_files([answer["id"]], answer["jobs"])
    return json_response(answer)


_POINTS_SHAPE = (
    '{"batch_id": "<unique per batch>", "points": [{"step": 1, "metrics": {"loss": 0.5}, "ts": 1790000000.0}]}'
)


_UNPARSED = object()


def _parse_points_body(raw: bytes, parsed: Any = _UNPARSED) -> tuple[Any, Any]:
    if not raw:
        raise ApiError(400, f"the body is empty; send JSON like {_POINTS_SHAPE}", "malformed_json")
    try:
        body = loads(raw) if parsed is _UNPARSED else parsed
    except (ValueError, UnicodeDecodeError) as exc:
        where = f" at line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        raise ApiError(
            400, f"the body is not valid JSON{where} ({exc}); send JSON like {_POINTS_SHAPE}", "malformed_json"
        ) from exc
    if not isinstance(body, dict):
        raise ApiError(422, f"the body is a JSON {type(body).__name__}; send an object like {_POINTS_SHAPE}", "invalid_request")
    unknown = sorted(set(body) - {"batch_id", "points"})
    if unknown:
        raise ApiError(422, f"unknown fields {unknown}; a points batch has batch_id and points", "invalid_request")
    if "batch_id" not in body or "points" not in body:
        missing = [k for k in ("batch_id", "points") if k not in body]
        raise ApiError(
            422,
            f"missing {', '.join(missing)}: batch_id is an id the client picks per batch (a resent batch is "
            f"stored once) and points the list of points; e.g. {_POINTS_SHAPE}",
            "invalid_request",
        )
    return body["batch_id"], body["points"]


@router.post("/runs/{run_id}/points")
async def add_points(run_id: str, request: Request, acct: str = Depends(run_account)) -> Response:
    """Store a batch of points once per ``batch_id``; parsed here rather than by pydantic, for speed."""
    raw = await request.body()
    parsed = getattr(request.state, "json_body", _UNPARSED)  # parsed and checked by the request guard

    def work() -> PointsAccepted:
        with gc_paused():  # decoding 100,000 points makes a million objects, none of them cyclic
            batch_id, points = _parse_points_body(raw, parsed)
            return store(request).add_points(acct, run_id, batch_id, points)

    return json_response(await run_in_threadpool(work))
