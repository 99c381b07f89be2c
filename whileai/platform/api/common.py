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
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict

from whileai.core.errors import ApiError  # re-exported: its old home
from whileai.platform import defaults
from whileai.core import defaults as core_defaults
from whileai.platform.store.values import dumps
from whileai.platform.store import Store
from whileai.platform.store.records import JobKeyScope

__all__ = [
    "ParsedBodyRoute",
    "wrong_key",
    "ApiError",
    "Body",
    "account_id",
    "run_account",
    "job_account",
    "dataset_account",
    "job_scope",
    "api_key_from",
    "base_url",
    "json_response",
    "store",
]

class ParsedBodyRoute(APIRoute):
    """A route whose JSON body is read from what the request guard already parsed and checked
    (``request.state.json_body``, _guard.py) instead of parsing it a second time: on a 1,600-row dataset push the
    second parse was about a third of a second. A body the guard could not parse is read by FastAPI as before."""

    def get_route_handler(self) -> Any:
        handler = super().get_route_handler()

        async def app(request: Request) -> Response:
            parsed = request.scope.get("state", {}).get("json_body", _UNPARSED)
            if parsed is not _UNPARSED:
                request._json = parsed  # Starlette's own cache of Request.json()
            return await handler(request)

        return app


_UNPARSED = object()


class Body(BaseModel):
    """Request bodies: unknown fields and wrong types are refused rather than guessed at."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)


def store(request: Request) -> Store:
    return request.app.state.store


def base_url(request: Request) -> str:
    """The address written into run urls and model endpoints: the app's public URL when given, else the
    server's own address on this connection (the socket it accepted on), never the ``Host`` header a caller sends."""
    configured = getattr(request.app.state, "public_url", None)
    if configured:
        return configured
    scheme = request.scope.get("scheme", "http")
    server = request.scope.get("server")
    if not server:
        return f"{scheme}://{core_defaults.PLATFORM_HOST}:{core_defaults.PLATFORM_PORT}"
    host, port = server[0], server[1]
    host = f"[{host}]" if ":" in host else host
    default_port = {"http": 80, "https": 443}.get(scheme)
    return f"{scheme}://{host}" if port in (None, default_port) else f"{scheme}://{host}:{port}"


def api_key_from(request: Request) -> str | None:
    """The key of ``Authorization: Bearer <key>``, or None (pages also take a session cookie: pages/auth.py)."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


_NO_KEY = (
    "no API key: send the header 'Authorization: Bearer <key>'. The local account's key is in the data "
    "root's local_key file (printed once when `python -m whileai platform` first started); on a team server "
    "ask its operator for one (`python -m whileai accounts add NAME`)"
)
_BAD_KEY = (
    "the API key sent is not valid on this platform (revoked, rotated, or from another platform); check "
    "WHILEAI_API_KEY or the data root's config.json, or use the key in the data root's local_key file"
)


def _key_or_401(request: Request) -> str:
    key = api_key_from(request)
    if key is None:
        raise ApiError(401, _NO_KEY, "unauthorized")
    return key


def wrong_key(request: Request, key: str) -> ApiError:
    """The answer to a wrong bearer key: 401, or 429 while its address or key prefix is in backoff
    (API_KEY_MAX_FAILURES; platform/_throttle.py). Only failures are counted: a valid key is never refused.

    Every bearer key check of the app counts here, the pages' and page data's as the API's: one limit per address
    and key prefix, whichever route is asked."""
    from whileai.platform._throttle import FailureThrottle, failure_names

    if store(request).deleted_account_key(key):  # not a guess: said plainly, and not counted
        return ApiError(401, "the account this API key belonged to was deleted from this platform; nothing sent "
                             "with it can be stored (the SDK drops what it spooled for it). Use a key of an account "
                             "that exists (`python -m whileai accounts add NAME` on the platform makes one)",
                        "account_deleted")
    state = request.app.state
    if getattr(state, "key_throttle", None) is None:
        state.key_throttle = FailureThrottle(defaults.API_KEY_MAX_FAILURES)
    names = failure_names(request.client.host if request.client else "unknown", key)
    wait = state.key_throttle.wait(*names)
    if wait > 0:
        seconds = int(wait) + 1
        return ApiError(429, f"too many wrong API keys from this address or for this key prefix "
                             f"({defaults.API_KEY_MAX_FAILURES} within {int(defaults.SIGNIN_FAILURE_WINDOW_S)} s, "
                             f"API_KEY_MAX_FAILURES); retry in {seconds} s with a valid key. {_BAD_KEY}",
                        "too_many_failures", {"Retry-After": str(seconds)})
    state.key_throttle.failed(*names)
    return ApiError(401, _BAD_KEY, "unauthorized")


def account_id(request: Request) -> str:
    """The caller's account id, from ``Authorization: Bearer <key>``; 401 without a valid account key.

    A job's own key is not an account key: it reaches only the routes of its
    job, its run and its datasets (:func:`run_account`, :func:`job_account`,
    :func:`dataset_account`), and is refused here.
    """
    key = _key_or_401(request)
    found = store(request).account_for_key(key)
    if found is not None:
        return found
    if store(request).job_key_scope(key) is not None:
        raise ApiError(
            403,
            "this is a job's key: it reaches only its own job, that job's run and the datasets it trains on; "
            "use an account key for anything else",
            "forbidden",
        )
    raise wrong_key(request, key)


def _scoped(request: Request, what: str, ident: str) -> str:
    """The account for an account key, or for a job key whose job, run or datasets include ``ident``.

    A job key asking for anything else answers 404, as for a missing id. A run its
    spec names to read (``scope["reads"]``: the gold judge) it may read, never write.
    """
    key = _key_or_401(request)
    the_store = store(request)
    found = the_store.account_for_key(key)
    if found is not None:
        return found
    scope = the_store.job_key_scope(key)
    if scope is None:
        raise wrong_key(request, key)
    reads = tuple(scope.get("reads") or ()) if request.method in ("GET", "HEAD") else ()
    allowed = {"run": (scope["run_id"], *reads), "job": (scope["job_id"],), "dataset": scope["datasets"]}[what]
    if ident not in allowed:
        raise ApiError(404, f"{what} {ident!r} not found in this account; check the id (list them to see yours)",
                       "not_found")
    request.state.job_scope = scope
    return scope["account_id"]


def run_account(run_id: str, request: Request) -> str:
    """The auth dependency of a run's own routes: an account key, or the key of a job of that run."""
    return _scoped(request, "run", run_id)


def job_account(job_id: str, request: Request) -> str:
    """The auth dependency of a job's own routes: an account key, or that job's key."""
    return _scoped(request, "job", job_id)


def dataset_account(dataset_id: str, request: Request) -> str:
    """The auth dependency of reading a dataset: an account key, or the key of a job that trains on it."""
    return _scoped(request, "dataset", dataset_id)


def job_scope(request: Request) -> JobKeyScope | None:
    """What the caller's job key reaches when it sent one (after a scoped dependency ran); None for account keys."""
    return getattr(request.state, "job_scope", None)


def json_response(value: Any, status: int = 200) -> Response:
    return Response(dumps(value), status_code=status, media_type="application/json")
