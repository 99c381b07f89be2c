"""/api/v1/models: the serving registry (a name per account, bumped a version on each re-serve), and /me."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import Field

from whileai.platform._loadable import adapter_problem, base_problem
from whileai.platform.api.common import ParsedBodyRoute, ApiError, Body, account_id, base_url, json_response, store
from whileai.platform.store.records import ModelRecord

__all__ = ["router"]

router = APIRouter(route_class=ParsedBodyRoute)


class ModelCreate(Body):
    name: str
    base_model: str | None = Field(None, alias="baseModel")
    adapter: str | None = None
    adapter_run_id: str | None = Field(None, alias="adapterRunId")


def _with_endpoint(record: ModelRecord, request: Request) -> ModelRecord:
    record["endpoint"] = f"{base_url(request)}/v1"
    return record


@router.get("/me")
def me(request: Request, acct: str = Depends(account_id)) -> Response:
    account = store(request).get_account(acct)
    return json_response({"account_id": account["account_id"], "name": account["name"]})


@router.post("/models", status_code=201)
def put_model(body: ModelCreate, request: Request, acct: str = Depends(account_id)) -> Response:
    """Register a name, or bump its version when the account already serves that name.

    The adapter is the one of a run of this account and the base one the
    platform loads (``_loadable``): an account names models, never server paths.
    """
    run_base = None
    if body.adapter_run_id is not None:
        run = store(request).get_run(acct, body.adapter_run_id, series=False)  # another account's: 404
        given = run.get("config")
        config = given if isinstance(given, dict) else {}
        run_base = config.get("base_model")
    problems = [p for p in (
        base_problem(body.base_model, run_base, bool(getattr(request.app.state, "embedded", False)))
        if body.base_model is not None else None,
        adapter_problem(body.adapter, body.adapter_run_id),
    ) if p]
    if problems:
        raise ApiError(422, "; ".join(problems), "invalid_value")
    record = store(request).put_model(
        acct, body.name, base_model=body.base_model, adapter=body.adapter, adapter_run_id=body.adapter_run_id
    )
    return json_response(_with_endpoint(record, request), 201 if record["version"] == 1 else 200)


@router.get("/models")
def list_models(request: Request, acct: str = Depends(account_id)) -> Response:
    return json_response({"models": [_with_endpoint(m, request) for m in store(request).list_models(acct)]})


@router.get("/models/{name:path}")
def get_model(name: str, request: Request, acct: str = Depends(account_id)) -> Response:
    return json_response(_with_endpoint(store(request).get_model(acct, name), request))


@router.delete("/models/{name:path}")
def delete_model(name: str, request: Request, acct: str = Depends(account_id)) -> Response:
    return json_response(store(request).delete_model(acct, name))
