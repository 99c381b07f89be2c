"""What every route shares: the caller's account, the store, JSON answers and errors.

Routes are thin: they read the request, call one :class:`~whileai.platform.store.Store`
method with the caller's account id, and answer JSON. Other routers on the same
app (serving, pages) use :func:`account_id` as their auth dependency and
:func:`store` to reach the store.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict

from whileai.platform._store_values import dumps
from whileai.platform.store import Store

__all__ = [
    "API_PREFIX",
    "ApiError",
    "Body",
    "account_id",
    "api_key_from",
    "base_url",
    "json_response",
    "store",
]

#: where the HTTP API's routes live (docs/architecture.md, "HTTP API")
API_PREFIX = "/api/v1"


class ApiError(Exception):
    """An HTTP error answered as ``{"error": {"message", "type"}}``."""

    def __init__(self, status: int, message: str, type_: str):
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_


class Body(BaseModel):
    """Request bodies: unknown fields and wrong types are refused rather than guessed at."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)


def store(request: Request) -> Store:
    return request.app.state.store


def base_url(request: Request) -> str:
    """The server's own address as the caller reached it, unless the app was given a public URL."""
    configured = getattr(request.app.state, "public_url", None)
    return configured or str(request.base_url).rstrip("/")


def api_key_from(request: Request) -> str | None:
    """The key of ``Authorization: Bearer <key>``, or None (pages also take a session cookie: pages/_auth.py)."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


def account_id(request: Request) -> str:
    """The caller's account id, from ``Authorization: Bearer <key>``; 401 without a valid key."""
    key = api_key_from(request)
    if key is None:
        raise ApiError(
            401,
            "no API key: send the header 'Authorization: Bearer <key>'. The local account's key is in "
            "the data root's local_key file (printed once when `python -m whileai platform` first started)",
            "unauthorized",
        )
    found = store(request).account_for_key(key)
    if found is None:
        raise ApiError(
            401,
            f"the API key {key[:12]}... is not valid on this platform; check WHILEAI_API_KEY or the "
            "data root's config.json, or use the key in the data root's local_key file",
            "unauthorized",
        )
    return found


def json_response(value: Any, status: int = 200) -> Response:
    return Response(dumps(value), status_code=status, media_type="application/json")
