"""A server of older whileai, still running while a newer whileai upgrades its store, cannot write to it.

The older server is real: commit a9b0ea3, the last before servers registered on their store
(store/_servers.py), so nothing of registration stops it. Its tree is taken with ``git archive`` into a
temporary folder and its ``python -m whileai platform`` runs from there on this venv. It makes the store
(revision 0003) with a run and points, serves it, and stays up while this code upgrades the store; then its
delete, create and points requests all fail and the store's rows are as they were (store/_writers.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from _platform_server import START_S, answers, free_port
from whileai.platform.store import Store, migrate

ROOT = Path(__file__).resolve().parents[1]
#: the commit before "One schema, one server generation" (1d25e79), which added the servers' registration
BEFORE_REGISTRATION = "a9b0ea3"
API = "/api/v1"
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]

_MAKE_STORE = """
import json, sys
from whileai.platform.store import Store
store = Store(sys.argv[1])
acct, key = store.create_account("old")
run = store.create_run(acct, name="kept by the old server")
store.add_points(acct, run["id"], "b0", [{"step": i, "metrics": {"loss": 1.0 / (i + 1)}, "ts": 1.0} for i in range(20)])
store.update_run(acct, run["id"], {"status": "done"})
print(json.dumps({"key": key, "run_id": run["id"]}))
"""


@pytest.fixture(scope="module")
def old_tree(tmp_path_factory) -> Path:
    """whileai as of BEFORE_REGISTRATION, in a folder of its own."""
    folder = tmp_path_factory.mktemp("whileai-before-registration")
    archive = subprocess.run(["git", "archive", BEFORE_REGISTRATION, "whileai"], cwd=ROOT, capture_output=True,
                             check=False)
    if archive.returncode != 0:  # a shallow clone without that commit
        pytest.skip(f"git archive {BEFORE_REGISTRATION} failed: {archive.stderr.decode()[-300:]}")
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder


def _old_env(old_tree: Path, home: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(old_tree), "WHILEAI_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    env.pop("WHILEAI_STORE_URL", None)
    return env


def _rows(url: str) -> dict[str, list[str]]:
    """Every row of every table, as text (read with a plain engine: reading is never refused)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return {table: sorted(json.dumps([str(v) for v in row])
                                  for row in conn.execute(sa.text(f'SELECT * FROM "{table}"')))
                    for table in sa.inspect(conn).get_table_names()}
    finally:
        engine.dispose()


def _start_old_server(old_tree: Path, home: Path, url: str, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "whileai", "platform", "--port", str(port), "--store-url", url],
                                env=_old_env(old_tree, home), cwd=old_tree, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + START_S
    while not answers(port):
        assert proc.poll() is None, f"the old server exited with {proc.returncode}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"the old server did not answer:\n{log.read_text()[-3000:]}"
        time.sleep(0.2)
    return proc, f"http://127.0.0.1:{port}"


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_server_from_before_registration_cannot_write_to_the_store_a_newer_whileai_upgraded(
        backend, old_tree, tmp_path, pg_database):
    url = f"sqlite:///{tmp_path / 'platform.db'}" if backend == "sqlite" else pg_database()
    home = tmp_path / "home"
    made = subprocess.run([sys.executable, "-c", _MAKE_STORE, url], env=_old_env(old_tree, home), cwd=old_tree,
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr[-3000:]
    facts = json.loads(made.stdout.strip().splitlines()[-1])
    proc, base = _start_old_server(old_tree, home, url, tmp_path / "old-server.log")
    try:
        with httpx.Client(base_url=base, timeout=30, headers={"Authorization": f"Bearer {facts['key']}"}) as old:
            assert old.get(f"{API}/runs/{facts['run_id']}").status_code == 200  # the old server serves its store

            Store(url).close()  # this whileai opens the store while the old server runs: it upgrades it
            assert migrate.store_revision(Store(url, create=False)) == migrate.HEAD_REVISION
            before = _rows(url)

            deleted = old.delete(f"{API}/runs/{facts['run_id']}")
            created = old.post(f"{API}/runs", json={"name": "made by the old server"})
            pointed = old.post(f"{API}/runs/{facts['run_id']}/points",
                               json={"batch_id": "late", "points": [{"step": 99, "metrics": {"loss": 0.5}}]})
            for answer in (deleted, created, pointed):
                assert answer.status_code >= 500, f"{answer.request.method} {answer.request.url}: {answer.text[:300]}"
            assert old.get(f"{API}/runs/{facts['run_id']}").status_code == 200  # reading still works

        assert _rows(url) == before, "the old server changed the upgraded store"
        store = Store(url)
        try:  # this whileai writes on
            acct = store.account_for_key(facts["key"])
            assert store.count_points(acct, facts["run_id"]) == 20
            assert store.create_run(acct, name="after the upgrade")["name"] == "after the upgrade"
        finally:
            store.close()
    finally:
        proc.terminate()
        proc.wait(30)
    said = (tmp_path / "old-server.log").read_text()
    expected = "no such function: whileai_writer_revision" if backend == "sqlite" else "upgraded to schema revision"
    assert expected in said, said[-3000:]
