"""The store's schema revisions: each store records its revision, and meeting an older one upgrades it.

The revisions are Alembic scripts shipped in ``whileai/platform/store/migrations``
(run from here, no ``alembic.ini``). Every :class:`~whileai.platform.store.Store`
checks the store's revision when it opens (one query when it is current):

- an empty store gets the whole chain (the baseline creates the tables);
- a store made before revisions existed (tables, no ``alembic_version``) runs
  the baseline, which adds only what it lacks, then the rest of the chain;
- an older store is upgraded in place: on SQLite a copy of the file is made
  first (``platform.db.bak-<revision>-<time>``, mode 0600), on PostgreSQL it
  runs in one transaction; in both one process at a time (SQLite's write lock,
  a PostgreSQL advisory lock), and the others find it done;
- a store at a revision this code does not know (made by a newer whileai) is
  refused with :class:`StoreVersionError`, whose message names both revisions;
- an upgraded store refuses every write of older whileai code, registered server or not
  (``_writers``: triggers, and a marker each connection of this code sets).

``python -m whileai platform upgrade [--store-url URL]`` does it on demand (server.py).
How to add a revision: docs/architecture.md, "Schema revisions".
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import json
import socket

from sqlalchemy import inspect, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from whileai.core.errors import StoreVersionError  # re-exported: its old home
from whileai.platform import defaults
from whileai.platform.store._engine import _is_lock_error, with_lock_retry
from whileai.platform.store._erase import erase_deleted
from whileai.platform.store._writers import refuse_older_writers
from whileai.platform.store.tables import Setting

__all__ = ["HEAD_REVISION", "StoreVersionError", "ensure_current", "upgrade", "revisions", "store_revision"]

#: The newest revision in whileai/platform/store/migrations/versions (tests check it is the chain's head).
HEAD_REVISION = "0006_job_platform_fields"

#: The PostgreSQL advisory lock that lets one process at a time create or upgrade the schema.
_PG_SCHEMA_LOCK = 847001
_VERSIONS = Path(__file__).with_name("migrations")

#: Set to 1 to see Alembic's own lines (``Running upgrade -> 0001_baseline`` ...) as a store is made or
#: upgraded; by default they are held back and printed only when the upgrade fails.
MIGRATION_LOG_ENV = "WHILEAI_STORE_MIGRATION_LOG"


class _Held(logging.Handler):
    """Keeps the records it is handed, to be shown only if the upgrade fails."""

    def __init__(self, level: int):
        super().__init__(level)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def _alembic_quiet() -> Iterator[None]:
    """Hold Alembic's INFO lines while a revision runs: shown when MIGRATION_LOG_ENV asks, or when it fails.

    The logger's own handlers (the runner's ``[whileai store]`` one, conf/hydra/hydra_logging) are set
    aside meanwhile, and a failure replays the held lines through them (or onto stderr when it has none).
    """
    if os.environ.get(MIGRATION_LOG_ENV) == "1":
        yield
        return
    logger = logging.getLogger("alembic")
    held = _Held(logging.INFO)
    saved = logger.level, logger.propagate, list(logger.handlers)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.handlers = [held]
    try:
        yield
    except BaseException:
        for record in held.records:  # what ran before the failure, for the report
            if saved[2]:
                for handler in saved[2]:
                    if record.levelno >= handler.level:
                        handler.handle(record)
            else:
                print(f"alembic: {record.getMessage()}", file=sys.stderr)
        raise
    finally:
        logger.handlers = saved[2]
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def alembic_config() -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(_VERSIONS))
    return config


def revisions() -> list[str]:
    """Every revision this code knows, oldest first."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    return [s.revision for s in reversed(list(script.walk_revisions()))]


def _read_revision(conn: Connection) -> str | None:
    if not inspect(conn).has_table("alembic_version"):
        return None
    rows = [r[0] for r in conn.execute(text("SELECT version_num FROM alembic_version"))]
    return rows[0] if len(rows) == 1 else ",".join(sorted(rows)) or None


def store_revision(store: Any) -> str | None:
    """The store's recorded revision (None: empty, or made before revisions existed)."""
    with store.engine.connect() as conn:
        return _read_revision(conn)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("whileai")
    except Exception:  # noqa: BLE001 - an uninstalled checkout has no metadata
        return "this checkout"


def _where(store: Any) -> str:
    return store.engine.url.render_as_string(hide_password=True)


def _newer(store: Any, found: str) -> StoreVersionError:
    return StoreVersionError(
        f"the store {_where(store)} is at schema revision {found!r}, which this whileai ({_version()}) does not know: "
        f"its newest is {HEAD_REVISION!r}, so the store was made or upgraded by a newer whileai. Upgrade whileai "
        "(pip install -U whileai) to use this store, or point --store-url / WHILEAI_STORE_URL at another store"
    )


def _sqlite_path(store: Any) -> Path | None:
    database = store.engine.url.database
    return Path(database) if store._sqlite and database else None


def _backup(path: Path, found: str | None) -> Path:
    """A consistent copy of the SQLite file (WAL included), readable by its owner only."""
    import os

    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.bak-{found or 'unversioned'}-{stamp}")
    # written under a temporary name and renamed when whole: a copy killed halfway is never named like a backup
    for stale in path.parent.glob(f".{path.name}.bak-*.partial-*"):  # left by a copy that was killed
        found_pid = re.search(r"\.partial-(\d+)(?:-journal|-wal|-shm)?$", stale.name)
        if found_pid and not _alive(int(found_pid.group(1))):
            stale.unlink(missing_ok=True)
    partial = path.with_name(f".{target.name}.partial-{os.getpid()}")
    os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
    source, copy = sqlite3.connect(path), sqlite3.connect(partial)
    try:
        source.backup(copy)
    except BaseException:
        copy.close()
        partial.unlink(missing_ok=True)
        raise
    finally:
        copy.close()
        source.close()
    os.replace(partial, target)
    return target


def _upgrade_locked(store: Any, conn: Connection) -> tuple[str | None, Path | None, bool]:
    """With the schema lock held: ``(revision found, backup made, whether there was anything to keep)``."""
    found = _read_revision(conn)
    if found == HEAD_REVISION:
        return found, None, False
    if found is not None and found not in revisions():
        raise _newer(store, found)
    had_tables = bool(inspect(conn).get_table_names())
    if found is not None:
        _refuse_live_servers(store, conn, found)
    backup = None
    path = _sqlite_path(store)
    if had_tables and path is not None and path.exists():
        backup = _backup(path, found)
    try:
        with _alembic_quiet():  # its import logs its plugins too
            from alembic import command

            config = alembic_config()
            config.attributes["connection"] = conn
            command.upgrade(config, HEAD_REVISION)
            refuse_older_writers(conn, HEAD_REVISION)  # every whileai older than this one can no longer write
    except Exception as exc:  # noqa: BLE001 - said with what to do; the transaction rolls every revision back
        if _is_lock_error(exc):
            raise  # with_lock_retry tries the whole upgrade again
        before = f"revision {found!r}" if found else "before schema revisions"
        kept = f" A copy of the file from before the attempt is in {backup}." if backup else ""
        raise StoreVersionError(
            f"upgrading the store {_where(store)} from {before} to revision {HEAD_REVISION!r} failed "
            f"({type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}); the upgrade ran in one "
            f"transaction, so the store is as it was.{kept} Retry with `python -m whileai platform upgrade`, "
            "and report the message if it fails again"
        ) from exc
    return found, backup, had_tables


def _refuse_live_servers(store: Any, conn: Connection, found: str) -> None:
    """StoreVersionError naming each live server of another revision (store/_servers.py): never upgrade under one."""
    others = [s for s in live_servers(conn) if s.get("revision") != HEAD_REVISION]
    if others:
        named = "; ".join(f"pid {s.get('pid')} on {s.get('host')} (revision {s.get('revision')!r}, last heard "
                          f"{s['silent_s']:g} s ago)" for s in others)
        raise StoreVersionError(
            f"the store {_where(store)} is at revision {found!r} and a server of it is running: {named}. Upgrading "
            f"to {HEAD_REVISION!r} under it would leave it writing the old schema; stop it first (Ctrl-C, or kill "
            "the pid), then start this whileai or run `python -m whileai platform upgrade` again")


def upgrade(store: Any, *, announce: bool = True) -> tuple[str | None, str, Path | None]:
    """Bring the store to HEAD_REVISION: ``(revision before, revision now, SQLite backup or None)``.

    Raises StoreVersionError for a newer store. With ``announce``, an upgrade of a
    store that held data is said once on stderr (a fresh store is made silently).
    """
    def work() -> tuple[str | None, Path | None, bool]:
        with store._writer.connect() as conn, conn.begin():  # SQLite: BEGIN IMMEDIATE, the write lock
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_SCHEMA_LOCK})
            return _upgrade_locked(store, conn)

    found, backup, had_tables = with_lock_retry(work)
    if found != HEAD_REVISION:
        erase_deleted(store)  # what a revision rewrote (a tombstone's id) out of the SQLite write-ahead log
    if announce and had_tables and found != HEAD_REVISION:
        before = f"revision {found!r}" if found else "before schema revisions"
        kept = f"; the file as it was is kept in {backup}" if backup else ""
        print(f"whileai: upgraded the store {_where(store)} from {before} to revision {HEAD_REVISION!r}{kept}",
              file=sys.stderr, flush=True)
    return found, HEAD_REVISION, backup


def ensure_current(store: Any) -> None:
    """What every Store does on opening: nothing when current (one query), else :func:`upgrade` or refuse."""
    try:
        with store.engine.connect() as conn:
            if _read_revision(conn) == HEAD_REVISION:
                return
    except Exception:  # noqa: BLE001 - e.g. a file being created by another process: the locked path decides
        pass
    upgrade(store)


#: the Setting key of a running server's registration: ``server:<token>`` -> its revision, host, pid, beat
SERVER_PREFIX = "server:"


def _alive(pid: Any) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (OSError, TypeError, ValueError):
        return True
    return True


def live_servers(conn: Connection | Session) -> list[dict[str, Any]]:
    """The servers registered on the store that still beat (and whose process lives, on this host)."""
    now, host, out = time.time(), socket.gethostname(), []
    for key, value in conn.execute(select(Setting.key, Setting.value).where(Setting.key.startswith(SERVER_PREFIX))):
        try:
            found = json.loads(value)
            beat = float(found["beat"])
        except (ValueError, KeyError, TypeError):
            continue
        if now - beat > defaults.SERVER_LIVE_S or (found.get("host") == host and not _alive(found.get("pid"))):
            continue
        out.append({**found, "key": key, "silent_s": round(now - beat, 1)})
    return out
