"""The platform's loose ends, each against a real server on loopback: file modes, /docs off, URLs from the
bound address, the request-head deadline, the sign-in limit, and sessions ending with their account's key.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import time

import httpx
import pytest

from whileai.platform.store import sessions
from whileai.platform import defaults
from whileai.platform.server import serve_in_thread
from whileai.platform.store import Store, ensure_local_account, local_key_path

API = "/api/v1"


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def platform(home):
    with serve_in_thread(store_url=f"sqlite:///{home / 'platform.db'}") as handle:
        yield handle


# --------------------------------------------------------------------------- files


def test_the_data_root_is_0700_and_the_store_wal_spool_and_key_files_0600(tmp_path, monkeypatch):
    root = tmp_path / "root"
    root.mkdir(mode=0o755)
    os.chmod(root, 0o755)  # as main left it
    monkeypatch.setenv("WHILEAI_HOME", str(root))
    store = Store()
    account, key = ensure_local_account(store)
    run = store.create_run(account, name="r")
    store.add_points(account, run["id"], "b", [{"step": 1, "metrics": {"loss": 1.0}}])
    try:
        from whileai.domain.tracking import _spool  # after the package reorganisation
    except ImportError:
        from whileai.simulations import _spool
    assert _spool.write([{"target": {}, "run_id": run["id"], "kind": "points", "body": {"points": []}}])[0] == 1
    assert _mode(root) == 0o700
    files = [root / "platform.db", root / "platform.db-wal", root / "platform.db-shm", local_key_path()]
    files += list((root / "spool").iterdir())
    assert len(files) >= 5 and all(p.exists() for p in files)
    assert {str(p): _mode(p) for p in files} == {str(p): 0o600 for p in files}
    assert _mode(root / "spool") == 0o700
    store.close()
    # a store made 0644 by an older version is tightened when opened
    os.chmod(root / "platform.db", 0o644)
    Store().close()
    assert _mode(root / "platform.db") == 0o600


# --------------------------------------------------------------------------- routes and urls


def test_the_api_docs_are_off_unless_asked_for(platform, monkeypatch):
    for path in ("/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect"):
        assert httpx.get(platform.base_url + path).status_code == 404, path
    from fastapi.testclient import TestClient

    from whileai.platform.api import create_app

    monkeypatch.setenv(defaults.PLATFORM_API_DOCS_ENV, "1")
    with TestClient(create_app(platform.store)) as client:
        assert client.get("/openapi.json").status_code == 200 and client.get("/docs").status_code == 200


def test_urls_come_from_the_bound_address_or_the_public_url_never_the_host_header(platform):
    _account, key = platform.store.create_account("u")
    forged = {"Authorization": f"Bearer {key}", "Host": "evil.example:666"}
    run = httpx.post(f"{platform.base_url}{API}/runs", headers=forged, json={"name": "r"}).json()
    assert run["url"] == f"{platform.base_url}/runs/{run['id']}", run["url"]
    assert "evil.example" not in httpx.get(f"{platform.base_url}{API}/runs/{run['id']}", headers=forged).text
    for path in ("/runs/", f"{API}/runs/", "/signin/"):  # no slash redirect carrying the Host header
        r = httpx.get(platform.base_url + path, headers=forged, follow_redirects=False)
        assert "evil.example" not in r.headers.get("location", "") + r.text, (path, r.status_code)
    platform.app.state.public_url = "https://runs.example.org"
    try:
        again = httpx.get(f"{platform.base_url}{API}/runs/{run['id']}", headers=forged).json()
        assert again["url"] == f"https://runs.example.org/runs/{run['id']}"
    finally:
        platform.app.state.public_url = None


def test_a_request_head_that_does_not_arrive_in_time_is_cut_off(home, monkeypatch):
    monkeypatch.setattr(defaults, "PLATFORM_HEADER_TIMEOUT_S", 0.5)
    with serve_in_thread(store_url=f"sqlite:///{home / 'platform.db'}") as handle:
        socks = []
        for i in range(40):
            sock = socket.create_connection(("127.0.0.1", handle.port), timeout=5)
            if i % 2:  # half send part of a head, half send nothing at all
                sock.sendall(b"GET /signin HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            socks.append(sock)
        trickle = socket.create_connection(("127.0.0.1", handle.port), timeout=5)
        started = time.monotonic()
        for byte in b"GET /signin HTTP/1.1\r\nHost: x\r\n":  # a byte each 0.1 s: never whole before the deadline
            try:
                trickle.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(0.1)
        closed = 0
        for sock in [*socks, trickle]:
            sock.settimeout(max(0.1, 5 - (time.monotonic() - started)))
            try:
                closed += sock.recv(1024) == b""
            except ConnectionResetError:
                closed += 1
            except TimeoutError:
                pass
            sock.close()
        assert closed == 41, f"{41 - closed} connections still open past the head deadline"
        assert time.monotonic() - started < 6
        assert httpx.get(handle.base_url + "/signin").status_code == 200, "whole requests are served as before"


def test_sign_in_failures_are_limited_per_client(platform, monkeypatch):
    monkeypatch.setattr(defaults, "SIGNIN_MAX_FAILURES", 3)
    monkeypatch.setattr(defaults, "SIGNIN_FAILURE_WINDOW_S", 1.5)
    _account, key = platform.store.create_account("s")
    with httpx.Client(base_url=platform.base_url) as c:
        for _ in range(2):
            assert c.post("/signin", data={"key": "wai_wrong"}).status_code == 401
        assert c.get("/signin/once", params={"token": "spent"}).status_code == 401
        refused = c.post("/signin", data={"key": "wai_wrong"}, follow_redirects=False)
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
        assert "Too many failed sign-ins" in refused.text and "SIGNIN_MAX_FAILURES" in refused.text
        assert c.get("/signin/once", params={"token": "x"}).status_code == 429
        # the correct key is never refused for the failures before it (issue 30: the owner was locked out)
        assert c.post("/signin", data={"key": key}, follow_redirects=False).status_code == 303
        time.sleep(1.6)
        assert c.post("/signin", data={"key": "wai_wrong"}).status_code == 401


# --------------------------------------------------------------------------- sessions and accounts


def test_rotating_or_revoking_a_key_ends_every_session_of_the_account_links_included(platform):
    store = platform.store
    account, key = store.create_account("r")
    spare = store.issue_api_key(account)
    by_link = sessions.redeem_signin_link(store, sessions.create_signin_link(store, account))
    assert by_link == account
    link_session = sessions.create_session(store, account)  # what /signin/once makes: no key behind it
    key_session = sessions.create_session(store, account, key)
    unspent = sessions.create_signin_link(store, account)
    other, other_key = store.create_account("other")
    other_session = sessions.create_session(store, other, other_key)
    store.revoke_api_key(account, spare)
    assert sessions.account_for_session(store, link_session) is None
    assert sessions.account_for_session(store, key_session) is None
    assert sessions.redeem_signin_link(store, unspent) is None
    assert sessions.account_for_session(store, other_session) == other, "another account's sessions stay"
    after = sessions.create_session(store, account, key)
    new_key = store.rotate_api_key(account)
    assert sessions.account_for_session(store, after) is None and store.account_for_key(key) is None
    assert sessions.account_for_session(store, sessions.create_session(store, account, new_key)) == account


def test_accounts_sessions_revoke_and_delete(home, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'team.db'}"
    store = Store(url)
    dora, key = store.create_account("dora")
    keep, keep_key = store.create_account("keep")
    run = store.create_run(dora, name="r")
    store.add_points(dora, run["id"], "b", [{"step": i, "metrics": {"loss": 1.0}} for i in range(20)])
    store.create_dataset(dora, [{"task_id": "t", "passed": True, "messages": []}], name="d")
    store.create_job(dora, run_id=run["id"], kind="sft")
    kept_run = store.create_run(keep, name="kept")
    live = [sessions.create_session(store, dora, key), sessions.create_session(store, dora)]
    sessions.create_signin_link(store, dora)
    from whileai.__main__ import main

    def _cli(*argv):  # python -m whileai accounts ..., in this process
        code = main(["accounts", *argv])
        out = capsys.readouterr()
        return subprocess.CompletedProcess(argv, code, out.out, out.err)

    keys = _cli("--store-url", url, "keys", "dora")
    assert keys.returncode == 0 and "(unnamed)" in keys.stdout and "wai_" not in keys.stdout, keys.stderr
    counted = _cli("--store-url", url, "sessions", "dora")
    assert counted.returncode == 0 and "2 live page session(s), 1 unspent sign-in link(s)" in counted.stdout
    revoked = _cli("--store-url", url, "sessions", "--revoke", "dora")
    assert revoked.returncode == 0 and "ended 3" in revoked.stderr, revoked.stderr
    assert all(sessions.account_for_session(store, t) is None for t in live)
    assert store.account_for_key(key) == dora, "ending sessions leaves the keys"

    unsure = _cli("--store-url", url, "delete", "dora")
    assert unsure.returncode == 2 and "--yes" in unsure.stderr and store.account_for_key(key) == dora
    deleted = _cli("--store-url", url, "delete", "dora", "--yes")
    assert deleted.returncode == 0 and "20 points" in deleted.stderr and "1 runs" in deleted.stderr, deleted.stderr
    assert store.account_for_key(key) is None and store.count_points(keep, kept_run["id"]) == 0
    assert [a["name"] for a in store.list_accounts()] == ["keep"] and store.account_for_key(keep_key) == keep
    import sqlalchemy as sa

    with store.engine.connect() as conn:
        for table in ("runs", "points", "datasets", "jobs", "api_keys", "page_tokens"):
            left = conn.execute(sa.text(f"SELECT count(*) FROM {table} WHERE "
                                        + ("run_id = :r" if table == "points" else "account_id = :a")),
                                {"a": dora, "r": run["id"]}).scalar()
            assert left == 0, table
    missing = _cli("--store-url", url, "delete", "dora", "--yes")
    assert missing.returncode == 1 and "no account named 'dora'" in missing.stderr
    store.close()
