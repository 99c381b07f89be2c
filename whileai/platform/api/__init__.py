"""The platform's HTTP API: a FastAPI app under /api/v1, thin routes over the Store.

Every route takes a bearer API key and scopes what it reads and writes to the
key's account; another account's ids answer 404 exactly like missing ones.
Every error is ``{"error": {"message": ..., "type": ...}}`` and its message says
what to fix. The same app serves the run pages (``/runs/{id}``) and the
OpenAI-compatible endpoint (``/v1/...``). The route table is in
docs/architecture.md.

    from whileai.platform.api import create_app
    app = create_app()            # the store at store_url()
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from whileai.platform.api import _datasets, _jobs, _registry, runs
from whileai.platform.pages import routes as pages
from whileai.platform.api._guard import RequestGuard
from whileai.domain.client import API_PREFIX
from whileai.platform.api.common import ApiError, json_response
from whileai.platform.store import InvalidError, NotFoundError, RetiredIdError, Store, StoreBusyError, StoreVersionError
from whileai.platform import defaults

__all__ = ["create_app"]

_log = logging.getLogger("whileai.platform")


def create_app(store: Store | None = None, *, public_url: str | None = None, api_docs: bool | None = None) -> FastAPI:
    """The platform app over ``store`` (a :class:`Store` at ``store_url()`` when None).

    ``public_url`` fixes the address written into run urls and model endpoints;
    by default it is the server's own bound address of each connection (never
    the request's ``Host`` header, which the caller chooses). ``api_docs`` serves
    /docs, /redoc and /openapi.json; off unless given or PLATFORM_API_DOCS_ENV=1.
    """
    from whileai.platform import serving
    from whileai.platform.launcher import routes as job_routes

    if api_docs is None:
        api_docs = os.environ.get(defaults.PLATFORM_API_DOCS_ENV, "").strip() == "1"
    app = FastAPI(
        title="whileai platform",
        description="Runs, points, datasets, jobs and the model registry (docs/architecture.md).",
        version="1",
        docs_url="/docs" if api_docs else None,
        redoc_url="/redoc" if api_docs else None,
        openapi_url="/openapi.json" if api_docs else None,
        # Starlette's slash redirect writes the request's Host header into its Location; a path with a
        # stray trailing slash answers 404 naming the route instead.
        redirect_slashes=False,
    )
    app.state.store = store if store is not None else Store()
    app.state.public_url = public_url.rstrip("/") if public_url else None
    for module in (_registry, runs, _datasets, _jobs):
        app.include_router(module.router, prefix=API_PREFIX)
    app.include_router(pages.router)  # the run pages, their data, sign-in and static files
    app.include_router(serving.router)
    job_routes.install(app)  # /api/v1/jobs/launch, /jobs/{id}/end and settling jobs when a run is read
    _install_error_handlers(app)
    # sizes, keys before bodies, the JSON rules, and no exception escaping a request (_guard.py)
    app.add_middleware(RequestGuard, app_state=app.state)
    return app


# --------------------------------------------------------------------------- errors


def _error(status: int, message: str, type_: str, headers: Mapping[str, str] | None = None) -> Response:
    response = json_response({"error": {"message": message, "type": type_}}, status)
    if headers:
        response.headers.update(headers)
    return response


_HTTP_TYPES = {401: "unauthorized", 404: "not_found", 405: "method_not_allowed", 413: "too_large"}


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError) -> Response:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else {}
        return _error(exc.status, exc.message, exc.type, {**headers, **(exc.headers or {})})

    @app.exception_handler(NotFoundError)
    async def _not_found(_request: Request, exc: NotFoundError) -> Response:
        return _error(404, str(exc), "not_found")

    @app.exception_handler(RetiredIdError)
    async def _retired(_request: Request, exc: RetiredIdError) -> Response:
        return _error(409, str(exc), "id_retired")

    @app.exception_handler(InvalidError)
    async def _invalid(_request: Request, exc: InvalidError) -> Response:
        return _error(422, str(exc), "invalid_value")

    @app.exception_handler(StoreVersionError)
    async def _other_revision(_request: Request, exc: StoreVersionError) -> Response:
        return _error(503, str(exc), "store_version")

    @app.exception_handler(StoreBusyError)
    async def _busy(_request: Request, exc: StoreBusyError) -> Response:
        return _error(503, str(exc), "store_busy", {"Retry-After": "1"})

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> Response:
        return _validation_error(request, exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        message = str(exc.detail)
        if exc.status_code == 404 and message == "Not Found":
            message = (f"no route {request.method} {request.url.path}; the API lives under {API_PREFIX} "
                       "(its routes: docs/architecture.md)")
        elif exc.status_code == 405:
            message = f"{request.method} is not accepted on {request.url.path}; docs/architecture.md lists the methods it takes"
        return _error(exc.status_code, message, _HTTP_TYPES.get(exc.status_code, "http_error"), exc.headers)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> Response:
        # The caller gets a stable message and an id; what failed, and why, goes only to the server log.
        error_id = secrets.token_hex(6)
        _log.error("error %s on %s %s", error_id, request.method, request.url.path, exc_info=exc)
        response = _error(
            500,
            f"the platform failed on this request (error id {error_id}); nothing was changed by it. "
            "Retry, and if it fails again give the platform's operator that error id (the server log has "
            "the details under it)",
            "internal_error",
        )
        response.headers["X-Error-Id"] = error_id
        return response


def _validation_error(request: Request, exc: RequestValidationError) -> Response:
    """What a request FastAPI could not validate gets: 400 for a body that is not JSON, 415 for a body sent
    as something else, 422 naming each bad field."""
    errors = list(exc.errors())
    bad_json = [e for e in errors if e.get("type") == "json_invalid"]
    if bad_json:
        ctx = bad_json[0].get("ctx") or {}
        where = bad_json[0].get("loc", ("body", "?"))[-1]
        return _error(
            400,
            f"the body is not valid JSON ({ctx.get('error', 'parse error')} at character {where}); "
            "send a JSON object with Content-Type: application/json",
            "malformed_json",
        )
    raw = next((e.get("input") for e in errors if isinstance(e.get("input"), (bytes, bytearray))), None)
    if raw is not None:  # the body was not sent as JSON, so FastAPI did not parse it
        try:
            json.loads(raw)
        except ValueError as parse_error:
            return _error(
                400,
                f"the body is not valid JSON ({parse_error}); send a JSON object with "
                "Content-Type: application/json",
                "malformed_json",
            )
        return _error(
            415,
            f"the body was sent as {request.headers.get('content-type') or 'no content type'}; "
            "send it with Content-Type: application/json",
            "unsupported_media_type",
        )
    return _error(422, "; ".join(_explain(e, request) for e in errors), "invalid_request")


_TYPE_WORDS = {
    "string_type": "a string",
    "int_type": "a whole number",
    "float_type": "a number",
    "bool_type": "true or false",
    "dict_type": "a JSON object",
    "list_type": "a JSON array",
    "model_type": "a JSON object",
    "model_attributes_type": "a JSON object",
    "int_parsing": "a whole number",
    "float_parsing": "a number",
    "bool_parsing": "true or false",
}


def _explain(error: dict[str, Any], request: Request) -> str:
    """One pydantic error as 'field: what was given, what is accepted'."""
    loc = [str(part) for part in error.get("loc", ())]
    where, path = (loc[0], loc[1:]) if loc else ("body", [])
    field = ".".join(path) or ("the body" if where == "body" else where)
    kind = error.get("type", "")
    given = error.get("input")
    shown = repr(given) if not isinstance(given, (dict, list)) else f"a JSON {'object' if isinstance(given, dict) else 'array'}"
    if len(shown) > 80:
        shown = shown[:77] + "..."
    if kind == "missing":
        return f"{field} is required ({where})"
    if kind == "extra_forbidden":
        return (f"{field} is not a field this route accepts; docs/architecture.md lists the fields of "
                f"{request.method} {request.url.path}")
    if kind in _TYPE_WORDS:
        return f"{field} is {shown}; send {_TYPE_WORDS[kind]}"
    if kind == "finite_number":
        return f"{field} is {shown}; send a finite number"
    return f"{field} is {shown}: {error.get('msg', 'not accepted')}"
