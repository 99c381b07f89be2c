"""Trust boundaries, third pass (issue 30): what a job loads, what a deletion leaves, and who a limit stops.

Each test reproduces one failure of the issue against a real uvicorn server on
loopback (SQLite, and PostgreSQL where the store matters): a gold judge named by
a run whose summary points at another account's adapter, model loads reaching the
hub (counted by a listener of our own at HF_ENDPOINT), a deleted run's id and
adapter claimed by another account, a flood of slow bodies at a lowered open-file
limit, the sign-in limit locking out the owner and bypassed by X-Forwarded-For,
and the smaller items (launch specs, adapter folders as bases, the pre-upgrade
copy, file modes).
"""

from __future__ import annotations

from whileai.core.spec import read_spec
import contextlib
import json
import os
import resource
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
import time
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from whileai.core.paths import data_root
from whileai.platform import defaults
from whileai.kit import defaults as kit_defaults
from whileai.platform.launcher import jobs as launcher_jobs
from whileai.platform.server import serve_in_thread
from whileai.platform.store import Store
from _job_helpers import wait_for as _wait_for
from _platform_server import platform_process

API = "/api/v1"
KIT = kit_defaults.KIT_BASE_NAME
ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def _url(backend: str, home: Path, pg_database) -> str:
    return f"sqlite:///{home / 'platform.db'}" if backend == "sqlite" else pg_database()


def _client(handle, key: str) -> httpx.Client:
    return httpx.Client(base_url=handle.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60)


@contextlib.contextmanager
def _two_accounts(url: str, names: tuple[str, str] = ("a", "b")):
    """A real server on ``url`` with two accounts: ``(handle, (account_a, client_a), (account_b, client_b))``."""
    with serve_in_thread(store_url=url) as handle:
        acct_a, key_a = handle.store.create_account(names[0])
        acct_b, key_b = handle.store.create_account(names[1])
        with _client(handle, key_a) as a, _client(handle, key_b) as b:
            yield handle, (acct_a, a), (acct_b, b)


def _fake_adapter(run_id: str) -> Path:
    """A folder where the platform keeps ``run_id``'s adapter, shaped like a PEFT save (config and weights)."""
    folder = launcher_jobs.adapter_dir(run_id)
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "base_model_name_or_path": KIT}))
    (folder / "adapter_model.safetensors").write_bytes(b"\0" * 64)
    return folder


# --------------------------------------------------------------------------- 1. what a job loads


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_gold_judge_is_resolved_by_the_platform_not_by_a_summary(backend, home, pg_database):
    """Account A's own 'done rm' run whose summary names B's adapter cannot be A's gold judge (it was: 201 and
    A's GRPO curve scored by B's model); A's real rm run resolves to its own adapter folder."""
    with _two_accounts(_url(backend, home, pg_database)) as (handle, (_a, a), (_b, b)):
        theirs = b.post(f"{API}/runs", json={"name": "b's rm", "status": "done",
                                             "config": {"method": "rm", "base_model": KIT}}).json()
        b_adapter = _fake_adapter(theirs["id"])
        forged = a.post(f"{API}/runs", json={
            "name": "forged judge", "status": "done", "config": {"method": "rm", "base_model": KIT},
            "summary": {"adapter": str(b_adapter), "training": {"threshold": 0.0}}}).json()
        ds = a.post(f"{API}/datasets", json={"name": "rows", "rows": [{"messages": []}]}).json()
        target = a.post(f"{API}/runs", json={"name": "grpo", "config": {"method": "grpo"}}).json()
        from whileai.core.spec import GRPOSpec

        spec = {**GRPOSpec(base_model=KIT).knobs(),  # a resolved spec: the launch refuses one that is not
                "method": "grpo", "base_model": KIT, "dataset": ds["id"], "gold_judge": forged["id"]}
        refused = a.post(f"{API}/jobs/launch", json={"run_id": target["id"], "kind": "grpo", "spec": spec})
        assert refused.status_code == 422, refused.text
        message = refused.json()["error"]["message"]
        assert f"gold_judge={forged['id']!r} cannot be this job's gold judge" in message
        assert "no job of it saved an adapter" in message and str(launcher_jobs.adapter_dir(forged["id"])) in message
        assert a.get(f"{API}/runs/{target['id']}").json()["status"] == "failed"
        # B's run named directly is not A's: refused before any job exists
        spec["gold_judge"] = theirs["id"]
        target2 = a.post(f"{API}/runs", json={"name": "grpo2", "config": {"method": "grpo"}}).json()
        refused = a.post(f"{API}/jobs/launch", json={"run_id": target2["id"], "kind": "grpo", "spec": spec})
        assert refused.status_code == 422 and "is not a run of this account" in refused.text
        assert a.get(f"{API}/jobs", params={"run_id": target2["id"]}).json()["jobs"] == []
        (job,) = a.get(f"{API}/jobs", params={"run_id": target["id"]}).json()["jobs"]
        assert job["status"] == "failed" and not job.get("pid")  # refused before a worker started
        # the resolution itself: A's own finished rm run gives its own folder, whatever its summary says
        own = handle.store.create_run(_a, name="own rm", status="done", config={"method": "rm", "base_model": KIT},
                                      summary={"adapter": str(b_adapter), "training": {"threshold": 0.25}})
        folder = _fake_adapter(own["id"])
        gold = launcher_jobs.gold_judge(handle.store, _a, "grpo", GRPOSpec(gold_judge=own["id"]))
        assert gold is not None  # the resolution, typed (whileai.core.jobrow.ResolvedJudge)
        assert gold.model_dump() == {"run_id": own["id"], "adapter": str(folder), "base_model": KIT, "threshold": 0.25,
                                     "span": "conversation"}


class _HubListener:
    """A listener on 127.0.0.1 standing in for the model hub: it counts every request and answers 404."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        seen = self.paths

        class Handler(BaseHTTPRequestHandler):
            def _count(self) -> None:
                seen.append(f"{self.command} {self.path}")
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_HEAD = do_POST = _count

            def log_message(self, *args, **kwargs) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def sample_sets(push_tiny_sample):
    return push_tiny_sample("hub-count", tasks=40)


@pytest.mark.slow
def test_no_job_and_no_gold_judge_reaches_the_hub(sample_sets, monkeypatch):
    """Every method's job on a hub base, and a GRPO job whose gold judge has a hub base, make zero requests to
    HF_ENDPOINT (an rm job made 6, a gold judge 90) and fail saying the base is not on this machine."""
    import whileai.simulations as wai
    from whileai.platform.store import ensure_local_account, store_url
    from whileai.domain.client import get_client

    hub = _HubListener()
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "WHILEAI_ALLOW_HUB"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)  # inherited by every worker the server starts
    handle = serve_in_thread("127.0.0.1", 0, store_url())
    try:
        account, key = ensure_local_account(handle.store)
        monkeypatch.setenv("WHILEAI_BASE_URL", handle.base_url)
        monkeypatch.setenv("WHILEAI_API_KEY", key)
        gold = handle.store.create_run(account, name="gold on a hub base", status="done",
                                       config={"method": "rm", "base_model": "evil-org/anything"})
        folder = _fake_adapter(gold["id"])  # as its rm job would have left it
        handle.store.update_run(account, gold["id"], {"summary": {"adapter": str(folder),
                                                                  "training": {"threshold": 0.0}}})
        runs = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for method in ("sft", "dpo", "rm", "grpo"):
                data = sample_sets["passes"] if method == "sft" else sample_sets["train"]
                runs[method] = wai.train(data.id, method=method, steps=1, base_model="evil-org/anything")
            runs["gold"] = wai.train(sample_sets["train"].id, method="grpo", steps=1, base_model=sample_sets["base"],
                                     holdout=sample_sets["holdout"].id, config={"gold_judge": gold["id"]},
                                     reward="fine_grained")  # a reward weaker than the exact judge: the gold loads
        ended = {what: run.wait(poll=2, timeout=300) for what, run in runs.items()}
        assert hub.paths == [], f"{len(hub.paths)} requests reached the hub: {hub.paths[:8]}"
        for what, run in runs.items():
            assert ended[what] == "failed", (what, ended[what])
            assert "evil-org/anything" in (run.error or ""), (what, run.error)
        # the gold judge loads before training, so one that cannot load fails the job at once
        assert "hub is off" in runs["gold"].error and "WHILEAI_ALLOW_HUB" in runs["gold"].error
        assert "hub is off" in runs["rm"].error
        for run in runs.values():  # the job logs are the owner's only
            job = get_client().request("GET", "/jobs", params={"run_id": run.id})["jobs"][0]
            assert stat.S_IMODE(launcher_jobs.job_log(job["id"]).stat().st_mode) == 0o600
    finally:
        handle.stop()
        hub.close()


# --------------------------------------------------------------------------- 2. what a deletion leaves


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_deleted_run_leaves_nothing_and_its_id_cannot_be_claimed(backend, home, pg_database):
    with _two_accounts(_url(backend, home, pg_database), ("alice", "bob")) as (handle, (acct_a, a), (_b, b)):
        run = a.post(f"{API}/runs", json={"name": "to delete", "status": "done",
                                          "config": {"method": "sft", "base_model": KIT}}).json()
        adapter = _fake_adapter(run["id"])
        a.post(f"{API}/runs/{run['id']}/points", json={"batch_id": "b0", "points": [
            {"step": 1, "metrics": {"loss": 1.0}}]}).raise_for_status()
        job = handle.store.create_job(acct_a, run_id=run["id"], kind="sft", target="local", status="done",
                                      spec={"method": "sft"})
        launcher_jobs.job_dir(job["id"]).mkdir(parents=True)
        launcher_jobs.job_log(job["id"]).write_text("training...\n")
        served = a.post(f"{API}/models", json={"name": "agent", "baseModel": KIT, "adapter": str(adapter),
                                               "adapterRunId": run["id"]})
        assert served.status_code == 201, served.text
        assert a.delete(f"{API}/runs/{run['id']}").status_code == 200
        assert not adapter.exists() and not launcher_jobs.job_dir(job["id"]).exists()
        assert a.get(f"{API}/models").json()["models"] == []
        assert a.get(f"{API}/jobs").json()["jobs"] == []
        answer = a.post("/v1/chat/completions", json={"model": "agent", "messages": [
            {"role": "user", "content": "hi"}]})
        assert answer.status_code == 404
        for who in (b, a):  # the id is retired: neither another account nor its owner makes it again
            claimed = who.post(f"{API}/runs", json={"id": run["id"], "name": "claimed"})
            assert claimed.status_code == 409, claimed.text
            assert "never used again" in claimed.json()["error"]["message"]
        model = b.post(f"{API}/models", json={"name": "stolen", "baseModel": KIT, "adapter": str(adapter),
                                              "adapterRunId": run["id"]})
        assert model.status_code in (404, 422), model.text


def _rows_by_table(url: str) -> dict[str, list[str]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            out = {}
            for table in sa.inspect(conn).get_table_names():
                rows = conn.execute(sa.text(f'SELECT * FROM "{table}"')).all()
                out[table] = sorted(json.dumps([str(v) for v in row]) for row in rows)
            return out
    finally:
        engine.dispose()


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("backend", BACKENDS)
def test_accounts_delete_leaves_no_row_and_no_file_and_no_claimable_id(backend, home, pg_database):
    url = _url(backend, home, pg_database)
    with serve_in_thread(store_url=url) as handle:
        _b, key_b = handle.store.create_account("bob")
        for shared in ("adapters", "jobs"):  # the platform's own folders, there once any job has run
            (data_root() / shared).mkdir(exist_ok=True)
        rows_before, files_before = _rows_by_table(url), _files(data_root())
        acct, key = handle.store.create_account("alice")
        with _client(handle, key) as a, _client(handle, key_b) as b:
            ids = []
            for i in range(3):
                run = a.post(f"{API}/runs", json={"name": f"alice {i}", "status": "done",
                                                  "config": {"method": "sft", "base_model": KIT}}).json()
                a.post(f"{API}/runs/{run['id']}/points", json={"batch_id": "b0", "points": [
                    {"step": 1, "metrics": {"loss": 1.0, "acc": 0.5}}]}).raise_for_status()
                _fake_adapter(run["id"])
                job = handle.store.create_job(acct, run_id=run["id"], kind="sft", target="local", status="done",
                                              spec={"method": "sft"})
                launcher_jobs.job_dir(job["id"]).mkdir(parents=True)
                launcher_jobs.job_log(job["id"]).write_text("log\n")
                ids.append(run["id"])
            a.post(f"{API}/datasets", json={"name": "alice's", "rows": [{"x": 1}]}).raise_for_status()
            a.post(f"{API}/models", json={"name": "hers", "baseModel": KIT, "adapterRunId": ids[0],
                                          "adapter": str(launcher_jobs.adapter_dir(ids[0]))}).raise_for_status()
            assert a.get(f"{API}/runs/{ids[0]}/points").status_code == 200  # metric names recorded
            env = {**os.environ, "WHILEAI_HOME": str(home)}
            done = subprocess.run([sys.executable, "-m", "whileai", "accounts", "--store-url", url, "delete", "alice",
                                   "--yes"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
            assert done.returncode == 0, done.stderr
            assert "folders (adapters and job logs)" in done.stderr
            rows_after = _rows_by_table(url)
            tombstones = [r for r in rows_after["settings"] if "run_tombstone:" in r]
            assert len(tombstones) == len(ids)
            tombstones += [r for r in rows_after["settings"] if "key_tombstone:" in r]  # key hashes: told, not retried
            rows_after["settings"] = [r for r in rows_after["settings"] if r not in tombstones]
            assert rows_after == rows_before
            assert not any(acct in t or "alice" in t for t in tombstones)
            assert _files(data_root()) == files_before
            for run_id in ids:  # what gave 201, 201, 200 on main
                assert b.post(f"{API}/runs", json={"id": run_id}).status_code == 409
                model = b.post(f"{API}/models", json={"name": f"m-{run_id}", "baseModel": KIT, "adapterRunId": run_id,
                                                      "adapter": str(launcher_jobs.adapter_dir(run_id))})
                assert model.status_code in (404, 422)
            assert b.post("/v1/chat/completions", json={"model": "hers", "messages": [
                {"role": "user", "content": "hi"}]}).status_code == 404


# --------------------------------------------------------------------------- 3. bounded reading


def test_a_body_that_does_not_arrive_in_time_is_answered_408_and_never_reaches_the_route(home, monkeypatch):
    monkeypatch.setattr(defaults, "PLATFORM_REQUEST_TIMEOUT_S", 1.0)
    with serve_in_thread(store_url=f"sqlite:///{home / 'platform.db'}") as handle:
        _acct, key = handle.store.create_account("owner")
        body = f"key={key}&next=/runs".encode()
        sock = socket.create_connection(("127.0.0.1", handle.port), timeout=5)
        sock.sendall(b"POST /signin HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded"
                     b"\r\nContent-Length: " + str(len(body) + 10).encode() + b"\r\n\r\n" + body)
        started = time.monotonic()
        answer = sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert b"PLATFORM_REQUEST_TIMEOUT_S" in answer and b"set-cookie" not in answer.lower()
        assert 0.5 < time.monotonic() - started < 3
        sock.close()
        assert handle.store.count_sessions(_acct)["sessions"] == 0  # the partial form signed nobody in


@pytest.mark.slow
def test_a_flood_of_slow_bodies_at_a_low_open_file_limit_leaves_a_normal_client_answered(home, tmp_path):
    """At ``ulimit -n`` 512, 600 connections posting /signin a byte at a time held every socket on main (normal
    requests unanswered, the log flooded with 'Too many open files'); now each new connection past the cap ends
    the longest-arriving one, and a normal client is answered."""
    from whileai.platform.store import ensure_local_account, local_key_path

    limit, flood = 512, 600
    url = f"sqlite:///{home / 'platform.db'}"
    store = Store(url)
    ensure_local_account(store)
    store.close()
    local_key_path().chmod(0o644)  # loosened by hand: the server's start tightens it back
    log = tmp_path / "server.log"

    def lower_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    socks: list[socket.socket] = []
    with platform_process(home, log, "--store-url", url, preexec_fn=lower_limit) as (server, base):
        port = int(base.rsplit(":", 1)[1])
        try:
            head = (b"POST /signin HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                    b"Content-Length: 60000\r\n\r\nkey=")
            for _ in range(flood):
                try:
                    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                    sock.sendall(head)
                    socks.append(sock)
                except OSError:
                    break
            for sock in socks[:50]:  # a byte a second, as the flood did
                try:
                    sock.sendall(b"x")
                except OSError:
                    pass
            answered, started = 0, time.monotonic()
            for _ in range(9):
                try:
                    answered += httpx.get(f"http://127.0.0.1:{port}/signin", timeout=10).status_code == 200
                except httpx.HTTPError:
                    pass
            assert answered == 9, f"{answered} of 9 normal requests answered during the flood"
            assert time.monotonic() - started < 30
            assert server.poll() is None
            socks[0].settimeout(5)
            assert socks[0].recv(4096).startswith(b"HTTP/1.1 503"), "the longest-arriving request was ended with a 503"
        finally:
            for sock in socks:
                sock.close()
    text = log.read_text()
    assert "Too many open files" not in text and len(text) < 100_000, text[:3000]
    assert stat.S_IMODE(local_key_path().stat().st_mode) == 0o600  # tightened back by the server's start


# --------------------------------------------------------------------------- 4. who a limit stops


def test_wrong_keys_never_lock_out_the_owner_and_a_forged_address_counts_as_the_peer(home):
    from whileai.platform.server import signin_link

    with serve_in_thread(store_url=f"sqlite:///{home / 'platform.db'}") as handle:
        acct, key = handle.store.create_account("owner")
        with httpx.Client(base_url=handle.base_url, timeout=30) as c:
            for _ in range(defaults.SIGNIN_MAX_FAILURES):
                assert c.post("/signin", data={"key": "wai_wrong_guess"}).status_code == 401
            refused = c.post("/signin", data={"key": "wai_wrong_guess"})
            assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
            # the owner's key and a fresh link still sign in (both answered 429 for 300 s on main)
            assert c.post("/signin", data={"key": key}, follow_redirects=False).status_code == 303
            link = signin_link(handle.store, acct, handle.base_url)
            assert httpx.get(link, follow_redirects=False, timeout=30).status_code == 303
        with httpx.Client(base_url=handle.base_url, timeout=30) as c:
            # X-Forwarded-For from a peer nobody named is the sender's to forge: all count as 127.0.0.1
            codes = [c.post("/signin", data={"key": f"wai_forged_{i}"},
                            headers={"X-Forwarded-For": f"10.9.{i}.1"}).status_code for i in range(30)]
            assert codes.count(429) >= 29 - defaults.SIGNIN_MAX_FAILURES, codes
        # the API: wrong bearer keys are limited too (180 a second answered on main); a valid key is not
        with httpx.Client(base_url=handle.base_url, timeout=30) as c:
            codes = [c.get(f"{API}/runs", headers={"Authorization": f"Bearer wai_nope{i:04d}"}).status_code
                     for i in range(defaults.API_KEY_MAX_FAILURES + 5)]
            assert codes[: defaults.API_KEY_MAX_FAILURES] == [401] * defaults.API_KEY_MAX_FAILURES
            assert 429 in codes[defaults.API_KEY_MAX_FAILURES:], codes
            limited = c.get(f"{API}/runs", headers={"Authorization": "Bearer wai_nope9999"})
            assert limited.status_code == 429 and "API_KEY_MAX_FAILURES" in limited.text and limited.headers["Retry-After"]
            assert c.get(f"{API}/runs", headers={"Authorization": f"Bearer {key}"}).status_code == 200


def test_forwarded_addresses_count_only_from_a_proxy_the_operator_names(home):
    with serve_in_thread(store_url=f"sqlite:///{home / 'platform.db'}", forwarded_allow_ips="127.0.0.1") as handle:
        with httpx.Client(base_url=handle.base_url, timeout=30) as c:
            for i in range(defaults.SIGNIN_MAX_FAILURES):  # each a different key: only the address repeats
                c.post("/signin", data={"key": f"wai_{i:08d}_wrong"}, headers={"X-Forwarded-For": "10.0.0.1"})
            assert c.post("/signin", data={"key": "wai_00000098_wrong"},
                          headers={"X-Forwarded-For": "10.0.0.1"}).status_code == 429
            assert c.post("/signin", data={"key": "wai_00000099_wrong"},
                          headers={"X-Forwarded-For": "10.0.0.2"}).status_code == 401
        # per account: guesses at the owner's key prefix from many addresses are limited; the owner's key is not
        _acct, key = handle.store.create_account("owner")
        prefix = key[: defaults.API_KEY_PREFIX_CHARS]
        with httpx.Client(base_url=handle.base_url, timeout=30) as c:
            codes = [c.post("/signin", data={"key": f"{prefix}guess{i}"},
                            headers={"X-Forwarded-For": f"10.1.{i}.1"}).status_code
                     for i in range(defaults.SIGNIN_MAX_FAILURES + 1)]
            assert codes == [401] * defaults.SIGNIN_MAX_FAILURES + [429], codes
            assert c.post("/signin", data={"key": key}, headers={"X-Forwarded-For": "10.1.99.1"},
                          follow_redirects=False).status_code == 303


# --------------------------------------------------------------------------- 5. the smaller items


def test_a_launch_names_its_method_and_only_the_callers_datasets_and_runs(home):
    with _two_accounts(f"sqlite:///{home / 'platform.db'}") as (handle, (_a, a), (_b, b)):
        mine = a.post(f"{API}/datasets", json={"name": "a's", "rows": [{"x": 1}]}).json()
        theirs = b.post(f"{API}/datasets", json={"name": "b's", "rows": [{"x": 1}]}).json()
        their_run = b.post(f"{API}/runs", json={"name": "b's", "status": "done"}).json()
        other = a.post(f"{API}/runs", json={"name": "a's other", "status": "done"}).json()
        other_adapter = _fake_adapter(other["id"])
        cases = [
            ({"base_model": KIT, "dataset": mine["id"]}, "does not name this launch's kind='sft'"),
            ({"method": "sft", "base_model": KIT, "dataset": theirs["id"]}, "is not a dataset of this account"),
            ({"method": "sft", "base_model": KIT, "dataset": mine["id"], "holdout": theirs["id"]},
             "holdout="),
            ({"method": "sft", "base_model": KIT, "dataset": mine["id"], "init_from": their_run["id"]},
             "is not a run of this account"),
            ({"method": "sft", "base_model": str(other_adapter), "dataset": mine["id"]},
             "not a run's adapter folder"),
        ]
        for spec, said in cases:
            run = a.post(f"{API}/runs", json={"name": "launch"}).json()
            refused = a.post(f"{API}/jobs/launch", json={"run_id": run["id"], "kind": "sft", "spec": spec})
            assert refused.status_code == 422 and said in refused.text, (spec, refused.text)
        assert a.get(f"{API}/jobs").json()["jobs"] == []
        model = a.post(f"{API}/models", json={"name": "on an adapter", "baseModel": str(other_adapter)})
        assert model.status_code == 422 and "not a run's adapter folder" in model.text


_SLOW_BACKUP = """
import os, sqlite3, sys, time
from whileai.platform.store import migrate

class Slow(sqlite3.Connection):
    def backup(self, target, **kwargs):  # the same copy, a page at a time, so a kill lands in the middle of it
        return super().backup(target, pages=1, progress=lambda *a: time.sleep(0.002))

class Sqlite:
    def __getattr__(self, name):
        return getattr(sqlite3, name)
    def connect(self, *args, **kwargs):
        return sqlite3.connect(*args, factory=Slow, **kwargs)

migrate.sqlite3 = Sqlite()
from whileai.platform.server import upgrade_main
sys.exit(upgrade_main(["--store-url", sys.argv[1]]))
"""


def test_a_kill_during_the_pre_upgrade_copy_leaves_no_backup_named_like_a_whole_one(tmp_path):
    import shutil

    fixtures = ROOT / "tests" / "fixtures"
    path = tmp_path / "legacy.db"
    shutil.copy(fixtures / "legacy_6c8f21a.db", path)
    with sqlite3.connect(path) as conn:  # enough pages that the copy takes a while
        conn.executemany("INSERT INTO points (run_id, step, ts, metrics) VALUES (?, ?, ?, ?)",
                         [("run_pad", i, 0.0, "x" * 2000) for i in range(1500)])
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_BACKUP, f"sqlite:///{path}"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        _wait_for(lambda: any(p.stat().st_size > 100_000 for p in tmp_path.glob("*legacy.db.bak-*")), 60,
                  "the copy to be under way")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    named = list(tmp_path.glob("legacy.db.bak-*"))
    assert named == [], f"a half copy is named like a backup: {named}"
    assert list(tmp_path.glob(".legacy.db.bak-*.partial-*"))  # the half copy is there, named as one
    from whileai.__main__ import main

    assert main(["platform", "upgrade", "--store-url", f"sqlite:///{path}"]) == 0  # a re-run completes
    (backup,) = tmp_path.glob("legacy.db.bak-*")
    with sqlite3.connect(backup) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM points WHERE run_id = 'run_pad'").fetchone()[0] == 1500
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert not list(tmp_path.glob(".legacy.db.bak-*"))  # the killed copy's leftover went with the re-run


def test_a_saved_adapter_is_the_owners_only(tmp_path):
    from peft import get_peft_model

    from whileai.jobs import _loading
    from whileai.kit._base import tiny_model_dir
    from whileai.kit import load_base

    model, tokenizer = load_base(str(tiny_model_dir()))
    model = get_peft_model(model, _loading.lora_config(read_spec({"method": "sft", "lora_rank": 2, "lora_alpha": 4})))
    saved = _loading.save_adapter(model, tokenizer, tmp_path / "adapters" / "run_0123456789abcdef")
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in [saved, *saved.rglob("*")]}
    assert modes[saved.name] == 0o700 and "adapter_model.safetensors" in modes
    assert all(mode == 0o600 for name, mode in modes.items() if name != saved.name), modes
