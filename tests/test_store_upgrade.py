"""Schema revisions: every older store upgrades in place and serves; a newer one is refused by name.

Stores at each earlier revision are built by the revision chain itself; the store
from before revisions existed is a real one, made by commit 6c8f21a
(tests/fixtures/make_legacy_store.py): a SQLite file, and a pg_dump of the same on
PostgreSQL. PostgreSQL comes from WHILEAI_TEST_POSTGRES_URL; each test gets fresh
databases, dropped at the end.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from whileai.platform.store import migrate
from whileai.platform.server import serve_in_thread
from whileai.platform.store import Base, Store, hash_key

FIXTURES = Path(__file__).with_name("fixtures")
LEGACY = json.loads((FIXTURES / "legacy_6c8f21a.json").read_text())
API = "/api/v1"


def _url(backend: str, tmp_path: Path, pg_database, name: str = "platform.db") -> str:
    return f"sqlite:///{tmp_path / name}" if backend == "sqlite" else pg_database()


BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def _revision_of(url: str) -> str | None:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            if not sa.inspect(conn).has_table("alembic_version"):
                return None
            return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
    finally:
        engine.dispose()


def _serves(url: str, key: str, run_id: str, points: int) -> None:
    """A real server over the store: the old run reads back whole, new points land, a page session works."""
    with serve_in_thread(store_url=url) as handle, httpx.Client(base_url=handle.base_url, timeout=30) as c:
        auth = {"Authorization": f"Bearer {key}"}
        run = c.get(f"{API}/runs/{run_id}", headers=auth)
        assert run.status_code == 200 and run.json()["id"] == run_id, run.text[:300]
        assert handle.store.count_points(handle.store.account_for_key(key), run_id) == points
        new = c.post(f"{API}/runs/{run_id}/points", headers=auth,
                     json={"batch_id": "after-upgrade", "points": [{"step": 10_000, "metrics": {"loss": 0.1}}]})
        assert new.status_code == 200, new.text[:300]
        assert handle.store.count_points(handle.store.account_for_key(key), run_id) == points + 1
        signed = c.post("/signin", data={"key": key, "next": "/runs"}, follow_redirects=False)
        assert signed.status_code == 303 and c.get("/runs").status_code == 200


# --------------------------------------------------------------------------- the chain


def test_the_chain_has_several_revisions_and_head_revision_is_its_last():
    chain = migrate.revisions()
    assert len(chain) > 1 and chain[0] == "0001_baseline"
    assert chain[-1] == migrate.HEAD_REVISION, "a new revision file also moves HEAD_REVISION (docs/architecture.md)"


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_chain_from_empty_makes_exactly_the_models_schema(backend, tmp_path, pg_database):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    url = _url(backend, tmp_path, pg_database)
    store = Store(url)
    try:
        assert migrate.store_revision(store) == migrate.HEAD_REVISION
        with store.engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
        assert diff == [], f"the models and the revision chain disagree; add a revision for: {diff}"
    finally:
        store.close()


def _store_at(url: str, revision: str) -> dict:
    """A store built by the chain up to ``revision``, with an account, a key, a run and 30 points in it."""
    from alembic import command

    from whileai.platform.store._writers import mark_writers

    engine = sa.create_engine(url)
    mark_writers(engine, revision)  # writes as that revision's code does: from 0005 on the store refuses others
    config = migrate.alembic_config()
    key = "wai_" + secrets.token_urlsafe(32)
    now = time.time()
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
        conn.execute(sa.text("INSERT INTO accounts (id, name, created_at) VALUES ('acct_old', 'old', :t)"), {"t": now})
        conn.execute(sa.text("INSERT INTO api_keys (account_id, prefix, key_hash, created_at) VALUES "
                             "('acct_old', :p, :h, :t)"), {"p": key[:12], "h": hash_key(key), "t": now})
        conn.execute(sa.text("INSERT INTO runs (id, account_id, name, status, config_json, summary_json, step, "
                             "created_at, updated_at) VALUES ('run_0123456789abcdef', 'acct_old', 'old run', 'done', "
                             "'{}', '{}', 29, :t, :t)"), {"t": now})
        for i in range(30):
            conn.execute(sa.text("INSERT INTO points (run_id, step, ts, metrics) VALUES "
                                 "('run_0123456789abcdef', :s, :t, :m)"), {"s": i, "t": now + i, "m": '{"loss": 1.0}'})
    engine.dispose()
    return {"key": key, "run_id": "run_0123456789abcdef", "points": 30}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_store_at_every_earlier_revision_upgrades_and_serves(backend, tmp_path, pg_database, capsys):
    for n, revision in enumerate(migrate.revisions()[:-1]):
        url = _url(backend, tmp_path, pg_database, f"at-{n}.db")
        facts = _store_at(url, revision)
        assert _revision_of(url) == revision
        store = Store(url)
        store.close()
        assert _revision_of(url) == migrate.HEAD_REVISION
        err = capsys.readouterr().err
        assert f"from revision {revision!r} to revision {migrate.HEAD_REVISION!r}" in err
        if backend == "sqlite":
            backups = list(tmp_path.glob(f"at-{n}.db.bak-{revision}-*"))
            assert len(backups) == 1 and str(backups[0]) in err
            assert stat.S_IMODE(backups[0].stat().st_mode) == 0o600
            with sqlite3.connect(backups[0]) as copy:  # the copy is the store as it was
                assert copy.execute("SELECT version_num FROM alembic_version").fetchone() == (revision,)
                assert copy.execute("SELECT count(*) FROM points").fetchone() == (30,)
        _serves(url, facts["key"], facts["run_id"], facts["points"])


def _legacy_store(backend: str, tmp_path: Path, pg_database) -> tuple[str, dict]:
    facts = LEGACY[backend]
    if backend == "sqlite":
        path = tmp_path / "legacy.db"
        shutil.copy(FIXTURES / "legacy_6c8f21a.db", path)
        return f"sqlite:///{path}", facts
    url = pg_database()
    engine = sa.create_engine(url)
    raw = engine.raw_connection()
    try:
        with raw.cursor() as cur:
            cur.execute((FIXTURES / "legacy_6c8f21a.sql").read_text())
        raw.commit()
    finally:
        raw.close()
        engine.dispose()
    return url, facts


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_store_from_before_revisions_upgrades_and_serves(backend, tmp_path, pg_database, capsys):
    url, facts = _legacy_store(backend, tmp_path, pg_database)
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        columns = {c["name"] for c in sa.inspect(conn).get_columns("page_tokens")}
    engine.dispose()
    assert "key_hash" not in columns and _revision_of(url) is None, "the fixture is the old schema"
    store = Store(url)
    try:
        assert "from before schema revisions to revision" in capsys.readouterr().err
        assert migrate.store_revision(store) == migrate.HEAD_REVISION
        bob = store.account_for_key(facts["bob_key"])
        assert bob == facts["bob"] and store.local_account_id() == facts["local"]
        assert store.count_points(bob, facts["run_id"]) == facts["points"]
        assert store.get_run(bob, facts["run_id"], series=False)["summary"] == {"eval/pass_rate": 0.5}
        assert store.get_dataset(bob, facts["dataset_id"])["rows"] == 1
    finally:
        store.close()
    _serves(url, facts["bob_key"], facts["run_id"], facts["points"])


@pytest.mark.slow
def test_the_platform_command_starts_on_a_store_from_before_revisions_and_upgrade_does_it_on_demand(
        home, tmp_path, capsys):
    """What failed on main: ``python -m whileai platform`` on a 6c8f21a store exited 1 with a traceback."""
    from _platform_server import platform_process

    url, facts = _legacy_store("sqlite", tmp_path, None)
    log = tmp_path / "server.log"
    with platform_process(home, log, "--store-url", url) as (_, base):
        run = httpx.get(f"{base}{API}/runs/{facts['run_id']}",
                        headers={"Authorization": f"Bearer {facts['bob_key']}"}, timeout=30)
        assert run.status_code == 200 and run.json()["summary"] == {"eval/pass_rate": 0.5}
    text = log.read_text()
    assert "upgraded the store" in text and "from before schema revisions" in text and "Traceback" not in text
    assert _revision_of(url) == migrate.HEAD_REVISION

    from whileai.__main__ import main

    assert main(["platform", "upgrade", "--store-url", url]) == 0
    assert "nothing to do" in capsys.readouterr().out
    (tmp_path / "again").mkdir()
    other, _ = _legacy_store("sqlite", tmp_path / "again", None)  # a second old store, upgraded on demand
    assert main(["platform", "upgrade", "--store-url", other]) == 0
    said = capsys.readouterr().out
    assert "from no revision" in said and "legacy.db.bak-unversioned-" in said
    assert _revision_of(other) == migrate.HEAD_REVISION


def test_an_upgrade_that_fails_leaves_the_store_as_it_was_and_says_so(tmp_path):
    path = tmp_path / "odd.db"
    with sqlite3.connect(path) as conn:  # a runs table without the required status column: nothing can fill it in
        conn.execute("CREATE TABLE runs (pk INTEGER PRIMARY KEY, id VARCHAR(32))")
        conn.execute("INSERT INTO runs (id) VALUES ('run_x')")
    conn.close()
    with pytest.raises(migrate.StoreVersionError) as failed:
        Store(f"sqlite:///{path}")
    message = str(failed.value)
    assert "failed" in message and "runs lacks the required column" in message and "as it was" in message
    assert "platform upgrade" in message
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert tables == ["runs"] and conn.execute("SELECT id FROM runs").fetchall() == [("run_x",)]
    conn.close()
    assert len(list(tmp_path.glob("odd.db.bak-unversioned-*"))) == 1 and str(tmp_path) in message


# --------------------------------------------------------------------------- a newer store


def _newer_store(url: str) -> None:
    Store(url).close()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '0099_from_the_future'"))
    engine.dispose()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_newer_store_is_refused_naming_both_revisions(backend, tmp_path, pg_database):
    url = _url(backend, tmp_path, pg_database)
    _newer_store(url)
    with pytest.raises(migrate.StoreVersionError) as refused:
        Store(url)
    message = str(refused.value)
    assert "'0099_from_the_future'" in message and repr(migrate.HEAD_REVISION) in message
    assert "pip install -U whileai" in message
    assert _revision_of(url) == "0099_from_the_future", "a refused store is left as it was"


@pytest.mark.slow
def test_a_newer_store_is_refused_by_the_server_and_the_embedded_sdk(home, capsys):
    url = f"sqlite:///{home / 'platform.db'}"
    _newer_store(url)
    env = {**os.environ, "WHILEAI_HOME": str(home)}
    out = subprocess.run([sys.executable, "-m", "whileai", "platform", "--port", "1"], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert "'0099_from_the_future'" in out.stderr and repr(migrate.HEAD_REVISION) in out.stderr, out.stderr
    from whileai.__main__ import main

    for argv in (["platform", "upgrade"], ["open", "--no-browser", "--port", "1"], ["accounts", "list"]):
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert "'0099_from_the_future'" in err and repr(migrate.HEAD_REVISION) in err, (argv, err)
    script = ("import whileai.simulations as wai\n"
              "from whileai.core.errors import PlatformError\n"
              "try:\n    wai.list_runs()\nexcept PlatformError as exc:\n    print('refused:', exc)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("refused:") and "'0099_from_the_future'" in out.stdout, out.stdout + out.stderr
    assert _revision_of(url) == "0099_from_the_future"


# --------------------------------------------------------------------------- at once


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_processes_meeting_an_old_store_at_once_upgrade_it_once(backend, home, tmp_path, pg_database):
    url, facts = _legacy_store(backend, tmp_path, pg_database)
    script = ("import sys\nfrom whileai.platform.store import Store\n"
              "s = Store(sys.argv[1]); print(s.count_points(sys.argv[2], sys.argv[3]))\n")
    procs = [subprocess.Popen([sys.executable, "-c", script, url, facts["bob"], facts["run_id"]],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "WHILEAI_HOME": str(home)}) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    assert [o[0].strip() for o in outs] == [str(facts["points"])] * 3
    assert sum("upgraded the store" in o[1] for o in outs) == 1, "one process upgrades, the others find it done"
    assert _revision_of(url) == migrate.HEAD_REVISION
    if backend == "sqlite":
        assert len(list(tmp_path.glob("legacy.db.bak-*"))) == 1
