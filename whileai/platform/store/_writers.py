"""Older whileai cannot write to a store a newer whileai has upgraded: the store itself refuses their writes.

Registration (store/_servers.py) stops a server from the registration change on: an upgrade refuses while one
of another revision is live, and one finds the revision moved before it writes. A process whose code predates
it does neither, and wrote on to a store upgraded under it. So the upgrade leaves a guard every older writer
meets, whatever its code: each table (but ``alembic_version``) gets triggers that refuse an INSERT, UPDATE or
DELETE from a connection that does not say it runs this revision or a newer one.

- SQLite: each connection of this code defines the SQL function ``whileai_writer_revision()`` (the number of its
  revision); the triggers refuse when it is lower than the store's, and older code, which defines no such
  function, cannot even prepare a write ("no such function: whileai_writer_revision").
- PostgreSQL: each session of this code sets ``whileai_store.writer_revision``; a statement trigger refuses a write
  from a session that left it unset or lower, naming the store's revision.

Every upgrade installs the guard again at the new revision (migrate.py), so each upgrade locks out every older
whileai, not just those from before the guard. Tools that write to the store by hand (``sqlite3``, ``psql``)
say the revision first: ``SELECT set_config('whileai_store.writer_revision', '5', false)`` on PostgreSQL; on SQLite,
only through a connection that defines the function.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, inspect, text
from sqlalchemy.engine import Connection, Engine

__all__ = ["WRITER_FUNCTION", "WRITER_SETTING", "mark_writers", "refuse_older_writers", "revision_number"]

#: the SQL function a SQLite connection of this code defines: the number of its schema revision
WRITER_FUNCTION = "whileai_writer_revision"
#: the session setting a PostgreSQL connection of this code sets to the number of its schema revision
WRITER_SETTING = "whileai_store.writer_revision"
_TRIGGER = "whileai_older_writer_refused"
_PG_FUNCTION = "whileai_refuse_older_writer"
_SQLITE_OPS = ("INSERT", "UPDATE", "DELETE")


def revision_number(revision: str) -> int:
    """``0005_older_writers_refused`` -> 5: revisions are numbered in order (docs/architecture.md)."""
    return int(revision.split("_", 1)[0])


def _refusal(number: int) -> str:
    return (f"this store was upgraded to schema revision {number} by a newer whileai, and this process runs older "
            "whileai code, so its writes are refused; stop it and start the whileai that upgraded the store")


def mark_writers(engine: Engine, revision: str) -> None:
    """Every connection ``engine`` opens says it writes ``revision`` (before its first statement)."""
    number = revision_number(revision)

    @event.listens_for(engine, "connect")
    def _mark(dbapi_conn: Any, _record: Any) -> None:  # pragma: no cover - exercised by every store test
        if engine.dialect.name == "sqlite":
            dbapi_conn.create_function(WRITER_FUNCTION, 0, lambda: number, deterministic=True)
        elif engine.dialect.name == "postgresql":
            cur = dbapi_conn.cursor()
            try:
                cur.execute("SELECT set_config(%s, %s, false)", (WRITER_SETTING, str(number)))
            finally:
                cur.close()
            dbapi_conn.commit()  # a session setting, kept for the connection's life (not rolled back with a tx)


def refuse_older_writers(conn: Connection, revision: str) -> None:
    """(Re)install, on every table of the store, the triggers that refuse writers older than ``revision``."""
    number = revision_number(revision)
    tables = sorted(t for t in inspect(conn).get_table_names() if t != "alembic_version")
    if conn.dialect.name == "sqlite":
        for table in tables:
            for op in _SQLITE_OPS:
                name = f"{_TRIGGER}_{table}_{op.lower()}"
                conn.exec_driver_sql(f'DROP TRIGGER IF EXISTS "{name}"')
                conn.exec_driver_sql(
                    f'CREATE TRIGGER "{name}" BEFORE {op} ON "{table}" WHEN {WRITER_FUNCTION}() < {number} '
                    f"BEGIN SELECT RAISE(ABORT, '{_refusal(number)}'); END")
    elif conn.dialect.name == "postgresql":
        conn.execute(text(  # text(), which escapes the % of RAISE for the driver's paramstyle
            f"CREATE OR REPLACE FUNCTION {_PG_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"IF coalesce(nullif(current_setting('{WRITER_SETTING}', true), ''), '0')::int < TG_ARGV[0]::int THEN "
            "RAISE EXCEPTION 'this store was upgraded to schema revision % by a newer whileai, and this session "
            f"did not set {WRITER_SETTING} to it or newer (older whileai code), so its writes are refused; stop it "
            "and start the whileai that upgraded the store', TG_ARGV[0] USING ERRCODE = 'read_only_sql_transaction'; "
            "END IF; RETURN NULL; END $$"))
        for table in tables:
            conn.exec_driver_sql(f'DROP TRIGGER IF EXISTS {_TRIGGER} ON "{table}"')
            conn.exec_driver_sql(
                f'CREATE TRIGGER {_TRIGGER} BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON "{table}" '
                f"FOR EACH STATEMENT EXECUTE PROCEDURE {_PG_FUNCTION}('{number}')")
