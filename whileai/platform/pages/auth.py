"""Who is reading a page: a page session (cookie) or, for scripts, ``Authorization: Bearer <key>``.

Signing in posts the API key once to ``POST /signin``; the answer sets a cookie
holding a random session token (SESSION_COOKIE; stored hashed, expiring after
SESSION_TTL_S) and the key is never kept by the browser nor put in a URL. A
one-time link (``GET /signin/once?token=...``, printed by the platform at each
start and opened by ``python -m whileai open``) signs in the same way without
the key. ``POST /signout`` ends the session. A client address that fails to
sign in SIGNIN_MAX_FAILURES times within SIGNIN_FAILURE_WINDOW_S has its further
wrong keys and links answered 429 with a growing backoff (``platform/_throttle.py``); a
correct key or a valid link is always accepted.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from whileai.platform.store import sessions
from whileai.platform._throttle import SigninThrottle, failure_names
from whileai.platform.api.common import api_key_from, store, wrong_key
from whileai.platform import defaults

__all__ = ["router", "page_account", "safe_next", "PAGE_HEADERS"]

router = APIRouter(include_in_schema=False)

#: Every page and page-data answer: scripts only from this server, no inline script, no eval.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # nothing of a page's address leaves this server
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}

_TEMPLATES = Path(__file__).with_name("templates")


def page_account(request: Request, *, count: bool = True) -> str | None:
    """The reader's account: the bearer key when sent, else the session cookie; None when neither is valid.

    A wrong bearer key counts toward the API's limit of wrong keys (``api.common.wrong_key``), and past it the
    page answers 429 with Retry-After (raised as :class:`ApiError`); ``count=False`` only looks (for a reader
    of the request that is not its route, so that one request counts once). A job's key is not a page reader's
    and is not a wrong key either.
    """
    key = api_key_from(request)
    if key is not None:
        the_store = store(request)
        found = the_store.account_for_key(key)
        if found is None and count and the_store.job_key_scope(key) is None:
            refused = wrong_key(request, key)
            if refused.status == 429:
                raise refused
        return found
    return sessions.account_for_session(store(request), request.cookies.get(defaults.SESSION_COOKIE))


def safe_next(target: str | None) -> str:
    """A path on this server to go on to after signing in (anything else becomes ``/runs``)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/runs"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or any(ord(c) < 32 for c in target):
        return "/runs"
    return target


def _same_origin(request: Request) -> bool:
    """A form post from this server's own pages (Origin/Sec-Fetch-Site when the browser sends them)."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = request.headers.get("origin")
    return origin is None or origin == f"{request.url.scheme}://{request.url.netloc}"


def signin_page(next_path: str, message: str = "", status: int = 200) -> HTMLResponse:
    html = (_TEMPLATES / "signin.html").read_text()
    html = html.replace("{{next}}", escape(safe_next(next_path), quote=True)).replace("{{message}}", escape(message))
    html = html.replace("{{hidden}}", "" if message else " hidden")
    return HTMLResponse(html, status_code=status, headers=PAGE_HEADERS)


def _throttle(request: Request) -> SigninThrottle:
    state = request.app.state
    if getattr(state, "signin_throttle", None) is None:
        state.signin_throttle = SigninThrottle()
    return state.signin_throttle


def _client(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def key_names(request: Request, key: str | None = None) -> tuple[str, ...]:
    """What a failure counts against: the client's address, and the key prefix it tried (one account's key)."""
    return failure_names(_client(request), key)


def _too_many(request: Request, next_path: str, key: str | None = None) -> Response | None:
    """The 429 answer for a failed try while its address or key prefix is in backoff (SIGNIN_MAX_FAILURES), else None."""
    wait = _throttle(request).wait(*key_names(request, key))
    if wait <= 0:
        return None
    seconds = int(wait) + 1
    response = signin_page(next_path, f"Too many failed sign-ins from this address or for this key "
                                      f"({defaults.SIGNIN_MAX_FAILURES} within {int(defaults.SIGNIN_FAILURE_WINDOW_S)} "
                                      f"s, SIGNIN_MAX_FAILURES); try again in {seconds} s. A correct key always "
                                      "works.", 429)
    response.headers["Retry-After"] = str(seconds)
    return response


def _failed(request: Request, next_path: str, message: str, key: str | None = None) -> Response:
    """A wrong key or link: 429 while in backoff (and not counted again), else counted and answered 401."""
    refused = _too_many(request, next_path, key)
    if refused is not None:
        return refused
    _throttle(request).failed(*key_names(request, key))
    return signin_page(next_path, message, 401)


def _signed_in(request: Request, account_id: str, next_path: str, key: str | None = None) -> Response:
    token = sessions.create_session(store(request), account_id, key)
    response = RedirectResponse(safe_next(next_path), status_code=303, headers=PAGE_HEADERS)
    response.set_cookie(defaults.SESSION_COOKIE, token, max_age=int(defaults.SESSION_TTL_S), path="/",
                        httponly=True, samesite="lax", secure=request.url.scheme == "https")
    return response


@router.get("/signin")
def signin_form(request: Request, next: str = "/runs") -> Response:
    if page_account(request) is not None:
        return RedirectResponse(safe_next(next), status_code=303, headers=PAGE_HEADERS)
    return signin_page(next)


@router.post("/signin")
async def signin(request: Request) -> Response:
    """Check the posted key once and answer with a session cookie (the key itself is not kept)."""
    if not _same_origin(request):
        return signin_page("/runs", "This sign-in did not come from this platform's own page.", 403)
    body = (await request.body())[: 4 * defaults.SIGNIN_MAX_CHARS + 2000].decode("utf-8", "replace")
    form = parse_qs(body, keep_blank_values=True, max_num_fields=10)
    key = (form.get("key") or [""])[0].strip()
    next_path = (form.get("next") or ["/runs"])[0]
    if not key:
        return signin_page(next_path, "Enter your API key.", 401)
    # the key is always looked at: a correct one signs in whatever others failed from this address
    account = await run_in_threadpool(store(request).account_for_key, key) if len(key) <= defaults.SIGNIN_MAX_CHARS else None
    if account is None:
        return _failed(request, next_path, "That key is not valid on this platform.", key)
    return _signed_in(request, account, next_path, key)


@router.get("/signin/once")
def signin_once(request: Request, token: str = "", next: str = "/runs") -> Response:
    """Spend a one-time sign-in link (printed at the platform's start, or made by ``python -m whileai open``)."""
    account = sessions.redeem_signin_link(store(request), token)  # a valid link always signs in
    if account is None:
        return _failed(request, next, "That sign-in link was already used or has expired; sign in with your key, "
                                      "or run `python -m whileai open` for a new link.")
    return _signed_in(request, account, next)


@router.post("/signout")
def signout(request: Request) -> Response:
    if not _same_origin(request):
        return signin_page("/runs", "This sign-out did not come from this platform's own page.", 403)
    sessions.end_session(store(request), request.cookies.get(defaults.SESSION_COOKIE))
    response = signin_page("/runs", "Signed out.")
    response.delete_cookie(defaults.SESSION_COOKIE, path="/")
    return response
