"""The request guard: a pure ASGI middleware every request passes before any route reads it.

In order, for each HTTP request:

1. A NUL in the path or query is refused (400): no store can look it up. A number
   in the query past PLATFORM_QUERY_NUMBER_MAX in magnitude (1e999 included) is
   refused (422 naming the parameter): no page, step or count is that large.
2. A body whose Content-Length is over PLATFORM_MAX_BODY_BYTES is refused (413)
   without reading it.
3. A body over PLATFORM_UNAUTH_BODY_BYTES (or of unknown length) is read only
   for a caller whose key (``Authorization: Bearer``) or page session is valid:
   otherwise 401 before a byte of it is read. Sign-in forms are far smaller.
4. A JSON body is parsed once and checked (_json_rules.py): NUL, lone
   surrogates, integers past 64 bits and nesting past PLATFORM_MAX_JSON_DEPTH are
   refused with 4xx naming the field (a launch's refusal is passed to its route, which fails the run it
   names with it). The parsed value is left in
   ``request.state.json_body``, which the routes read instead of parsing again
   (the points route itself, the rest through ``common.ParsedBodyRoute``).
5. Whatever a route raises that no handler turned into an answer becomes one
   500 with an error id (the details go to the server log only), and the
   connection stays open for the client's next request.

Refusals made before the body is read close the connection (``Connection:
close``): the client may still be sending, and what it sends is not read.
"""

from __future__ import annotations

import json
import logging
import math
import re
import secrets
from urllib.parse import parse_qsl
from typing import Any, TypedDict

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from whileai.platform import defaults
from whileai.platform.api._json_rules import BodyRefused, parse_strict

__all__ = ["RequestGuard"]

_log = logging.getLogger("whileai.platform")

#: bodies parsed off the event loop (in a worker thread) past this size: a large batch's parse would stall every
#: other request (benchmarks/MEASURED.md#json-parse)
_THREAD_PARSE_BYTES = 1024 * 1024


def _answer_bytes(status: int, message: str, type_: str, close: bool = False,
                  extra: list[tuple[bytes, bytes]] | None = None) -> tuple[dict[str, Any], bytes]:
    body = json.dumps({"error": {"message": message, "type": type_}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    headers += extra or []
    return {"type": "http.response.start", "status": status, "headers": headers}, body


async def _answer(send: Send, status: int, message: str, type_: str, close: bool = False,
                  extra: list[tuple[bytes, bytes]] | None = None) -> None:
    start, body = _answer_bytes(status, message, type_, close, extra)
    await send(start)
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers") or ():
        if key == name:
            return value
    return None


def _cookie(scope: Scope, name: str) -> str | None:
    raw = _header(scope, b"cookie")
    if not raw:
        return None
    for part in raw.decode("latin-1").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


def _has_valid_credential(app_state: Any, scope: Scope) -> bool:
    """Whether the request carries a key (account or job) or a page session the store knows. Blocking."""
    from whileai.platform.store import sessions

    store = getattr(app_state, "store", None)
    if store is None:
        return True
    header = (_header(scope, b"authorization") or b"").decode("latin-1")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() == "bearer" and token:
        return store.account_for_key(token) is not None or store.job_key_scope(token) is not None
    from whileai.platform.defaults import SESSION_COOKIE

    return sessions.account_for_session(store, _cookie(scope, SESSION_COOKIE)) is not None


#: a number written in digits (a word such as "nan" may be a name, and is left to its route)
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def _number_out_of_range(query: bytes) -> str | None:
    """Why a number in the query string is refused (past PLATFORM_QUERY_NUMBER_MAX, or not finite), or None."""
    bound = defaults.PLATFORM_QUERY_NUMBER_MAX
    for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        value = value.strip()
        if len(value) > 400 or not _NUMBER.fullmatch(value):
            continue
        number = float(value)
        if not math.isfinite(number) or abs(number) > bound:
            return (f"{name}={value[:40]!r} is out of range: a number in the query must be finite and within "
                    f"[-{bound}, {bound}] (PLATFORM_QUERY_NUMBER_MAX); send a smaller value")
    return None


def _is_json(scope: Scope) -> bool:
    kind = (_header(scope, b"content-type") or b"").split(b";")[0].strip().lower()
    return kind == b"application/json" or (kind.startswith(b"application/") and kind.endswith(b"+json"))


def _is_points(scope: Scope) -> bool:
    path = scope.get("path", "")
    return scope.get("method") == "POST" and path.startswith("/api/v1/runs/") and path.endswith("/points")


class RequestGuard:
    """See the module docstring; ``app_state`` is the FastAPI app's ``state`` (its store)."""

    def __init__(self, app: ASGIApp, app_state: Any):
        self.app = app
        self.app_state = app_state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = [False]

        async def tracked_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                started[0] = True
            await send(message)

        try:
            await self._guarded(scope, receive, tracked_send)
        except Exception as exc:  # noqa: BLE001 - the last line: no request takes the connection down
            error_id = secrets.token_hex(6)
            quiet = getattr(self.app_state, "quiet_errors", False)  # embedded: the training script's stderr
            _log.error("error %s on %s %s%s", error_id, scope.get("method"), scope.get("path"),
                       f": {type(exc).__name__}: {exc}" if quiet else "", exc_info=None if quiet else exc)
            if started[0]:
                return  # the answer is already under way; the log has it
            await _answer(
                send, 500,
                f"the platform failed on this request (error id {error_id}); nothing was changed by it. Retry, and "
                "if it fails again give the platform's operator that error id (the server log has the details "
                "under it)",
                "internal_error", extra=[(b"x-error-id", error_id.encode())],
            )

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Steps 1 to 4 of the module docstring for one HTTP request: a refusal is answered here, anything else
        goes on to the app (a body read whole, checked, and replayed to it)."""
        if not await _address_allowed(scope, send):
            return
        method = scope.get("method", "GET")
        limit = defaults.PLATFORM_MAX_BODY_BYTES
        raw_length = _header(scope, b"content-length")
        length = int(raw_length) if raw_length is not None and raw_length.isdigit() else None
        chunked = b"chunked" in (_header(scope, b"transfer-encoding") or b"").lower()
        if length is None and not chunked or method in ("GET", "HEAD", "OPTIONS") and not length:
            await self.app(scope, receive, send)
            return
        if length is not None and length > limit:
            await _answer(send, 413, f"the body is {length} bytes, over the limit of {limit} bytes "
                          "(PLATFORM_MAX_BODY_BYTES); send it as several smaller requests (e.g. points in batches)",
                          "too_large", close=True)
            return
        if not await self._body_allowed(scope, send, length):
            return
        body = await _read_body(receive, send, limit)
        if body is None:
            return
        raw, messages = body
        if raw and _is_json(scope) and not await _checked_json(scope, raw, send):
            return
        await self.app(scope, _replayed(raw, messages, receive), send)

    async def _body_allowed(self, scope: Scope, send: Send, length: int | None) -> bool:
        """Whether the body may be read: one over PLATFORM_UNAUTH_BODY_BYTES (or of unknown length) only with a valid
        key or page session; False once the 401 is answered."""
        small = defaults.PLATFORM_UNAUTH_BODY_BYTES
        if length is None or length > small:
            ok = await anyio.to_thread.run_sync(_has_valid_credential, self.app_state, scope)
            if not ok:
                await _answer(
                    send, 401,
                    f"a body over {small} bytes (PLATFORM_UNAUTH_BODY_BYTES) is read only with a valid key: send "
                    "'Authorization: Bearer <key>' (the data root's local_key file holds the local account's key); "
                    "the body was not read",
                    "unauthorized", close=True)
                return False
        return True


async def _address_allowed(scope: Scope, send: Send) -> bool:
    """Whether the path and query may be looked up: no NUL in them, no number in the query out of range; False once
    the refusal (400 or 422) is answered."""
    path_bytes = scope.get("raw_path") or scope.get("path", "").encode("utf-8", "surrogateescape")
    query = scope.get("query_string") or b""
    if b"\x00" in path_bytes or b"%00" in query or b"\x00" in query or "\x00" in scope.get("path", ""):
        await _answer(send, 400, "the address holds a NUL character (%00); no name or id holds one: "
                      "check the path and query", "invalid_request")
        return False
    too_big = _number_out_of_range(query)
    if too_big is not None:
        await _answer(send, 422, too_big, "invalid_value")
        return False
    return True


async def _read_body(receive: Receive, send: Send, limit: int) -> tuple[bytes, list[Message]] | None:
    """The request's whole body and any message that came after it, ``(raw, messages)``; None when the client left
    before the body was whole, or once a body past ``limit`` bytes is answered 413."""
    messages: list[Message] = []
    chunks: list[bytes] = []
    total = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None  # the client went (or its request ran past its deadline) before its body was whole: nothing to act on
        if message["type"] != "http.request":
            messages.append(message)
            break
        chunk = message.get("body", b"")
        total += len(chunk)
        if total > limit:
            await _answer(send, 413, f"the body is more than {limit} bytes (PLATFORM_MAX_BODY_BYTES); send it "
                          "as several smaller requests (e.g. points in batches)", "too_large", close=True)
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks), messages


def _replayed(raw: bytes, messages: list[Message], receive: Receive) -> Receive:
    """A ``receive`` for the app that hands back the body already read (then what followed it), and after those
    whatever the client sends next."""
    replay = [{"type": "http.request", "body": raw, "more_body": False}, *messages]

    async def replay_receive() -> Message:
        if replay:
            return replay.pop(0)
        return await receive()

    return replay_receive


async def _checked_json(scope: Scope, raw: bytes, send: Send) -> bool:
    """Parse and check a JSON body into the request's state (``json_body``); False once its refusal is answered."""
    points = _is_points(scope)
    try:
        if len(raw) > _THREAD_PARSE_BYTES:
            value = await anyio.to_thread.run_sync(_parse, raw, points)
        else:
            value = _parse(raw, points)
    except BodyRefused as refused:
        launch = _launch_refused(scope, raw, refused)
        if launch is None:
            await _answer(send, refused.status, str(refused), refused.type)
            return False
        scope.setdefault("state", {}).update(json_body=launch, body_refused=refused)
    except ValueError:
        pass  # not JSON at all: the route says so in its own words
    else:
        scope.setdefault("state", {})["json_body"] = value  # read by the routes, not parsed again
    return True


class _RefusedLaunch(TypedDict):
    """What a refused launch's body is cut to (``_launch_refused``): the run it names, for the route to fail."""

    run_id: str


def _launch_refused(scope: Scope, raw: bytes, refused: BodyRefused) -> _RefusedLaunch | None:
    """The body a refused launch passes on, so the launch route refuses it and fails its run with the reason
    (``request.state.body_refused``): its run id alone; None for any other route, or a body naming no run."""
    if scope.get("method") != "POST" or scope.get("path") != "/api/v1/jobs/launch":
        return None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    run_id = value.get("run_id") if isinstance(value, dict) else None
    return {"run_id": run_id} if isinstance(run_id, str) and re.fullmatch(r"run_[0-9a-f]{1,64}", run_id) else None


def _parse(raw: bytes, points: bool) -> Any:
    from whileai.core.collector import gc_paused  # decoding 100,000 points makes a million objects, none cyclic

    with gc_paused():
        return parse_strict(raw, trust_fast=points)
