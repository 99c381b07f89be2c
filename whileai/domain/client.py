"""The one seam between the SDK and the platform.

Every call the SDK makes to the platform goes through :class:`Client`, which
wraps one ``httpx.Client``. Its transport is either the network (a platform
server at ``base_url``) or, with nothing configured, the **embedded platform**:
the same FastAPI app over the SQLite store under the data root, driven in
process. Same routes, same validation, same account scoping; one
implementation of the store logic, two ways to reach it.

Credential chain (first hit wins, each of ``api_key`` and ``base_url`` on its
own): explicit arguments, then ``WHILEAI_API_KEY`` / ``WHILEAI_BASE_URL``, then
``<data_root>/config.json`` (``{"api_key": ..., "base_url": ...}``). No base URL
anywhere means embedded; the embedded platform's local account and its key
are created on first use.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

import httpx

from whileai.domain import defaults
from whileai.core import defaults as core_defaults
from whileai.core import codec, embedded
from whileai.core.defaults import NO_NAGLE
from whileai.core.paths import data_root
from whileai.core.errors import NotFoundError, PlatformError

__all__ = ["Client", "get_client", "embedded_client", "embedded_base_url", "embedded_platform", "API_PREFIX"]

#: Prefix of the platform's JSON API, the one definition: the platform mounts its routes under it, and a path the
#: client is given without it gets it (docs/architecture.md, "HTTP API").
API_PREFIX = "/api/v1"

_KEY_ENV = "WHILEAI_API_KEY"
_URL_ENV = "WHILEAI_BASE_URL"


def embedded_base_url() -> str:
    """The address ``python -m whileai platform`` serves by default; embedded runs' URLs use it."""
    return f"http://{core_defaults.PLATFORM_HOST}:{core_defaults.PLATFORM_PORT}"


#: JSON bytes of a request body (whileai.core.codec: orjson when installed). A value that is not
#: JSON is refused with TypeError naming it, never sent as its repr.
_dumps = codec.dumps_bytes


def _error_message(response: httpx.Response) -> tuple[str, Any]:
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()
        return (text[:500] or response.reason_phrase or f"HTTP {response.status_code}"), None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message") or body["error"]), body
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"]), body
    return str(body)[:500], body




def network_transport() -> httpx.HTTPTransport:
    """httpx's transport with NO_NAGLE."""
    return httpx.HTTPTransport(socket_options=NO_NAGLE)


class Client:
    """One ``httpx.Client`` to the platform, with the account's key as the bearer.

    ``Client(base_url, api_key)`` talks to a server; pass ``transport=`` (e.g. an
    ``httpx.MockTransport``) or a ready ``http=httpx.Client(...)`` to choose how
    requests travel. ``request`` returns decoded JSON and raises
    :class:`PlatformError` (:class:`NotFoundError` for 404) with the server's message.

        client = Client("http://127.0.0.1:8470", "wai_...")
        client.request("GET", "/runs", params={"limit": 5})
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        http: httpx.Client | None = None,
        timeout: float | None = None,
        embedded: bool = False,
    ):
        if http is None:
            if base_url is None:
                raise ValueError("Client needs base_url (or a ready http=httpx.Client(...))")
            http = httpx.Client(
                base_url=base_url,
                transport=transport if transport is not None else network_transport(),
                timeout=defaults.CLIENT_TIMEOUT_S if timeout is None else timeout,
            )
        if api_key:
            http.headers["Authorization"] = f"Bearer {api_key}"
        self.http = http
        self.api_key = api_key
        self.embedded = embedded
        self.base_url = str(http.base_url).rstrip("/")
        self._errors_lock = threading.Lock()

    @property
    def target(self) -> dict[str, Any]:
        """Where this client sends, without the key itself: spooled points record it to go back there."""
        key_id = hashlib.sha256(self.api_key.encode()).hexdigest()[:16] if self.api_key else None
        return {"base_url": self.base_url, "embedded": self.embedded, "key_id": key_id}

    def url(self, path: str) -> str:
        """The absolute URL of a page on the platform, e.g. ``client.url("/runs/run_...")``."""
        return self.base_url + "/" + path.lstrip("/")

    def request(
        self,
        method: str,
        path: str,
        json: Any = None,
        params: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Send one request and return the decoded JSON answer (None for an empty body).

        ``path`` is relative to the API (``/runs``); paths under ``/api/`` or ``/v1/``
        are sent as given. Raises :class:`PlatformError` with ``status`` 0 when the
        platform could not be reached or did not answer within ``timeout`` seconds
        (CLIENT_TIMEOUT_S when None).
        """
        url = path if path.startswith(("/api/", "/v1/", "http://", "https://")) else API_PREFIX + "/" + path.lstrip("/")
        headers = {}
        content = None
        if json is not None:
            content = _dumps(json)
            headers["Content-Type"] = "application/json"
        if params:
            params = {k: v for k, v in params.items() if v is not None}
        try:
            response = self.http.request(
                method,
                url,
                content=content,
                params=params or None,
                headers=headers,
                timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout,
            )
        except httpx.TimeoutException as exc:
            raise PlatformError(
                f"{method} {url}: the platform at {self.base_url} did not answer in time ({type(exc).__name__}); "
                "check that it is running, or retry later",
                status=0,
            ) from exc
        except httpx.TransportError as exc:
            raise PlatformError(
                f"{method} {url}: cannot reach the platform at {self.base_url} ({exc or type(exc).__name__}); "
                "start it with `python -m whileai platform`, or set WHILEAI_BASE_URL to a running one",
                status=0,
            ) from exc
        if response.status_code >= 400:
            message, body = _error_message(response)
            error = NotFoundError if response.status_code == 404 else PlatformError
            raise error(f"{method} {url} -> {response.status_code}: {message}", status=response.status_code, body=body)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise PlatformError(
                f"{method} {url}: the platform answered {response.status_code} with a body that is not JSON "
                f"({response.text[:200]!r}); is {self.base_url} a whileai platform?",
                status=response.status_code,
            ) from exc

    def close(self) -> None:
        self.http.close()

    def __repr__(self) -> str:
        mode = "embedded" if self.embedded else "http"
        return f"<Client {mode} {self.base_url}>"


# ---------------------------------------------------------------------------
# The embedded platform: the FastAPI app driven in process
# ---------------------------------------------------------------------------


class _EventLoop:
    """One event-loop thread per process that runs the embedded app; any thread may submit to it.

    httpx's ASGITransport is async-only. This keeps a blocking portal (anyio)
    open on a daemon thread, so synchronous callers (the training loop, the
    background flush thread) each hand it a request and block for the answer.
    A daemon thread never holds up interpreter exit, and it keeps running
    through atexit handlers, so the last flush at exit still reaches the store.
    """

    def __init__(self) -> None:
        import anyio
        from anyio.from_thread import BlockingPortal

        ready = threading.Event()
        self.pid = os.getpid()
        self.portal: Any = None

        async def _main() -> None:
            async with BlockingPortal() as portal:
                self.portal = portal
                ready.set()
                await portal.sleep_until_stopped()

        self.thread = threading.Thread(target=anyio.run, args=(_main,), name="whileai-embedded", daemon=True)
        self.thread.start()
        ready.wait()

    def call(self, func: Any, *args: Any) -> Any:
        return self.portal.call(func, *args)


_LOOP: _EventLoop | None = None
_LOOP_LOCK = threading.Lock()


def _event_loop() -> _EventLoop:
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None or _LOOP.pid != os.getpid() or not _LOOP.thread.is_alive():
            _LOOP = _EventLoop()
        return _LOOP


class _EmbeddedTransport(httpx.BaseTransport):
    """A synchronous httpx transport that hands each request to an ASGI app in process."""

    def __init__(self, app: Any):
        self._asgi = httpx.ASGITransport(app=app, raise_app_exceptions=False, client=("127.0.0.1", 0))

    async def _send(self, request: httpx.Request, timeout: float | None) -> tuple[int, Any, bytes]:
        import anyio

        scope = anyio.fail_after(timeout) if timeout else contextlib.nullcontext()
        with scope:
            response = await self._asgi.handle_async_request(request)
            stream = response.stream
            if not isinstance(stream, httpx.AsyncByteStream):  # an ASGI transport always answers with an async stream
                raise TypeError(f"the ASGI transport answered with a {type(stream).__name__}, not an async stream")
            chunks = [chunk async for chunk in stream]
        return response.status_code, response.headers.raw, b"".join(chunks)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        forwarded = httpx.Request(request.method, request.url, headers=request.headers, content=body)
        timeout = (request.extensions.get("timeout") or {}).get("read")
        try:
            status, headers, content = _event_loop().call(self._send, forwarded, timeout)
        except TimeoutError as exc:
            raise httpx.ReadTimeout(f"the embedded platform did not answer within {timeout} s", request=request) from exc
        return httpx.Response(status, headers=headers, content=content, request=request)


_EMBEDDED: dict[str, tuple[Any, str]] = {}  # data root -> (app, local account key)
_EMBEDDED_LOCK = threading.Lock()


def _embedded_app(root: Path) -> tuple[Any, str]:
    """The platform's app over the store under ``root`` and the local account's key (made once per root).

    The app comes from the provider installed in :mod:`whileai.core.embedded` (the
    package root installs the platform's), so the SDK never imports the platform.
    """
    with _EMBEDDED_LOCK:
        found = _EMBEDDED.get(str(root))
        if found is None:
            provider = embedded.provider()
            if provider is None:
                from whileai.core.package import namespace_problem

                raise PlatformError(namespace_problem() or (
                    "no embedded platform is installed in this process (whileai.core.embedded has no provider; "
                    "install one with whileai.core.embedded.provide), or set WHILEAI_BASE_URL to a running platform"
                ))
            found = _EMBEDDED[str(root)] = provider(root)
        return found


# ---------------------------------------------------------------------------
# The credential chain
# ---------------------------------------------------------------------------


def _config_file(root: Path) -> dict[str, Any]:
    path = root / "config.json"
    if not path.exists():
        return {}
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PlatformError(
            f"{path} is not readable JSON ({exc}); it should be "
            '{"api_key": "wai_...", "base_url": "http://..."}: fix it or delete it to use the embedded platform'
        ) from exc
    if not isinstance(value, dict):
        raise PlatformError(f"{path} holds {type(value).__name__}, not an object; write {{\"api_key\": ..., \"base_url\": ...}}")
    return value


def _resolve(api_key: str | None, base_url: str | None, root: Path) -> tuple[str | None, str | None]:
    config: dict[str, Any] | None = None

    def from_config(name: str) -> str | None:
        nonlocal config
        if config is None:
            config = _config_file(root)
        value = config.get(name)
        return str(value) if value else None

    key = api_key or os.environ.get(_KEY_ENV) or from_config("api_key")
    url = base_url or os.environ.get(_URL_ENV) or from_config("base_url")
    return key or None, (url.rstrip("/") if url else None)


_CLIENTS: dict[tuple[str | None, str | None, str], Client] = {}
_CLIENTS_LOCK = threading.Lock()


def _new_embedded_client(root: Path, api_key: str | None) -> Client:
    app, local_key = _embedded_app(root)
    return Client(embedded_base_url(), api_key or local_key, transport=_EmbeddedTransport(app), embedded=True)


def embedded_client(api_key: str | None = None) -> Client:
    """The embedded platform's client for the current data root, whatever the environment says."""
    root = data_root()
    cache_key = (api_key, None, str(root))
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(cache_key)
        if client is None:
            client = _CLIENTS[cache_key] = _new_embedded_client(root, api_key)
        return client


def embedded_platform() -> bool:
    """Whether :func:`get_client` picks the embedded platform: no base URL in the environment or config.json."""
    return _resolve(None, None, data_root())[1] is None


def get_client(api_key: str | None = None, base_url: str | None = None) -> Client:
    """The client the credential chain picks; cached per (key, base URL, data root).

    With a base URL from the arguments, the environment or ``config.json`` it is
    an HTTP client to that server and needs a key from the same chain. With no
    base URL anywhere it is the embedded platform under the data root, using
    the local account (or ``api_key`` when given).
    """
    root = data_root()
    key, url = _resolve(api_key, base_url, root)
    cache_key = (key, url, str(root))
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(cache_key)
        if client is not None:
            return client
        if url is None:
            client = _new_embedded_client(root, key)
        else:
            if not key:
                raise PlatformError(
                    f"no API key for the platform at {url}: pass api_key=..., set {_KEY_ENV}, or put "
                    f'{{"api_key": ...}} in {root / "config.json"} (a new server prints its key on first start)'
                )
            client = Client(url, key)
        _CLIENTS[cache_key] = client
        return client
