"""After a deletion, the deleted rows' bytes out of the store's files.

SQLite runs with ``secure_delete`` on (store/_engine.py), so a deleted row's bytes are zeroed in the database
file when its pages are written back. The write-ahead log (``platform.db-wal``) still holds the pages as they
were before the delete, the run's id, name, points and summary among them, until a checkpoint copies the log
into the file and the log is cut: by itself SQLite only checkpoints every thousand pages and then reuses the
log from its start without shortening it, so those bytes could be read for minutes or days. After every
deletion :func:`erase_deleted` checkpoints with TRUNCATE, which empties the log file. A reader in the middle
of a read holds the log; the checkpoint then waits STORE_ERASE_WAIT_S and is tried again on a thread of its
own every STORE_ERASE_RETRY_S for up to STORE_ERASE_RETRY_FOR_S, and a log it still cannot empty is said in the
server's log.

PostgreSQL keeps a deleted row's bytes in its table's pages until VACUUM reuses the space, and in its own
write-ahead log and backups for as long as the operator keeps them; what an operator does about that is in
docs/architecture.md, "Deleting for good".
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from whileai.platform import defaults

__all__ = ["erase_deleted", "truncate_wal"]

_log = logging.getLogger("whileai.platform.store")


def erase_deleted(store: Any) -> None:
    """After a committed deletion: the SQLite log emptied, now or by a retrying thread. Never raises."""
    if not store._sqlite:
        return
    if _try(store):
        return
    threading.Thread(target=_retry, args=(store,), name="whileai-store-erase", daemon=True).start()


def truncate_wal(store: Any) -> bool:
    """One ``PRAGMA wal_checkpoint(TRUNCATE)``, waiting at most STORE_ERASE_WAIT_S for readers and writers:
    whether the log was copied into the file whole and cut to nothing."""
    raw = store.engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(defaults.STORE_ERASE_WAIT_S * 1000)}")
        try:
            busy, _log_pages, _copied = cur.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            cur.execute(f"PRAGMA busy_timeout = {int(defaults.SQLITE_BUSY_TIMEOUT_S * 1000)}")
            cur.close()
        return busy == 0
    finally:
        raw.close()


def _try(store: Any) -> bool:
    try:
        return truncate_wal(store)
    except Exception as exc:  # noqa: BLE001 - the deletion is committed; this only hastens its bytes' end
        _log.debug("store log checkpoint failed: %s", exc)
        return False


def _retry(store: Any) -> None:
    deadline = time.monotonic() + defaults.STORE_ERASE_RETRY_FOR_S
    while time.monotonic() < deadline:
        time.sleep(defaults.STORE_ERASE_RETRY_S)
        if _try(store):
            return
    _log.warning(
        "the store %s: a deletion's old rows may stay readable in its write-ahead log (-wal file) because readers "
        "kept it busy for %g s; they go at the next deletion, or run `sqlite3 FILE 'PRAGMA wal_checkpoint(TRUNCATE)'` "
        "when the platform is idle", store.engine.url.database, defaults.STORE_ERASE_RETRY_FOR_S)
