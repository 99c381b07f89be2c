"""/api/v1/datasets: push rows (deduplicated by content), read them back as pushed, split siblings."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from whileai.platform.api.common import ParsedBodyRoute, Body, account_id, dataset_account, json_response, store

__all__ = ["router"]

router = APIRouter(route_class=ParsedBodyRoute)


class DatasetCreate(Body):
    rows: list[Any]
    name: str | None = None
    split: str | None = None
    sibling: str | None = None


class DatasetPatch(Body):
    split: str | None = None
    sibling: str | None = None
    name: str | None = None


@router.post("/datasets", status_code=201)
def create_dataset(body: DatasetCreate, request: Request, acct: str = Depends(account_id)) -> Response:
    """201 with a new dataset; 200 with the existing one when this account pushed the same rows before."""
    record, created = store(request).create_dataset(
        acct, body.rows, name=body.name, split=body.split, sibling=body.sibling
    )
    return json_response(record, 201 if created else 200)


@router.get("/datasets")
def list_datasets(
    request: Request,
    limit: int | None = Query(None, description="most datasets to answer (PLATFORM_LIST_LIMIT when left out)"),
    acct: str = Depends(account_id),
) -> Response:
    return json_response({"datasets": store(request).list_datasets(acct, limit=limit)})


@router.get("/datasets/{dataset_id}")
def get_dataset(dataset_id: str, request: Request, acct: str = Depends(dataset_account)) -> Response:
    return json_response(store(request).get_dataset(acct, dataset_id))


@router.get("/datasets/{dataset_id}/rows")
def get_rows(dataset_id: str, request: Request, acct: str = Depends(dataset_account)) -> Response:
    rows_json = store(request).dataset_rows_json(acct, dataset_id)
    return Response('{"rows":' + rows_json + "}", media_type="application/json")


@router.patch("/datasets/{dataset_id}")
def update_dataset(dataset_id: str, body: DatasetPatch, request: Request, acct: str = Depends(account_id)) -> Response:
    return json_response(store(request).update_dataset(acct, dataset_id, body.model_dump(exclude_unset=True)))


@router.delete("/datasets/{dataset_id}")
def delete_dataset(dataset_id: str, request: Request, acct: str = Depends(account_id)) -> Response:
    return json_response(store(request).delete_dataset(acct, dataset_id))
