"""python -m whileai platform: serve the store, the API, the run pages and the serving endpoint.

    python -m whileai platform                     # 127.0.0.1:8470, the store under the data root
    python -m whileai platform --port 9000 --store-url postgresql+psycopg://me@db/whileai

The first start on a store with no account creates the local account and prints
its key once (it is also kept in ``<data_root>/local_key``, mode 0600, which is
where the embedded SDK reads it). Tests use :func:`serve_in_thread`.
"""

from __future__ import annotations

import argparse
import socket
import threading
import time
from typing import Any

from whileai.platform.store import Store, ensure_local_account, local_key_path, store_url
from whileai.simulations import defaults

__all__ = ["main", "serve_in_thread", "ServerHandle", "ensure_local_account"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m whileai platform", description="Start the whileai platform server.")
    p.add_argument("--host", default=defaults.PLATFORM_HOST, help="address to bind (PLATFORM_HOST: loopback only)")
    p.add_argument("--port", type=int, default=defaults.PLATFORM_PORT, help="port (PLATFORM_PORT)")
    p.add_argument("--store-url", default=None, help="SQLAlchemy URL of the store (default: $WHILEAI_STORE_URL or SQLite under the data root)")
    p.add_argument("--public-url", default=None, help="address written into run urls, when it differs from how clients reach this server")
    return p


def _display_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "") else f"[{host}]" if ":" in host else host


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    import uvicorn

    from whileai.platform.api import create_app

    store = Store(args.store_url or store_url())
    first_start = store.count_accounts() == 0
    _account_id, key = ensure_local_account(store)
    address = args.public_url or f"http://{_display_host(args.host)}:{args.port}"
    print(f"whileai platform: store {store.engine.url.render_as_string(hide_password=True)}")
    if first_start and key:
        print("Created the local account. Its API key, shown this once:")
        print(f"\n    {key}\n")
        print(f"It is also kept in {local_key_path()} (readable by you only).")
        print(f"Open the run pages in a browser once with: {address}/login?key={key}")
    else:
        print(f"An account exists; the local account's key is in {local_key_path()}.")
        print(f"Open the run pages once with: {address}/login?key=<that key>")
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"Listening on {args.host}: reachable from other machines. Anyone with a key can use the API.")
    app = create_app(store, public_url=args.public_url)
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
    return 0


class ServerHandle:
    """A platform server running in a thread: ``base_url``, ``port``, ``store``, ``app``, ``stop()``."""

    def __init__(self, server: Any, thread: threading.Thread, sock: socket.socket, store: Store, host: str):
        self._server = server
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
        self.store.close()

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<ServerHandle {self.base_url}>"


def serve_in_thread(host: str = "127.0.0.1", port: int = 0, store_url: str | None = None) -> ServerHandle:
    """Start a real uvicorn server in a daemon thread; ``port=0`` picks a free loopback port.

    Give the same ``port`` again after :meth:`ServerHandle.stop` to restart on
    it. The handle's ``store`` makes accounts: ``handle.store.create_account()``.
    """
    import uvicorn

    from whileai.platform.api import create_app

    store = Store(store_url)
    # proto=IPPROTO_TCP, not the default 0: asyncio turns Nagle off (TCP_NODELAY) only on accepted sockets
    # whose proto says TCP, and with Nagle on every response waits ~40 ms for the client's delayed ACK
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    config = uvicorn.Config(
        create_app(store),
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=2,
        access_log=False,
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
    return ServerHandle(server, thread, sock, store, host)
