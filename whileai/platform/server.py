"""python -m whileai platform: serve the store, the API, the run pages and the serving endpoint.

    python -m whileai platform                     # 127.0.0.1:8470, the store under the data root
    python -m whileai platform --port 9000 --store-url postgresql+psycopg://me@db/whileai
    python -m whileai platform upgrade [--store-url URL]   # bring an older store to this version's schema

A store made by an older whileai is upgraded on start (a copy of a SQLite file is
kept first); one made by a newer whileai is refused with both schema revisions named.

The first start on a store with no account creates the local account and prints
its key once (it is also kept in ``<data_root>/local_key``, mode 0600, which is
where the embedded SDK reads it). Every start prints a one-time sign-in link to
the run pages (not the key). ``python -m whileai open [RUN_ID]`` opens a run's
page in the browser, signed in, starting the server first when none answers.
After the first-start message the server never writes a key: no access log, and a
failed request logs an error id, not its query. Accounts for a team: ``python -m
whileai accounts``. Tests use :func:`serve_in_thread`.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
import time
from typing import Any

from whileai.platform.store.sessions import create_signin_link
from whileai.platform.store import ServerBeat, register_server
from whileai.platform.store.migrate import StoreVersionError, upgrade
from whileai.platform.store import Store, ensure_local_account, local_key_path, store_url
from whileai.platform import defaults
from whileai.core import defaults as core_defaults

__all__ = ["main", "upgrade_main", "open_main", "serve_in_thread", "ServerHandle", "ensure_local_account",
           "signin_link", "platform_answers"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m whileai platform", description="Start the whileai platform server.",
                                epilog="python -m whileai platform upgrade [--store-url URL]: bring a store an older "
                                       "whileai made to this version's schema (see upgrade --help)")
    p.add_argument("--host", default=core_defaults.PLATFORM_HOST, help="address to bind (PLATFORM_HOST: loopback only)")
    p.add_argument("--port", type=int, default=core_defaults.PLATFORM_PORT, help="port (PLATFORM_PORT)")
    p.add_argument("--store-url", default=None, help="SQLAlchemy URL of the store (default: $WHILEAI_STORE_URL or SQLite under the data root)")
    p.add_argument("--public-url", default=None, help="address written into run urls and model endpoints (default: "
                                                      "the address the server is bound to, never a request's Host)")
    p.add_argument("--forwarded-allow-ips", default=None, metavar="ADDRESSES",
                   help="comma-separated addresses of reverse proxies whose X-Forwarded-For names the client (the "
                        "sign-in limit counts per client address); by default nobody's is read, the peer is the client")
    p.add_argument("--api-docs", action="store_true", help=f"serve /docs, /redoc and /openapi.json (off by default; "
                                                           f"or set {defaults.PLATFORM_API_DOCS_ENV}=1)")
    return p


def _display_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "") else f"[{host}]" if ":" in host else host


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} minutes"


def signin_link(store: Store, account_id: str, address: str, next_path: str = "/runs") -> str:
    """A one-time sign-in link to ``next_path`` for ``account_id`` (SIGNIN_LINK_TTL_S; the key is not in it)."""
    from urllib.parse import urlencode

    token = create_signin_link(store, account_id)
    return f"{address.rstrip('/')}/signin/once?{urlencode({'token': token, 'next': next_path})}"


def _open_store(url: str | None) -> Store | None:
    """The store, upgraded if older; None (with the reason on stderr) when it is newer than this code."""
    try:
        return Store(url or store_url())
    except StoreVersionError as exc:
        print(exc, file=sys.stderr)
        return None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["upgrade"]:
        return upgrade_main(argv[1:])
    args = _parser().parse_args(argv)
    from whileai.platform.launcher.jobs import hub_env

    os.environ.update(hub_env())  # before anything imports huggingface_hub: serving loads stay off the hub too
    import uvicorn

    from whileai.platform._http import uvicorn_options
    from whileai.platform.api import create_app

    store = _open_store(args.store_url)
    if store is None:
        return 1
    first_start = store.count_accounts() == 0
    account_id, key = ensure_local_account(store)
    address = args.public_url or f"http://{_display_host(args.host)}:{args.port}"
    print(f"whileai platform: store {store.engine.url.render_as_string(hide_password=True)}")
    if first_start and key:
        print("Created the local account. Its API key, shown this once:")
        print(f"\n    {key}\n")
        print(f"It is also kept in {local_key_path()} (readable by you only).")
    else:
        print(f"The local account's key is in {local_key_path()}.")
    print(f"Run pages: {signin_link(store, account_id, address)}")
    print(f"  (a sign-in link for this browser, usable once within {_minutes(defaults.SIGNIN_LINK_TTL_S)}; later, "
          "`python -m whileai open` makes a new one, or sign in at /signin with the key)")
    print("More accounts for a team: python -m whileai accounts add NAME (prints the new key once)")
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"Listening on {args.host}: reachable from other machines. Anyone with a key can use the API.")
    app = create_app(store, public_url=args.public_url, api_docs=args.api_docs or None)
    beat = register_server(store)  # an upgrade by another whileai sees this server and names it
    # No access log (uvicorn_options): a request line carries its query string, and nothing the server writes
    # may hold a key. Each request must arrive within its deadlines, and connections are capped (_http.py).
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="info",
                    **uvicorn_options(args.forwarded_allow_ips))
    finally:
        beat.stop()
    return 0


def upgrade_main(argv: list[str] | None = None) -> int:
    """python -m whileai platform upgrade [--store-url URL]: bring a store to this whileai's schema now."""
    p = argparse.ArgumentParser(prog="python -m whileai platform upgrade",
                                description="Upgrade the store's schema to this whileai's newest revision.")
    p.add_argument("--store-url", default=None, help="SQLAlchemy URL of the store (default: $WHILEAI_STORE_URL or "
                                                      "SQLite under the data root)")
    args = p.parse_args(argv)
    store = Store(args.store_url or store_url(), create=False)
    where = store.engine.url.render_as_string(hide_password=True)
    try:
        found, now, backup = upgrade(store, announce=False)
    except StoreVersionError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    finally:
        store.close()
    if found == now:
        print(f"the store {where} is at revision {now!r}, the newest this whileai knows; nothing to do")
    else:
        before = f"revision {found!r}" if found else "no revision (empty, or made before schema revisions)"
        kept = f"; the file as it was is kept in {backup}" if backup else ""
        print(f"upgraded the store {where} from {before} to revision {now!r}{kept}")
    return 0


def platform_answers(address: str) -> bool:
    """True when a whileai platform answers at ``address`` (its sign-in page)."""
    import httpx

    try:
        response = httpx.get(f"{address}/signin", timeout=2.0)
    except httpx.HTTPError:
        return False
    return response.status_code == 200 and "whileai" in response.text


def open_main(argv: list[str] | None = None) -> int:
    """python -m whileai open [RUN_ID]: the run pages in the browser, signed in as the local account.

    When no platform answers at the address, it is started here (in the
    foreground, Ctrl-C stops it) and the browser opens once it answers.
    """
    import webbrowser
    from urllib.parse import quote

    from whileai.platform.store import NotFoundError

    p = _parser()
    p.prog, p.description = "python -m whileai open", "Open the run pages (or one run's page) in the browser, signed in."
    p.add_argument("run_id", nargs="?", help="a run id, e.g. run_0123abcd... (default: the runs list)")
    p.add_argument("--no-browser", action="store_true", help="print the sign-in link instead of opening a browser")
    args = p.parse_args(argv)
    store = _open_store(args.store_url)
    if store is None:
        return 1
    account_id, _key = ensure_local_account(store)
    target = "/runs"
    if args.run_id:
        try:
            store.get_run(account_id, args.run_id, series=False)
        except NotFoundError:
            print(f"no run {args.run_id!r} in the local account of {store}; `python -m whileai open` lists the "
                  "runs there (the run id is the run_... in the run's url)", file=sys.stderr)
            return 2
        target = f"/runs/{quote(args.run_id, safe='')}"
    address = args.public_url or f"http://{_display_host(args.host)}:{args.port}"

    def show() -> None:
        link = signin_link(store, account_id, address, target)
        if args.no_browser or not webbrowser.open(link):
            print(f"Open this link in a browser (usable once, within {_minutes(defaults.SIGNIN_LINK_TTL_S)}):\n    {link}")

    if platform_answers(address):
        print(f"A platform already answers at {address}: reusing it (nothing is started here).", file=sys.stderr)
        show()
        return 0
    print(f"No platform answers at {address}; starting it here (Ctrl-C stops it).")

    def when_up() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not platform_answers(address):
            time.sleep(0.2)
        show()

    threading.Thread(target=when_up, daemon=True).start()
    again = ["--host", args.host, "--port", str(args.port)]
    again += ["--store-url", args.store_url] if args.store_url else []
    again += ["--public-url", args.public_url] if args.public_url else []
    again += ["--api-docs"] if args.api_docs else []
    again += ["--forwarded-allow-ips", args.forwarded_allow_ips] if args.forwarded_allow_ips else []
    return main(again)


class ServerHandle:
    """A platform server running in a thread: ``base_url``, ``port``, ``store``, ``app``, ``stop()``."""

    def __init__(self, server: Any, thread: threading.Thread, sock: socket.socket, store: Store, host: str,
                 beat: ServerBeat | None = None):
        self._server = server
        self._beat = beat
        self._thread = thread
        self._sock = sock
        self.store = store
        self.app = server.config.app  # the FastAPI app, e.g. for configure_serving
        self.port: int = sock.getsockname()[1]
        self.base_url = f"http://{_display_host(host)}:{self.port}"

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and return once the listening socket is closed (the port is free again)."""
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout)
        try:
            self._sock.close()
        except OSError:
            pass
        if self._beat is not None:
            self._beat.stop()
        self.store.close()

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<ServerHandle {self.base_url}>"


def serve_in_thread(host: str = "127.0.0.1", port: int = 0, store_url: str | None = None,
                    forwarded_allow_ips: str | None = None) -> ServerHandle:
    """Start a real uvicorn server in a daemon thread; ``port=0`` picks a free loopback port.

    Give the same ``port`` again after :meth:`ServerHandle.stop` to restart on
    it. The handle's ``store`` makes accounts: ``handle.store.create_account()``.
    """
    import uvicorn

    from whileai.platform._http import uvicorn_options
    from whileai.platform.api import create_app

    store = Store(store_url)
    # proto=IPPROTO_TCP, not the default 0: asyncio turns Nagle off (TCP_NODELAY) only on accepted sockets
    # whose proto says TCP, and with Nagle on every response waits for the client's delayed ACK (Linux's is 40 ms)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(defaults.PLATFORM_LISTEN_BACKLOG)
    config = uvicorn.Config(
        create_app(store),
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=2,
        **uvicorn_options(forwarded_allow_ips),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"whileai-platform-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise RuntimeError(f"the platform server on {host}:{port} did not start; see the log above")
        time.sleep(0.01)
    return ServerHandle(server, thread, sock, store, host, register_server(store))
