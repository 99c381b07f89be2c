"""The HTTP API through a real uvicorn server on a loopback port (and TestClient for a few fast cases)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import httpx
import pytest
from fastapi.testclient import TestClient

from whileai.platform import server as server_module
from whileai.platform.api import create_app
from whileai.platform.server import serve_in_thread
from whileai.platform.store import Store
from whileai.platform import defaults
from whileai.kit import defaults as kit_defaults

API = "/api/v1"
KIT = kit_defaults.KIT_BASE_NAME


@pytest.fixture(scope="module")
def platform(tmp_path_factory):
    db = tmp_path_factory.mktemp("platform") / "platform.db"
    handle = serve_in_thread(store_url=f"sqlite:///{db}")
    yield handle
    handle.stop()


def _client(platform, key):
    return httpx.Client(base_url=platform.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60)


@pytest.fixture(scope="module")
def alice(platform):
    with _client(platform, platform.store.create_account("alice")[1]) as c:
        yield c


@pytest.fixture(scope="module")
def bob(platform):
    with _client(platform, platform.store.create_account("bob")[1]) as c:
        yield c


def _run(client, **fields):
    r = client.post(f"{API}/runs", json=fields)
    assert r.status_code == 201, r.text
    return r.json()


def _points(n, start=0):
    return [{"step": i, "metrics": {"loss": 2.0 / (i + 1), "lr": 1e-4}, "ts": 1000.0 + i} for i in range(start, start + n)]


def _error(r, status):
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type"}
    return body["error"]["message"]


# --------------------------------------------------------------------------- auth and isolation


def test_a_key_is_required(platform, alice):
    assert "Authorization: Bearer" in _error(httpx.get(f"{platform.base_url}{API}/runs"), 401)
    bad = httpx.get(f"{platform.base_url}{API}/runs", headers={"Authorization": "Bearer wai_nope"})
    assert "not valid" in _error(bad, 401)
    assert alice.get(f"{API}/me").json()["name"] == "alice"


def test_a_second_account_cannot_read_list_change_or_delete(platform, alice, bob):
    run = _run(alice, name="private", config={"lr": 0.1})
    rid = run["id"]
    assert alice.post(f"{API}/runs/{rid}/points", json={"batch_id": "b0", "points": _points(4)}).status_code == 200
    ds = alice.post(f"{API}/datasets", json={"name": "mine", "rows": [{"x": 1}]}).json()
    assert alice.post(f"{API}/models", json={"name": "mine", "baseModel": KIT, "adapterRunId": rid}).status_code == 201
    job = platform.store.create_job(alice.get(f"{API}/me").json()["account_id"], run_id=rid, kind="sft")

    attempts = [
        ("GET", f"/runs/{rid}", None),
        ("PATCH", f"/runs/{rid}", {"status": "failed", "summary": {"x": 1}}),
        ("DELETE", f"/runs/{rid}", None),
        ("POST", f"/runs/{rid}/points", {"batch_id": "evil", "points": _points(1)}),
        ("GET", f"/runs/{rid}/points", None),
        ("GET", f"/datasets/{ds['id']}", None),
        ("GET", f"/datasets/{ds['id']}/rows", None),
        ("PATCH", f"/datasets/{ds['id']}", {"split": "train"}),
        ("DELETE", f"/datasets/{ds['id']}", None),
        ("GET", "/models/mine", None),
        ("DELETE", "/models/mine", None),
        ("POST", "/models", {"name": "stolen", "adapterRunId": rid}),
        ("GET", f"/jobs/{job['id']}", None),
        ("PATCH", f"/jobs/{job['id']}", {"heartbeat_at": 1.0}),
        ("POST", f"/runs/{rid}/stop", None),
        ("POST", f"/jobs/{job['id']}/end", {"status": "failed"}),
    ]
    for method, path, body in attempts:
        r = bob.request(method, API + path, json=body)
        assert "not found in this account" in _error(r, 404), (method, path)
        assert "private" not in r.text and "alice" not in r.text
    assert bob.get(f"{API}/runs").json() == {"runs": []}
    assert bob.get(f"{API}/datasets").json() == {"datasets": []}
    assert bob.get(f"{API}/models").json() == {"models": []}
    assert bob.get(f"{API}/jobs").json() == {"jobs": []}
    assert bob.get(f"{API}/runs", params={"name": "private"}).json() == {"runs": []}

    mine = alice.get(f"{API}/runs/{rid}").json()
    assert mine["status"] == "running" and mine["summary"] == {} and len(mine["series"]) == 4
    assert alice.get(f"{API}/datasets/{ds['id']}").json()["split"] is None
    assert alice.get(f"{API}/models/mine").json()["version"] == 1
    assert alice.get(f"{API}/jobs/{job['id']}").json()["status"] == "queued"

    # the run page answers the same way
    page = httpx.get(f"{platform.base_url}/runs/{rid}", headers=bob.headers)
    assert page.status_code == 404 and "private" not in page.text


# --------------------------------------------------------------------------- bad input


NAN_BATCH = b'{"batch_id": "nan", "points": [{"step": 1, "metrics": {"loss": NaN}, "ts": 1.0}]}'
INF_BATCH = b'{"batch_id": "inf", "points": [{"step": 1, "metrics": {"ok": 1.0, "grad_norm": Infinity}}]}'
NEG_INF_BATCH = b'{"batch_id": "ninf", "points": [{"step": 1, "metrics": {"kl": -Infinity}}]}'
HUGE_BATCH = b'{"batch_id": "huge", "points": [{"step": 1, "metrics": {"reward": 1e999}}]}'
JSON = {"Content-Type": "application/json"}

BAD_REQUESTS = [
    # (method, path under the run, body: dict or raw bytes, status, words in the message)
    ("POST", "/points", NAN_BATCH, 422, "'loss' is nan"),
    ("POST", "/points", INF_BATCH, 422, "'grad_norm' is inf"),
    ("POST", "/points", NEG_INF_BATCH, 422, "'kl' is -inf"),
    ("POST", "/points", HUGE_BATCH, 422, "'reward' is inf"),
    ("POST", "/points", {"batch_id": "s", "points": [{"step": 1, "metrics": {"loss": "low"}}]}, 422, "metrics are numbers"),
    ("POST", "/points", {"batch_id": "t", "points": [{"step": "one", "metrics": {}}]}, 422, "step='one'"),
    ("POST", "/points", {"batch_id": "u", "points": {"step": 1}}, 422, "send a list"),
    ("POST", "/points", {"points": _points(2)}, 422, "missing batch_id"),
    ("POST", "/points", {"batch_id": "v", "points": [], "extra": 1}, 422, "unknown fields ['extra']"),
    ("POST", "/points", [1, 2], 422, "send an object"),
    ("POST", "/points", b'{"batch_id": "w", "points": [', 400, "not valid JSON"),
    ("POST", "/points", b"", 400, "empty"),
    ("PATCH", "", {"status": "finished"}, 422, "use one of running, done, failed, stopped"),
    ("PATCH", "", {"status": 1}, 422, "status is 1; send a string"),
    ("PATCH", "", {"step": "ten"}, 422, "step is 'ten'; send a whole number"),
    ("PATCH", "", {"step": -4}, 422, "step=-4"),
    ("PATCH", "", {"summary": "done"}, 422, "summary is 'done'; send a JSON object"),
    ("PATCH", "", b'{"summary": {"eval_loss": NaN}}', 422, "summary.eval_loss is nan"),
    ("PATCH", "", b'{"config": {"lr": 1e400}}', 422, "config.lr is inf"),
    ("PATCH", "", {"stauts": "done"}, 422, "stauts is not a field this route accepts"),
    ("PATCH", "", b'{"status": "done"', 400, "not valid JSON"),
    ("PATCH", "", b"status=done", 400, "not valid JSON"),
]


@pytest.mark.parametrize("method, sub, body, status, words", BAD_REQUESTS, ids=[f"{m}{s}-{w}" for m, s, _, _, w in BAD_REQUESTS])
def test_bad_input_is_refused_clearly_and_changes_nothing(platform, alice, method, sub, body, status, words):
    run = _run(alice, name="steady", summary={"keep": 1})
    alice.post(f"{API}/runs/{run['id']}/points", json={"batch_id": "first", "points": _points(3)})
    before = alice.get(f"{API}/runs/{run['id']}").json()
    kwargs = {"content": body, "headers": JSON} if isinstance(body, bytes) else {"json": body}
    r = alice.request(method, f"{API}/runs/{run['id']}{sub}", **kwargs)
    assert words in _error(r, status)
    after = alice.get(f"{API}/runs/{run['id']}").json()
    assert after == before


def test_unknown_ids_routes_and_query_values(alice):
    missing = "run_0123456789abcdef"
    for method, path in (("GET", f"/runs/{missing}"), ("PATCH", f"/runs/{missing}"), ("DELETE", f"/runs/{missing}")):
        assert missing in _error(alice.request(method, API + path, json={} if method == "PATCH" else None), 404)
    assert missing in _error(alice.post(f"{API}/runs/{missing}/points", json={"batch_id": "a", "points": []}), 404)
    assert "no route GET /api/v1/nothing" in _error(alice.get(f"{API}/nothing"), 404)
    assert "PUT is not accepted" in _error(alice.put(f"{API}/runs"), 405)
    assert "limit is 'many'; send a whole number" in _error(alice.get(f"{API}/runs", params={"limit": "many"}), 422)
    assert "PLATFORM_LIST_LIMIT_MAX" in _error(alice.get(f"{API}/runs", params={"limit": 10**6}), 422)
    assert "use one of running" in _error(alice.get(f"{API}/runs", params={"status": "finished"}), 422)
    assert "name is 5; send a string" in _error(alice.post(f"{API}/runs", json={"name": 5}), 422)
    assert "Content-Type: application/json" in _error(alice.post(f"{API}/runs", content=b'{"name": "x"}'), 415)


def test_oversized_bodies_get_413_before_they_are_read(monkeypatch, tmp_path):
    monkeypatch.setattr(defaults, "PLATFORM_MAX_BODY_BYTES", 2000)
    store = Store(f"sqlite:///{tmp_path / 'p.db'}")
    key = store.create_account()[1]
    client = TestClient(create_app(store), headers={"Authorization": f"Bearer {key}"})
    run = client.post(f"{API}/runs", json={}).json()
    big = {"batch_id": "big", "points": _points(100)}
    message = _error(client.post(f"{API}/runs/{run['id']}/points", json=big), 413)
    assert "PLATFORM_MAX_BODY_BYTES" in message and "several smaller requests" in message

    def chunked():  # no Content-Length: counted as it arrives
        data = json.dumps(big).encode()
        for i in range(0, len(data), 500):
            yield data[i : i + 500]

    assert _error(client.post(f"{API}/runs/{run['id']}/points", content=chunked(), headers=JSON), 413)
    assert client.get(f"{API}/runs/{run['id']}").json()["series"] == []
    small = client.post(f"{API}/runs/{run['id']}/points", json={"batch_id": "ok", "points": _points(2)})
    assert small.json() == {"accepted": 2, "duplicate": False}


# --------------------------------------------------------------------------- runs and points


def test_point_batches_are_stored_once(alice):
    run = _run(alice)
    batch = {"batch_id": "retry-me", "points": _points(10)}
    assert alice.post(f"{API}/runs/{run['id']}/points", json=batch).json() == {"accepted": 10, "duplicate": False}
    assert alice.post(f"{API}/runs/{run['id']}/points", json=batch).json() == {"accepted": 0, "duplicate": True}
    record = alice.get(f"{API}/runs/{run['id']}").json()
    assert len(record["series"]) == 10 and record["step"] == 9
    assert alice.get(f"{API}/runs/{run['id']}/points").json()["points"] == record["series"]


def test_a_long_poll_answers_when_the_run_changes_and_after_its_wait_otherwise(alice, bob, monkeypatch):
    import threading

    run = _run(alice)
    since = run["updated_at"]
    began = time.monotonic()
    unchanged = alice.get(f"{API}/runs/{run['id']}", params={"series": "false", "since": since, "wait": 0.4}).json()
    assert unchanged["updated_at"] == since and time.monotonic() - began >= 0.4
    poster = threading.Timer(0.5, lambda: alice.post(f"{API}/runs/{run['id']}/points",
                                                     json={"batch_id": "late", "points": _points(3)}))
    poster.start()
    began = time.monotonic()
    changed = alice.get(f"{API}/runs/{run['id']}", params={"since": since, "wait": 8}).json()
    took = time.monotonic() - began
    poster.join()
    assert changed["updated_at"] != since and changed["step"] == 2 and len(changed["series"]) == 3
    assert 0.4 < took < 8, took  # held until the points came, not for the whole wait
    monkeypatch.setattr(defaults, "RUN_WAIT_MAX_S", 0.3)  # the server's cap bounds any wait asked for
    began = time.monotonic()
    alice.get(f"{API}/runs/{run['id']}", params={"series": "false", "since": changed["updated_at"], "wait": 600})
    assert time.monotonic() - began < 5
    assert _error(bob.get(f"{API}/runs/{run['id']}", params={"since": since, "wait": 5}), 404)  # scoped as ever
    assert "wait" in _error(alice.get(f"{API}/runs/{run['id']}", params={"since": since, "wait": -1}), 422)


def test_a_client_named_run_is_created_once_and_is_not_another_accounts(alice, bob):
    from whileai.core.ids import new_id

    run_id = new_id("run")
    first = alice.post(f"{API}/runs", json={"id": run_id, "name": "offline"})
    assert first.status_code == 201 and first.json()["id"] == run_id and first.json()["url"].endswith(run_id)
    batch = {"batch_id": "b1", "points": _points(3)}
    assert alice.post(f"{API}/runs/{run_id}/points", json=batch).json()["accepted"] == 3
    again = alice.post(f"{API}/runs", json={"id": run_id, "name": "offline"})
    assert again.status_code == 200 and again.json()["id"] == run_id and again.json()["step"] == 2
    assert "not found" in _error(bob.post(f"{API}/runs", json={"id": run_id}), 404)
    assert "16 lowercase hex digits" in _error(alice.post(f"{API}/runs", json={"id": "run_mine"}), 422)
    assert len(alice.get(f"{API}/runs/{run_id}").json()["series"]) == 3


def test_series_oldest_first_and_record_shape(platform, alice):
    run = _run(alice, name="curve", dataset="ds_x", config={"cmd": "train"})
    assert run["url"] == f"{platform.base_url}/runs/{run['id']}"
    assert set(run) >= {
        "id", "name", "status", "dataset", "after_dataset", "config", "summary", "error", "step",
        "total_steps", "created_at", "updated_at", "finished_at", "url", "cost_usd", "cost_basis",
    }
    alice.post(f"{API}/runs/{run['id']}/points", json={"batch_id": "late", "points": _points(3, start=3)})
    alice.post(f"{API}/runs/{run['id']}/points", json={"batch_id": "early", "points": _points(3)})
    record = alice.get(f"{API}/runs/{run['id']}").json()
    assert [p["step"] for p in record["series"]] == [0, 1, 2, 3, 4, 5]
    assert record["series"][0] == {"step": 0, "ts": 1000.0, "metrics": {"loss": 2.0, "lr": 1e-4}}
    bare = alice.get(f"{API}/runs/{run['id']}", params={"series": "false"}).json()
    assert "series" not in bare and bare["id"] == run["id"]


def test_list_newest_first_with_filters_and_limit(bob):
    ids = [_run(bob, name="listed", dataset=f"ds_{i % 2}")["id"] for i in range(4)]
    bob.patch(f"{API}/runs/{ids[0]}", json={"status": "stopped"})
    listed = bob.get(f"{API}/runs", params={"name": "listed"}).json()["runs"]
    assert [r["id"] for r in listed] == ids[::-1]
    assert [r["id"] for r in bob.get(f"{API}/runs", params={"name": "listed", "limit": 2}).json()["runs"]] == ids[:1:-1]
    assert [r["id"] for r in bob.get(f"{API}/runs", params={"dataset": "ds_1"}).json()["runs"]] == [ids[3], ids[1]]
    assert [r["id"] for r in bob.get(f"{API}/runs", params={"status": "stopped"}).json()["runs"]] == [ids[0]]


def test_patch_merges_summary_and_carries_cost(alice):
    run = _run(alice)
    alice.patch(f"{API}/runs/{run['id']}", json={"summary": {"notes": "first"}, "total_steps": 20})
    done = alice.patch(
        f"{API}/runs/{run['id']}", json={"status": "done", "summary": {"training": {"gpu": "A10G", "seconds": 56}}}
    ).json()
    assert done["summary"] == {"notes": "first", "training": {"gpu": "A10G", "seconds": 56}}
    assert done["status"] == "done" and done["finished_at"] is not None and done["total_steps"] == 20
    assert done["cost_usd"] == 0.02
    assert done["cost_basis"]["text"] == "estimate: A10G at $1.10/h, modal.com/pricing 2026-09-20"
    unknown = alice.patch(f"{API}/runs/{run['id']}", json={"summary": {"training": {"gpu": "Z9", "seconds": 5}}}).json()
    assert unknown["cost_usd"] is None and "no list price" in unknown["cost_basis"]["text"]
    assert unknown["status"] == "done", "a later summary does not reopen the run"


def test_delete_removes_the_run_and_its_points(platform, alice):
    run = _run(alice)
    alice.post(f"{API}/runs/{run['id']}/points", json={"batch_id": "b", "points": _points(5)})
    assert alice.delete(f"{API}/runs/{run['id']}").json() == {"id": run["id"], "deleted": True, "jobs": [], "models": []}
    _error(alice.get(f"{API}/runs/{run['id']}"), 404)
    with platform.store.engine.connect() as conn:
        left = conn.exec_driver_sql("SELECT count(*) FROM points WHERE run_id = ?", (run["id"],)).scalar()
    assert left == 0


@pytest.mark.slow
def test_a_100000_point_batch_is_admitted(alice):
    run = _run(alice)
    points = [{"step": i, "metrics": {f"m{j}": i * 0.001 + j for j in range(10)}, "ts": 1.0 + i} for i in range(100_000)]
    body = json.dumps({"batch_id": "big", "points": points}).encode()
    assert len(body) < defaults.PLATFORM_MAX_BODY_BYTES
    started = time.perf_counter()
    r = alice.post(f"{API}/runs/{run['id']}/points", content=body, headers=JSON)
    took = time.perf_counter() - started
    assert r.json() == {"accepted": 100_000, "duplicate": False}
    print(f"100,000 points over HTTP in {took:.2f} s ({100_000 / took:,.0f} points/s)")
    assert alice.get(f"{API}/runs/{run['id']}", params={"series": "false"}).json()["step"] == 99_999


# --------------------------------------------------------------------------- datasets, models, jobs


def test_datasets_over_http(alice):
    rows = [{"messages": [{"role": "user", "content": "hi"}], "z": 1, "a": 0.1}, {"b": [1, 2], "reward": 1.0}]
    pushed = alice.post(f"{API}/datasets", json={"name": "set", "rows": rows, "split": "train"})
    assert pushed.status_code == 201
    ds = pushed.json()
    again = alice.post(f"{API}/datasets", json={"rows": rows})
    assert again.status_code == 200 and again.json()["id"] == ds["id"]
    raw = alice.get(f"{API}/datasets/{ds['id']}/rows")
    assert raw.json() == {"rows": rows} and raw.text.index('"z"') < raw.text.index('"a"')
    other = alice.post(f"{API}/datasets", json={"rows": rows[:1], "split": "eval", "sibling": ds["id"]}).json()
    patched = alice.patch(f"{API}/datasets/{ds['id']}", json={"sibling": other["id"]}).json()
    assert patched["sibling"] == other["id"] and patched["rows"] == 2
    assert other["id"] in [d["id"] for d in alice.get(f"{API}/datasets").json()["datasets"]]
    assert "rows is required" in _error(alice.post(f"{API}/datasets", json={"name": "empty"}), 422)
    assert "rows[0].reward is nan" in _error(
        alice.post(f"{API}/datasets", content=b'{"rows": [{"reward": NaN}]}', headers=JSON), 422
    )
    assert alice.delete(f"{API}/datasets/{other['id']}").json() == {"id": other["id"], "deleted": True}


def test_models_over_http(platform, alice):
    run = _run(alice, config={"base_model": "someorg/its-own-base"})
    first = alice.post(f"{API}/models", json={"name": "agent", "baseModel": KIT, "adapterRunId": run["id"]})
    assert first.status_code == 201
    assert first.json()["endpoint"] == f"{platform.base_url}/v1" and first.json()["version"] == 1
    second = alice.post(f"{API}/models", json={"name": "agent", "base_model": "someorg/its-own-base",
                                               "adapter_run_id": run["id"]})
    assert second.status_code == 200 and second.json()["version"] == 2  # the run's own base
    assert [m["name"] for m in alice.get(f"{API}/models").json()["models"] if m["name"] == "agent"] == ["agent"]
    assert alice.delete(f"{API}/models/agent").json() == {"name": "agent", "deleted": True}
    _error(alice.get(f"{API}/models/agent"), 404)


def test_the_registry_takes_no_server_path_and_does_not_say_which_exist(platform, alice, tmp_path):
    run = _run(alice)
    real, missing = tmp_path, tmp_path / "no-such-dir"
    messages = []
    for path in (str(real), str(missing)):
        for body in ({"name": "x", "baseModel": KIT, "adapter": path, "adapterRunId": run["id"]},
                     {"name": "x", "baseModel": path}):
            messages.append(_error(alice.post(f"{API}/models", json=body), 422).replace(path, "PATH"))
    assert messages[0] == messages[2] and messages[1] == messages[3], "an existing and a missing path read alike"
    assert "SERVED_BASES" in messages[1] and "adapter" in messages[0]
    assert "adapterRunId" in _error(alice.post(f"{API}/models", json={"name": "x", "baseModel": KIT, "adapter": "/a"}), 422)
    assert "SERVED_BASES" in _error(alice.post(f"{API}/models", json={"name": "x", "baseModel": "someorg/other"}), 422)
    assert "x" not in [m["name"] for m in alice.get(f"{API}/models").json()["models"]]


def test_jobs_are_the_platforms_to_write(platform, alice):
    run = _run(alice)
    assert alice.post(f"{API}/jobs", json={"run_id": run["id"], "kind": "sft", "status": "running",
                                           "pid": 1, "spec": {"log": "/etc/passwd"}}).status_code == 405
    acct = alice.get(f"{API}/me").json()["account_id"]
    job = platform.store.create_job(acct, run_id=run["id"], kind="sft", target="local", spec={"epochs": 1})
    jid = job["id"]
    for body in ({"status": "running"}, {"pid": 42}, {"spec": {"log": "/etc/passwd"}}, {"heartbeat_at": 1.0}):
        r = alice.patch(f"{API}/jobs/{jid}", json=body)
        assert r.status_code in (403, 422), (body, r.text)
    assert "stops it" in _error(alice.patch(f"{API}/jobs/{jid}", json={"heartbeat_at": 1.0}), 403)
    assert "worker" in _error(alice.post(f"{API}/jobs/{jid}/end", json={"status": "done"}), 403)
    assert [j["id"] for j in alice.get(f"{API}/jobs", params={"run_id": run["id"]}).json()["jobs"]] == [jid]
    assert alice.post(f"{API}/runs/{run['id']}/stop").json()["stopped"] is True  # how an account ends a job
    assert alice.get(f"{API}/jobs/{jid}").json()["status"] == "stopped"
    refused = _error(alice.post(f"{API}/jobs/launch", json={"run_id": run["id"], "kind": "sft",
                                                             "spec": {"log": "/etc/passwd", "base_model": KIT}}), 422)
    assert "log" in refused and "platform" in refused
    refused = _error(alice.post(f"{API}/jobs/launch", json={"run_id": run["id"], "kind": "sft",
                                                             "spec": {"base_model": "/etc"}}), 422)
    assert "base_model" in refused


def test_a_job_key_reaches_only_its_job_run_and_datasets_and_dies_with_the_job(platform, alice):
    acct = alice.get(f"{API}/me").json()["account_id"]
    ds = alice.post(f"{API}/datasets", json={"name": "train-rows", "rows": [{"x": 7}]}).json()
    other_ds = alice.post(f"{API}/datasets", json={"name": "other", "rows": [{"x": 8}]}).json()
    run, other_run = _run(alice), _run(alice)
    job = platform.store.create_job(acct, run_id=run["id"], kind="sft", status="running",
                                    spec={"dataset": ds["id"], "holdout": None})
    other_job = platform.store.create_job(acct, run_id=other_run["id"], kind="sft")
    key = platform.store.issue_job_key(acct, job["id"])
    assert platform.store.account_for_key(key) is None, "a job key is not an account key"
    with _client(platform, key) as worker:
        assert worker.get(f"{API}/jobs/{job['id']}").status_code == 200
        assert worker.patch(f"{API}/jobs/{job['id']}", json={"heartbeat_at": 5.0}).json()["heartbeat_at"] == 5.0
        assert worker.get(f"{API}/runs/{run['id']}").status_code == 200
        assert worker.post(f"{API}/runs/{run['id']}/points", json={"batch_id": "w0", "points": _points(2)}).status_code == 200
        assert worker.patch(f"{API}/runs/{run['id']}", json={"summary": {"phase": "train"}}).status_code == 200
        assert worker.get(f"{API}/datasets/{ds['id']}/rows").json() == {"rows": [{"x": 7}]}
        for method, path in (("GET", f"/jobs/{other_job['id']}"), ("GET", f"/runs/{other_run['id']}"),
                             ("PATCH", f"/runs/{other_run['id']}"), ("GET", f"/datasets/{other_ds['id']}/rows"),
                             ("POST", f"/runs/{other_run['id']}/points")):
            assert worker.request(method, API + path, json={}).status_code == 404, path
        for method, path in (("GET", "/runs"), ("GET", "/datasets"), ("GET", "/me"), ("POST", "/runs"),
                             ("DELETE", f"/runs/{run['id']}"), ("POST", f"/runs/{run['id']}/stop"),
                             ("GET", "/models")):
            assert worker.request(method, API + path, json={}).status_code == 403, path
        assert worker.post(f"{API}/jobs/{job['id']}/end", json={"status": "done"}).json()["status"] == "done"
        assert worker.get(f"{API}/jobs/{job['id']}").status_code == 401, "the key died with its job"
    assert platform.store.job_key_scope(key) is None


def test_a_job_key_reads_the_gold_judge_its_spec_names_and_never_writes_it(platform, alice):
    acct = alice.get(f"{API}/me").json()["account_id"]
    run, judge = _run(alice), _run(alice)
    job = platform.store.create_job(acct, run_id=run["id"], kind="grpo", status="running",
                                    spec={"dataset": None, "gold_judge": judge["id"]})
    key = platform.store.issue_job_key(acct, job["id"])
    assert platform.store.job_key_scope(key)["reads"] == (judge["id"],)
    with _client(platform, key) as worker:
        assert worker.get(f"{API}/runs/{judge['id']}").status_code == 200  # the monitor loads the reward model
        for method, path in (("PATCH", f"/runs/{judge['id']}"), ("POST", f"/runs/{judge['id']}/points")):
            assert worker.request(method, API + path, json={}).status_code == 404, path


# --------------------------------------------------------------------------- the run page


def test_run_page_is_a_fixed_shell_and_its_data_carries_what_users_logged_as_json(platform, alice):
    evil = "<script>alert('x')</script>"
    run = _run(alice, name=evil, config={"cmd": evil, evil: 1}, dataset=evil)
    alice.patch(f"{API}/runs/{run['id']}", json={"summary": {evil: evil, "holdout_before": 0.4, "holdout_after": 0.6}})
    alice.post(f"{API}/runs/{run['id']}/points", json={"batch_id": "b", "points": [
        {"step": i, "metrics": {"loss": 1.0 / (i + 1), evil: 1.0}} for i in range(5)
    ]})
    key = alice.headers["Authorization"].split()[1]
    with httpx.Client(base_url=platform.base_url, follow_redirects=True) as browser:
        first = browser.get(f"/runs/{run['id']}")
        assert first.url.path == "/signin" and first.url.params["next"] == f"/runs/{run['id']}"
        signed = browser.post("/signin", data={"key": key, "next": f"/runs/{run['id']}"})
        assert signed.status_code == 200 and signed.url.path == f"/runs/{run['id']}"
        assert key not in str(signed.url) and key not in browser.cookies.get("whileai_session", "")
        page = browser.get(f"/runs/{run['id']}")
        data = browser.get(f"/page-data/runs/{run['id']}")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert evil not in page.text and "alert" not in page.text  # the shell holds nothing a user logged
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
    body = data.json()
    assert body["run"]["name"] == evil and body["headline"][0]["before"] == 0.4 and evil in body["series"]
    assert data.headers["content-type"] == "application/json"


def test_run_page_names_the_held_out_metric_a_run_reports():
    from whileai.platform.pages._views import headline

    assert headline({"holdout_before": 0.1, "holdout_after": 0.5})[0]["label"] == "held-out pass rate"
    rm = headline({"holdout_before": 0.5, "holdout_after": 0.8, "training": {"metric": "pair_accuracy"}})
    assert rm[0]["label"] == "held-out pair accuracy" and rm[0]["better"] == "higher"
    loss = headline({"holdout_loss_before": 2.0, "holdout_loss_after": 1.0})[0]
    assert loss["label"] == "held-out loss" and loss["better"] == "lower" and loss["change"] == -1.0


def test_signin_refuses_bad_keys_and_foreign_redirects_and_the_key_link_is_gone(platform, alice):
    key = alice.headers["Authorization"].split()[1]
    bad = httpx.post(f"{platform.base_url}/signin", data={"key": "wai_wrong"})
    assert bad.status_code == 401 and "not valid" in bad.text and "set-cookie" not in bad.headers
    hop = httpx.post(f"{platform.base_url}/signin", data={"key": key, "next": "//evil.example/x"})
    assert hop.status_code == 303 and hop.headers["location"] == "/runs"
    cookie = hop.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=lax" in cookie and key.lower() not in cookie
    cross = httpx.post(f"{platform.base_url}/signin", data={"key": key}, headers={"Sec-Fetch-Site": "cross-site"})
    assert cross.status_code == 403 and "set-cookie" not in cross.headers
    assert httpx.get(f"{platform.base_url}/login", params={"key": key}).status_code == 404


# --------------------------------------------------------------------------- the server


def test_the_threaded_server_answers_without_nagle_delays(platform):
    """serve_in_thread's socket says TCP, so asyncio turns Nagle off on each accepted connection.

    With proto 0 every response's body waited ~40 ms for the client's delayed ACK
    (measured: 44 ms per request, 1.3 ms with the fix); this checks the cause, not a time.
    """
    import socket

    assert platform._sock.proto == socket.IPPROTO_TCP


def test_stop_and_restart_on_the_same_port_keeps_everything(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    first = serve_in_thread(store_url=url)
    key = first.store.create_account()[1]
    with _client(first, key) as c:
        run = _run(c)
        c.post(f"{API}/runs/{run['id']}/points", json={"batch_id": "1", "points": _points(3)})
    first.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{first.base_url}{API}/me", timeout=2)
    second = serve_in_thread(port=first.port, store_url=url)
    try:
        assert second.base_url == first.base_url
        with _client(second, key) as c:
            c.post(f"{API}/runs/{run['id']}/points", json={"batch_id": "1", "points": _points(3)})
            c.post(f"{API}/runs/{run['id']}/points", json={"batch_id": "2", "points": _points(3, start=3)})
            assert len(c.get(f"{API}/runs/{run['id']}").json()["series"]) == 6
    finally:
        second.stop()


def test_first_start_prints_the_key_once(home, monkeypatch, capsys):
    served = []
    monkeypatch.setattr("uvicorn.run", lambda app, **kw: served.append(kw))
    assert server_module.main(["--port", "9999"]) == 0
    out = capsys.readouterr().out
    key = (home / "local_key").read_text().strip()
    assert key in out and "http://127.0.0.1:9999/signin/once?token=" in out
    assert out.count(key) == 1  # the key once; the sign-in link carries a one-time token, not the key
    from whileai.platform._http import BoundedProtocol

    assert served == [{"host": "127.0.0.1", "port": 9999, "log_level": "info", "access_log": False,
                       "http": BoundedProtocol, "proxy_headers": False, "forwarded_allow_ips": None,
                       "backlog": defaults.PLATFORM_LISTEN_BACKLOG}]
    assert server_module.main([]) == 0
    again = capsys.readouterr().out
    assert key not in again and str(home / "local_key") in again and "/signin/once?token=" in again


_HTTP_WRITER = textwrap.dedent(
    """
    import sys, httpx
    base, key, run_id, batches = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with httpx.Client(base_url=base, headers={"Authorization": "Bearer " + key}, timeout=60) as c:
        for b in range(batches):
            pts = [{"step": b, "metrics": {"loss": 1.0}} for _ in range(50)]
            r = c.post(f"/api/v1/runs/{run_id}/points", json={"batch_id": f"http-{b}", "points": pts})
            assert r.status_code == 200, r.text
    """
)
_STORE_WRITER = textwrap.dedent(
    """
    import sys
    from whileai.platform.store import Store
    store = Store(sys.argv[1])
    account_id = store.account_for_key(sys.argv[2])
    for b in range(int(sys.argv[4])):
        pts = [{"step": b, "metrics": {"loss": 2.0}} for _ in range(50)]
        store.add_points(account_id, sys.argv[3], f"direct-{b}", pts)
        store.update_run(account_id, sys.argv[3], {"summary": {f"direct-{b}": b}})
    """
)


@pytest.mark.slow
def test_processes_writing_one_sqlite_file_lose_nothing(tmp_path):
    """The server, an HTTP client process and a process writing the store directly, all at once."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    handle = serve_in_thread(store_url=url)
    try:
        key = handle.store.create_account()[1]
        with _client(handle, key) as c:
            run = _run(c)
            batches = 15
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
            procs = [
                subprocess.Popen([sys.executable, "-c", code, arg, key, run["id"], str(batches)],
                                 stderr=subprocess.PIPE, text=True, env=env)
                for code, arg in ((_HTTP_WRITER, handle.base_url), (_STORE_WRITER, url))
            ]
            for b in range(batches):  # the test process writes through the server too
                c.patch(f"{API}/runs/{run['id']}", json={"summary": {f"server-{b}": b}, "step": b})
            errors = [p.communicate(timeout=120)[1] for p in procs]
            for p, err in zip(procs, errors):
                assert p.returncode == 0, err
                assert "locked" not in err
            record = c.get(f"{API}/runs/{run['id']}").json()
    finally:
        handle.stop()
    assert len(record["series"]) == 2 * batches * 50
    assert sum(p["metrics"]["loss"] == 2.0 for p in record["series"]) == batches * 50
    assert len(record["summary"]) == 2 * batches, "every summary update from every writer was merged"


def test_job_routes_and_their_settle_on_read_hook_are_installed_once(home):
    """A read of a run settles its jobs once, not twice (the job routes used to be installed two times)."""
    from whileai.platform.api import create_app
    from whileai.platform.store import store_url

    app = create_app(Store(store_url()))
    hooks = [m for m in app.user_middleware if getattr(m.cls, "__name__", "") == "_ReconcileOnRead"]
    assert len(hooks) == 1
    assert "/api/v1/jobs/launch" in app.openapi()["paths"]
