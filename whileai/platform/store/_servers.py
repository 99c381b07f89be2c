"""The servers writing to a store: each registers itself with its schema revision and beats while it runs.

One schema, one server generation. A server registers on start (a ``server:<token>`` row of ``settings``
holding its revision, host, pid and last beat) and beats every SERVER_HEARTBEAT_S; an upgrade of the store
refuses while a server of another revision is live (beaten within SERVER_LIVE_S, and its process alive
where it runs on this host), naming what to stop. A server also checks, at most every
STORE_SCHEMA_CHECK_S, that the store is still at its own revision before it writes
(:func:`check_revision`), so one that a newer whileai upgraded under it stops writing with the reason.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import threading
import time
from typing import Any

from sqlalchemy import delete, text
from sqlalchemy.orm import Session

from whileai.core.errors import StoreVersionError
from whileai.platform import defaults
from whileai.platform.store.migrate import HEAD_REVISION, SERVER_PREFIX, _alive, _where, live_servers  # noqa: F401
from whileai.platform.store.tables import Setting

__all__ = ["register_server", "live_servers", "check_revision", "ServerBeat"]

def _row(revision: str) -> str:
    return json.dumps({"revision": revision, "host": socket.gethostname(), "pid": os.getpid(), "beat": time.time()})


def register_server(store: Any) -> ServerBeat:
    """Register this process as a server of ``store`` at this code's revision, and beat until ``stop()``."""
    beat = ServerBeat(store, SERVER_PREFIX + secrets.token_hex(8), HEAD_REVISION)
    beat.beat()
    beat.start()
    return beat


class ServerBeat(threading.Thread):
    """The registration's heartbeat (a daemon thread); ``stop()`` removes the registration."""

    def __init__(self, store: Any, key: str, revision: str):
        super().__init__(name="whileai-server-beat", daemon=True)
        self.store, self.key, self.revision = store, key, revision
        self._stopped = threading.Event()

    def beat(self) -> None:
        def work(s: Session) -> None:
            row = s.get(Setting, self.key)
            if row is None:
                s.add(Setting(key=self.key, value=_row(self.revision)))
            else:
                row.value = _row(self.revision)

        self.store._tx(work)

    def run(self) -> None:
        while not self._stopped.wait(defaults.SERVER_HEARTBEAT_S):
            try:
                self.beat()
            except Exception:  # noqa: BLE001  a missed beat is retried; an upgrade may then run, and the
                pass  # revision check stops this server's writes

    def stop(self) -> None:
        self._stopped.set()
        try:
            self.store._tx(lambda s: s.execute(delete(Setting).where(Setting.key == self.key)))
        except Exception:  # noqa: BLE001  a row left behind goes stale in SERVER_LIVE_S
            pass


def check_revision(store: Any, s: Session) -> None:
    """Before a write, at most every STORE_SCHEMA_CHECK_S: StoreVersionError when the store is no longer at this
    code's revision (another whileai upgraded it under this process)."""
    now = time.monotonic()
    if now - getattr(store, "_revision_checked_at", float("-inf")) < defaults.STORE_SCHEMA_CHECK_S:
        return
    rows = [r[0] for r in s.execute(text("SELECT version_num FROM alembic_version"))]
    found = rows[0] if len(rows) == 1 else ",".join(sorted(rows)) or None
    if found != HEAD_REVISION:
        raise StoreVersionError(
            f"the store {_where(store)} is now at schema revision {found!r} and this process writes revision "
            f"{HEAD_REVISION!r}: another whileai changed its schema while this one was running, so nothing more is "
            "written here. Stop this server and start the whileai that matches the store (pip install -U whileai "
            "for a newer one)")
    store._revision_checked_at = now
