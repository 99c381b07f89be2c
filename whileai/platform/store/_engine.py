"""The store's database connection: which URL, how SQLite is opened, and retrying a locked file.

SQLite is shared by several processes at once (a trainer subprocess, the
server, a notebook), so every connection runs in WAL mode with a busy timeout,
write transactions start with ``BEGIN IMMEDIATE`` (a deferred transaction that
later upgrades to a writer can fail with "database is locked" no matter how
long the busy timeout is), and a transaction that still meets a locked file is
retried a bounded number of times (STORE_LOCK_RETRIES).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from sqlalchemy import create_engine, event, make_url
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from whileai.core.errors import StoreBusyError  # re-exported: its old home
from whileai.platform import defaults
from whileai.core.paths import data_root

__all__ = ["store_url", "make_engine", "is_sqlite", "with_lock_retry", "StoreBusyError"]

T = TypeVar("T")

#: execution option that marks a connection as a writer (BEGIN IMMEDIATE on SQLite)
WRITE_OPTION = "whileai_write"


def store_url() -> str:
    """The store's SQLAlchemy URL: ``$WHILEAI_STORE_URL`` when set, else SQLite under the data root.

    Any SQLAlchemy URL works, e.g. ``postgresql+psycopg://user@host/db`` for a
    team server; the default is ``sqlite:///<data_root()>/platform.db``.
    """
    url = os.environ.get(defaults.STORE_URL_ENV, "").strip()
    if url:
        return url
    return f"sqlite:///{data_root() / 'platform.db'}"


def is_sqlite(url_or_engine: str | Engine) -> bool:
    if isinstance(url_or_engine, Engine):
        return url_or_engine.dialect.name == "sqlite"
    return url_or_engine.startswith("sqlite")


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite files get WAL, a busy timeout and IMMEDIATE write transactions."""
    if not is_sqlite(url):
        return create_engine(url, pool_pre_ping=True)
    if url in ("sqlite://", "sqlite:///:memory:"):
        raise ValueError(
            f"store url {url!r} is an in-memory SQLite database, which each connection sees empty; "
            "use a file (sqlite:///path/platform.db) or leave WHILEAI_STORE_URL unset"
        )
    _private_sqlite_files(make_url(url).database)
    engine = create_engine(
        url,
        connect_args={"timeout": defaults.SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False},
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):  # pragma: no cover - exercised by every SQLite test
        # Hand transaction control to the "begin" hook below instead of pysqlite.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        try:
            cur.execute(f"PRAGMA busy_timeout = {int(defaults.SQLITE_BUSY_TIMEOUT_S * 1000)}")
            cur.execute("PRAGMA journal_mode = WAL")
            cur.execute("PRAGMA synchronous = NORMAL")
            cur.execute("PRAGMA foreign_keys = ON")
            cur.execute("PRAGMA secure_delete = ON")  # a deleted row's bytes are overwritten, not left in free pages
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):  # pragma: no cover - exercised by every SQLite test
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def _private_sqlite_files(database: str | None) -> None:
    """The SQLite file readable by its owner only (0600), made so before SQLite first opens it.

    SQLite gives its -wal and -shm files the database file's mode, so they follow.
    An existing file (and its -wal, -shm) with a looser mode is tightened.
    """
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database)
    try:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        for each in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            if each.exists() and stat.S_IMODE(each.stat().st_mode) & 0o077:
                each.chmod(0o600)
    except OSError:
        pass  # a read-only or foreign file: SQLite says what is wrong when it opens it


def _is_lock_error(exc: BaseException) -> bool:
    text = str(getattr(exc, "orig", exc)).lower()
    return "locked" in text or "busy" in text


def with_lock_retry(fn: Callable[[], T]) -> T:
    """Run ``fn`` (one whole transaction), retrying when SQLite reports a locked or busy file."""
    delay = defaults.STORE_LOCK_BACKOFF_S
    for attempt in range(defaults.STORE_LOCK_RETRIES + 1):
        try:
            return fn()
        except OperationalError as exc:
            if not _is_lock_error(exc):
                raise
            if attempt == defaults.STORE_LOCK_RETRIES:
                raise StoreBusyError(
                    f"the store stayed locked through {defaults.STORE_LOCK_RETRIES} retries "
                    f"({exc.orig}); another process holds the SQLite write lock. Retry the request, "
                    "or point WHILEAI_STORE_URL at PostgreSQL for many concurrent writers"
                ) from exc
            time.sleep(delay)
            delay = min(delay * 2, defaults.STORE_LOCK_BACKOFF_MAX_S)
    raise AssertionError("unreachable")  # pragma: no cover
