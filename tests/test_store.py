"""The platform store against real databases: a SQLite file and a PostgreSQL server.

PostgreSQL comes from WHILEAI_TEST_POSTGRES_URL (default: trust auth on
127.0.0.1:5432). The session creates its own uniquely named database and drops
it at the end. Without a server these tests skip, unless WHILEAI_REQUIRE_POSTGRES=1
(as in CI), where they fail.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
import subprocess
import sys
import textwrap

import pytest
import sqlalchemy as sa

from whileai.platform.store import (
    InvalidError,
    NotFoundError,
    Store,
    ensure_local_account,
    local_key_path,
    run_cost,
    store_url,
)
from whileai.core import defaults as core_defaults
from whileai.platform import defaults as platform_defaults

PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@pytest.fixture(scope="session")
def postgres_url():
    """A fresh PostgreSQL database for this test session, dropped at the end."""
    base = os.environ.get("WHILEAI_TEST_POSTGRES_URL") or PG_DEFAULT
    required = os.environ.get("WHILEAI_REQUIRE_POSTGRES") == "1"
    url = sa.engine.make_url(base)
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 3})
    name = f"whileai_test_{secrets.token_hex(6)}"
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # noqa: BLE001 - any failure to reach the server means "no PostgreSQL here"
        admin.dispose()
        reason = (
            f"PostgreSQL not reachable at {url.render_as_string(hide_password=True)} ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:160]}); set WHILEAI_TEST_POSTGRES_URL to a server with trust auth"
        )
        if required:
            pytest.fail(f"{reason}. WHILEAI_REQUIRE_POSTGRES=1, so this fails instead of skipping")
        pytest.skip(reason)
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request, tmp_path):
    if request.param == "sqlite":
        s = Store(f"sqlite:///{tmp_path / 'platform.db'}")
    else:
        s = Store(request.getfixturevalue("postgres_url"))
    yield s
    s.close()


@pytest.fixture
def acct(store):
    return store.create_account("first")[0]


@pytest.fixture
def other(store):
    return store.create_account("second")[0]


def _points(n, start=0, ts0=1000.0):
    return [{"step": i, "metrics": {"loss": 1.0 / (i + 1), "lr": 1e-4}, "ts": ts0 + i} for i in range(start, start + n)]


# --------------------------------------------------------------------------- accounts and keys


def test_keys_are_hashed_at_rest_and_resolve_to_their_account(store):
    account_id, key = store.create_account("me")
    assert key.startswith("wai_") and len(key) > 40
    assert store.account_for_key(key) == account_id
    assert store.account_for_key(key + "x") is None
    assert store.account_for_key(key[:-1]) is None
    assert store.account_for_key("") is None and store.account_for_key(None) is None
    with store.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT prefix, key_hash FROM api_keys WHERE account_id = :a"), {"a": account_id}).all()
    assert rows == [(key[: platform_defaults.API_KEY_PREFIX_CHARS], hashlib.sha256(key.encode()).hexdigest())]
    second = store.issue_api_key(account_id)
    assert second != key and store.account_for_key(second) == account_id == store.account_for_key(key)
    assert store.get_account(account_id)["name"] == "me"
    other_id = store.create_account("other")[0]
    assert store.revoke_api_key(other_id, second) is False, "only the key's own account revokes it"
    assert store.revoke_api_key(account_id, second) is True
    assert store.account_for_key(second) is None and store.account_for_key(key) == account_id


# --------------------------------------------------------------------------- runs


def test_run_lifecycle(store, acct):
    run = store.create_run(acct, name="sft", dataset="ds_1", config={"lr": 1e-4, "cmd": ["train", "--x"]})
    assert run["id"].startswith("run_") and len(run["id"]) == 20
    assert run["status"] == "running" and run["finished_at"] is None and run["step"] == 0
    assert run["config"] == {"lr": 1e-4, "cmd": ["train", "--x"]} and run["summary"] == {}

    store.update_run(acct, run["id"], {"summary": {"a": 1, "b": {"x": 1}}, "total_steps": 10})
    done = store.update_run(acct, run["id"], {"summary": {"b": 2, "c": None}, "status": "done", "step": 10})
    assert done["summary"] == {"a": 1, "b": 2, "c": None}, "merged key by key"
    assert done["status"] == "done" and done["finished_at"] is not None and done["total_steps"] == 10

    # sending the summary again after finish keeps the status (a correction)
    again = store.update_run(acct, run["id"], {"summary": {"holdout_before": 0.4, "holdout_after": 0.6}})
    assert again["status"] == "done" and again["summary"]["a"] == 1 and again["summary"]["holdout_after"] == 0.6


def test_a_run_named_by_its_client_is_made_once_and_only_in_its_account(store, acct, other):
    from whileai.core.ids import new_id

    run_id = new_id("run")
    made, created = store.ensure_run(acct, run_id, name="offline", config={"lr": 0.1})
    assert created and made["id"] == run_id and made["name"] == "offline" and made["status"] == "running"
    store.update_run(acct, run_id, {"status": "done", "summary": {"best": 1}})
    again, created = store.ensure_run(acct, run_id, name="offline", config={"lr": 0.1})
    assert not created and again["status"] == "done" and again["summary"] == {"best": 1}, "a resent create changes nothing"
    assert store.create_run(acct, id=run_id)["id"] == run_id
    with pytest.raises(NotFoundError, match=run_id):  # another account's id reads as missing
        store.ensure_run(other, run_id, name="mine now")
    assert store.get_run(acct, run_id, series=False)["name"] == "offline"
    assert [r["id"] for r in store.list_runs(other)] == []
    for bad in ("run_xyz", "ds_" + run_id[4:], run_id.upper(), run_id + "0", 7, None):
        with pytest.raises(InvalidError, match="16 lowercase hex digits"):
            store.ensure_run(acct, bad)
    with pytest.raises(InvalidError, match="config"):  # the fields are checked as for any new run
        store.ensure_run(acct, new_id("run"), config={"lr": float("nan")})


def test_config_is_kept_as_given_json(store, acct):
    for config in (None, [1, "two", {"3": 4.5}], "just text", 7, {"nested": {"deep": [True, None]}}, {"seed": 2**70}):
        assert store.get_run(acct, store.create_run(acct, config=config)["id"])["config"] == config


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"status": "finished"}, "running, done, failed, stopped"),
        ({"status": 3}, "not accepted"),
        ({"step": -1}, "whole number"),
        ({"step": 1.5}, "whole number"),
        ({"total_steps": "ten"}, "whole number"),
        ({"summary": {"loss": float("nan")}}, "summary.loss"),
        ({"summary": [1, 2]}, "object"),
        ({"config": {"lr": float("inf")}}, "config.lr"),
        ({"colour": "red"}, "unknown run fields"),
    ],
)
def test_bad_run_updates_change_nothing(store, acct, changes, words):
    run = store.create_run(acct, name="r", summary={"keep": 1})
    with pytest.raises(InvalidError, match=words):
        store.update_run(acct, run["id"], {"name": "changed", **changes})
    after = store.get_run(acct, run["id"], series=False)
    assert after["name"] == "r" and after["summary"] == {"keep": 1} and after["status"] == "running"


def test_list_runs_newest_first_with_filters_and_limit(store, acct, other):
    ids = [store.create_run(acct, name=f"r{i}", dataset="ds_a" if i % 2 else "ds_b")["id"] for i in range(5)]
    store.create_run(other, name="r0")
    store.update_run(acct, ids[1], {"status": "failed"})
    assert [r["id"] for r in store.list_runs(acct)] == ids[::-1]
    assert [r["id"] for r in store.list_runs(acct, limit=2)] == ids[:2:-1][:2]
    assert [r["id"] for r in store.list_runs(acct, dataset="ds_a")] == [ids[3], ids[1]]
    assert [r["id"] for r in store.list_runs(acct, status="failed")] == [ids[1]]
    assert [r["id"] for r in store.list_runs(acct, name="r0")] == [ids[0]]
    with pytest.raises(InvalidError, match="limit"):
        store.list_runs(acct, limit=0)
    with pytest.raises(InvalidError, match="running, done"):
        store.list_runs(acct, status="finished")


def test_delete_run_removes_its_points(store, acct):
    run = store.create_run(acct)
    store.add_points(acct, run["id"], "b0", _points(50))
    assert store.delete_run(acct, run["id"]) == {"id": run["id"], "deleted": True, "jobs": [], "models": []}
    with pytest.raises(NotFoundError):
        store.get_run(acct, run["id"])
    with store.engine.connect() as conn:
        left = conn.execute(sa.text("SELECT count(*) FROM points WHERE run_id = :r"), {"r": run["id"]}).scalar()
        batches = conn.execute(sa.text("SELECT count(*) FROM point_batches WHERE run_id = :r"), {"r": run["id"]}).scalar()
    assert left == 0 and batches == 0


# --------------------------------------------------------------------------- points


def test_point_batches_are_idempotent_and_read_oldest_first(store, acct):
    run = store.create_run(acct)
    assert store.add_points(acct, run["id"], "b1", _points(3, start=3, ts0=2000)) == {"accepted": 3, "duplicate": False}
    assert store.add_points(acct, run["id"], "b0", _points(3, ts0=1000)) == {"accepted": 3, "duplicate": False}
    assert store.add_points(acct, run["id"], "b1", _points(3, start=3, ts0=2000)) == {"accepted": 0, "duplicate": True}
    series = store.get_run(acct, run["id"])["series"]
    assert [p["step"] for p in series] == [0, 1, 2, 3, 4, 5], "oldest first by ts, not by arrival"
    assert series[0] == {"step": 0, "ts": 1000.0, "metrics": {"loss": 1.0, "lr": 1e-4}}
    assert store.get_run(acct, run["id"])["step"] == 5, "the run's step follows the largest logged step"
    # the same batch id on another run is another batch
    second = store.create_run(acct)
    assert store.add_points(acct, second["id"], "b1", _points(2))["accepted"] == 2


def test_points_without_step_or_ts_and_with_int_values(store, acct):
    run = store.create_run(acct)
    store.add_points(acct, run["id"], "b", [{"metrics": {"tokens": 12, "half": 0.5}}, {"step": None, "metrics": {}}])
    series = store.get_run(acct, run["id"])["series"]
    assert series[0]["step"] is None and series[0]["metrics"] == {"tokens": 12, "half": 0.5}
    assert type(series[0]["metrics"]["tokens"]) is int
    assert isinstance(series[0]["ts"], float) and series[1]["metrics"] == {}


@pytest.mark.parametrize(
    "bad, words",
    [
        ({"step": 1, "metrics": {"loss": float("nan")}}, "'loss' is nan"),
        ({"step": 1, "metrics": {"loss": float("inf")}}, "'loss' is inf"),
        ({"step": 1, "metrics": {"loss": float("-inf")}}, "'loss' is -inf"),
        ({"step": 1, "metrics": {"loss": "0.5"}}, "metrics are numbers"),
        ({"step": 1, "metrics": {"ok": True}}, "metrics are numbers"),
        ({"step": 1, "metrics": {"loss": None}}, "metrics are numbers"),
        ({"step": 1, "metrics": [0.5]}, "metric name to number"),
        ({"step": -1, "metrics": {"loss": 1.0}}, "step=-1"),
        ({"step": "3", "metrics": {"loss": 1.0}}, "step='3'"),
        ({"step": 1, "metrics": {"loss": 1.0}, "ts": "now"}, "ts='now'"),
        ({"step": 1, "metrics": {"loss": 1.0}, "colour": 1}, "unknown fields"),
        ({"step": 1, "metrics": {"x" * 300: 1.0}}, "metric name"),
        ({"step": 1, "metrics": {"": 1.0}}, "metric name"),
        ("loss=0.5", "each point is an object"),
    ],
)
def test_one_bad_point_refuses_the_whole_batch(store, acct, bad, words):
    run = store.create_run(acct)
    with pytest.raises(InvalidError, match=words) as caught:
        store.add_points(acct, run["id"], "b", [*_points(5), bad])
    assert "points[5]" in str(caught.value) and "nothing from this batch was stored" in str(caught.value)
    assert store.count_points(acct, run["id"]) == 0
    # the batch id was not used up: the fixed batch is stored in full
    assert store.add_points(acct, run["id"], "b", _points(5))["accepted"] == 5


def test_batch_id_and_points_shape(store, acct):
    run = store.create_run(acct)
    for batch_id in ("", "   ", None, 5, "x" * 500):
        with pytest.raises(InvalidError, match="batch_id"):
            store.add_points(acct, run["id"], batch_id, _points(1))
    with pytest.raises(InvalidError, match="send a list"):
        store.add_points(acct, run["id"], "b", {"step": 1})


def test_a_huge_finite_sum_is_not_mistaken_for_infinity(store, acct):
    run = store.create_run(acct)
    odd = [{"metrics": {"a": 1e308, "b": 1e308, "c:true": 1}, "ts": 5}, {"step": 2, "metrics": {"x:false": 0.5}}]
    assert store.add_points(acct, run["id"], "b", odd)["accepted"] == 2
    assert [p["ts"] for p in store.get_run(acct, run["id"])["series"]][0] == 5.0


# --------------------------------------------------------------------------- account scoping


def test_another_accounts_ids_read_as_missing(store, acct, other):
    run = store.create_run(acct, name="mine")
    store.add_points(acct, run["id"], "b", _points(3))
    ds, _ = store.create_dataset(acct, [{"x": 1}])
    store.put_model(acct, "m", base_model="base", adapter_run_id=run["id"])
    job = store.create_job(acct, run_id=run["id"], kind="sft")
    theirs, _ = store.create_dataset(other, [{"y": 1}])
    calls = [
        lambda: store.get_run(other, run["id"]),
        lambda: store.update_run(other, run["id"], {"status": "failed"}),
        lambda: store.delete_run(other, run["id"]),
        lambda: store.add_points(other, run["id"], "b2", _points(1)),
        lambda: store.get_dataset(other, ds["id"]),
        lambda: store.dataset_rows(other, ds["id"]),
        lambda: store.update_dataset(other, ds["id"], {"split": "train"}),
        lambda: store.delete_dataset(other, ds["id"]),
        lambda: store.get_model(other, "m"),
        lambda: store.delete_model(other, "m"),
        lambda: store.put_model(other, "m2", adapter_run_id=run["id"]),
        lambda: store.get_job(other, job["id"]),
        lambda: store.update_job(other, job["id"], {"status": "failed"}),
        lambda: store.create_job(other, run_id=run["id"]),
        lambda: store.update_dataset(acct, ds["id"], {"sibling": theirs["id"]}),
    ]
    for call in calls:
        with pytest.raises(NotFoundError, match="not found in this account"):
            call()
    assert store.list_runs(other) == [] and [d["id"] for d in store.list_datasets(other)] == [theirs["id"]]
    assert store.list_models(other) == [] and store.list_jobs(other) == []
    mine = store.get_run(acct, run["id"])
    assert mine["status"] == "running" and len(mine["series"]) == 3
    assert store.get_model(acct, "m")["version"] == 1 and store.get_job(acct, job["id"])["status"] == "queued"
    assert store.get_dataset(acct, ds["id"])["split"] is None


# --------------------------------------------------------------------------- cost


def test_cost_from_summary_or_training():
    cost, basis = run_cost({"gpu": "A10G", "seconds": 56})
    assert cost == 0.02
    assert basis["text"] == "estimate: A10G at $1.10/h, modal.com/pricing 2026-09-20"
    assert basis["usd_per_hour"] == 1.10 and basis["estimate"] is True and basis["seconds"] == 56
    assert basis["source"] == core_defaults.GPU_PRICE_SOURCE and basis["read_on"] == core_defaults.GPU_PRICE_READ_ON
    assert run_cost({"training": {"gpu": "h100", "seconds": 1800}})[0] == round(0.5 * core_defaults.GPU_USD_PER_HOUR["H100"], 2)
    assert run_cost({"training": {"gpu": "H100:2", "seconds": 3600}})[0] == round(2 * core_defaults.GPU_USD_PER_HOUR["H100"], 2)
    unknown_cost, unknown = run_cost({"gpu": "TPU-v9", "seconds": 60})
    assert unknown_cost is None and "no list price" in unknown["text"] and "'TPU-v9'" in unknown["text"]
    assert run_cost({"seconds": 60}) == (None, None) and run_cost({}) == (None, None)
    assert run_cost({"gpu": "A10G", "seconds": "long"}) == (None, None)


def test_run_records_carry_cost(store, acct):
    run = store.create_run(acct)
    assert run["cost_usd"] is None and run["cost_basis"] is None
    record = store.update_run(acct, run["id"], {"summary": {"training": {"gpu": "A10G", "seconds": 56}}})
    assert record["cost_usd"] == 0.02 and record["cost_basis"]["gpu"] == "A10G"
    assert store.list_runs(acct)[0]["cost_usd"] == 0.02


# --------------------------------------------------------------------------- datasets


ROWS = [
    {"messages": [{"role": "user", "content": "Wetter in Zürich? <b>"}], "reward": 1.0, "passed": True},
    {"z": 1, "a": 0.1 + 0.2, "big": 10**20, "nested": {"b": [1, 2.5e-7], "a": None}},
]


def test_dataset_rows_come_back_as_pushed_and_dedupe_per_account(store, acct, other):
    record, created = store.create_dataset(acct, ROWS, name="sample")
    assert created and record["id"].startswith("ds_") and record["rows"] == 2 and record["name"] == "sample"
    rows = store.dataset_rows(acct, record["id"])
    assert rows == ROWS and [list(r) for r in rows] == [list(r) for r in ROWS], "values and key order kept"
    assert rows[1]["a"] == 0.30000000000000004
    again, created_again = store.create_dataset(acct, [dict(r) for r in ROWS], name="other name")
    assert not created_again and again["id"] == record["id"]
    theirs, created_theirs = store.create_dataset(other, ROWS)
    assert created_theirs and theirs["id"] != record["id"]
    assert [d["id"] for d in store.list_datasets(acct)] == [record["id"]]


def test_dataset_split_sibling_and_delete(store, acct):
    train, _ = store.create_dataset(acct, [{"i": 1}], split="train")
    heldout, _ = store.create_dataset(acct, [{"i": 2}], split="eval", sibling=train["id"])
    updated = store.update_dataset(acct, train["id"], {"sibling": heldout["id"]})
    assert updated["sibling"] == heldout["id"] and updated["split"] == "train"
    assert store.get_dataset(acct, heldout["id"])["sibling"] == train["id"]
    assert [d["id"] for d in store.list_datasets(acct)] == [heldout["id"], train["id"]]
    with pytest.raises(NotFoundError):
        store.update_dataset(acct, train["id"], {"sibling": "ds_0000000000000000"})
    assert store.delete_dataset(acct, train["id"]) == {"id": train["id"], "deleted": True}
    with pytest.raises(NotFoundError):
        store.get_dataset(acct, train["id"])


@pytest.mark.parametrize(
    "rows, words",
    [
        ({"a": 1}, "list of row objects"),
        ([{"a": 1}, "text"], r"rows\[1\] is a str"),
        ([{"reward": float("nan")}], r"rows\[0\]\.reward"),
    ],
)
def test_bad_datasets_are_refused(store, acct, rows, words):
    with pytest.raises(InvalidError, match=words):
        store.create_dataset(acct, rows)
    assert store.list_datasets(acct) == []


# --------------------------------------------------------------------------- models and jobs


def test_models_register_bump_and_delete(store, acct):
    run = store.create_run(acct)
    first = store.put_model(acct, "weather", base_model="kit-tiny", adapter="/a/1", adapter_run_id=run["id"])
    assert first["version"] == 1 and first["baseModel"] == "kit-tiny" and first["adapterRunId"] == run["id"]
    second = store.put_model(acct, "weather", base_model="kit-tiny", adapter="/a/2", adapter_run_id=run["id"])
    assert second["version"] == 2 and second["adapter"] == "/a/2"
    assert [m["name"] for m in store.list_models(acct)] == ["weather"]
    assert store.delete_model(acct, "weather") == {"name": "weather", "deleted": True}
    assert store.list_models(acct) == []
    assert store.put_model(acct, "weather", base_model="kit-tiny")["version"] == 1, "served again starts over"
    with pytest.raises(InvalidError, match="baseModel or adapterRunId"):
        store.put_model(acct, "bare")
    with pytest.raises(NotFoundError):
        store.put_model(acct, "ghost", adapter_run_id="run_0000000000000000")


def test_jobs(store, acct):
    run = store.create_run(acct)
    job = store.create_job(acct, run_id=run["id"], kind="sft", target="local", spec={"steps": 3})
    assert job["status"] == "queued" and job["spec"] == {"steps": 3} and job["id"].startswith("job_")
    running = store.update_job(acct, job["id"], {"status": "running", "pid": 1234, "heartbeat_at": 5.0})
    assert running["pid"] == 1234 and running["heartbeat_at"] == 5.0 and running["finished_at"] is None
    failed = store.update_job(acct, job["id"], {"status": "failed", "error": "out of memory"})
    assert failed["finished_at"] is not None and failed["error"] == "out of memory"
    assert [j["id"] for j in store.list_jobs(acct, status="failed")] == [job["id"]]
    assert [j["id"] for j in store.list_jobs(acct, run_id=run["id"])] == [job["id"]]
    with pytest.raises(InvalidError, match="queued, running"):
        store.update_job(acct, job["id"], {"status": "pending"})
    with pytest.raises(InvalidError, match="unknown job fields"):
        store.create_job(acct, colour="red")


def test_a_silent_run_reads_crashed_unless_a_hosted_job_owns_it(store, acct, monkeypatch):
    """Past RUN_STALE_S a running run reads ``crashed``; one with a hosted job is the job's to settle, never crashed."""
    import time

    bare = store.create_run(acct, name="bare")["id"]
    hosted = store.create_run(acct, name="hosted")["id"]
    store.update_job(acct, store.create_job(acct, run_id=hosted, kind="sft", target="local", spec={})["id"],
                     {"status": "running", "heartbeat_at": time.time()})
    assert store.get_run(acct, bare, series=False)["status"] == "running"
    monkeypatch.setenv(platform_defaults.RUN_STALE_ENV, "0.05")
    time.sleep(0.1)  # both writers are now silent past the (shortened) stale time
    assert store.get_run(acct, bare, series=False)["status"] == "crashed"
    assert store.get_run(acct, hosted, series=False)["status"] == "running"
    assert [r["id"] for r in store.list_runs(acct, status="crashed")] == [bare]
    assert [r["id"] for r in store.list_runs(acct, status="running")] == [hosted]
    assert {r["id"]: r["status"] for r in store.list_runs(acct)} == {bare: "crashed", hosted: "running"}


# --------------------------------------------------------------------------- the local account and the URL


def test_local_account_is_made_once_and_its_key_kept_0600(home):
    store = Store()
    assert store.url == f"sqlite:///{home / 'platform.db'}" == store_url()
    account_id, key = ensure_local_account(store)
    path = local_key_path()
    assert path == home / "local_key" and path.read_text().strip() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert store.account_for_key(key) == account_id == store.local_account_id()
    assert ensure_local_account(store) == (account_id, key)
    assert ensure_local_account(Store()) == (account_id, key), "another process on the same root shares it"
    path.unlink()
    again_id, new_key = ensure_local_account(store)
    assert again_id == account_id and new_key != key and path.read_text().strip() == new_key
    assert store.count_accounts() == 1


def test_store_url_setting(home, monkeypatch):
    monkeypatch.setenv(platform_defaults.STORE_URL_ENV, "postgresql+psycopg://u@h/db")
    assert store_url() == "postgresql+psycopg://u@h/db"
    with pytest.raises(ValueError, match="in-memory"):
        Store("sqlite://")


_WRITER = textwrap.dedent(
    """
    import sys
    from whileai.platform.store import Store, ensure_local_account
    store = Store()
    account_id, key = ensure_local_account(store)
    run_id = sys.argv[1]
    if run_id == "-":
        run_id = store.create_run(account_id, name=sys.argv[2])["id"]
    for b in range(int(sys.argv[3])):
        pts = [{"step": b * 20 + i, "metrics": {"loss": 1.0, "w": float(sys.argv[2] == "a")}} for i in range(20)]
        store.add_points(account_id, run_id, sys.argv[2] + str(b), pts)
        store.update_run(account_id, run_id, {"summary": {sys.argv[2] + str(b): b}})
    print(account_id, key, run_id)
    """
)


@pytest.mark.slow
def test_processes_share_a_fresh_sqlite_store_without_lock_errors(home):
    """Three processes start on an empty data root at once: one schema, one local account, every point kept."""
    batches = 15
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, "-", name, str(batches)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "WHILEAI_HOME": str(home)},
        )
        for name in ("a", "b", "c")
    ]
    results = [p.communicate(timeout=120) for p in procs]
    for p, (_out, err) in zip(procs, results):
        assert p.returncode == 0, err
        assert "locked" not in err
    accounts = {out.split()[0] for out, _ in results}
    keys = {out.split()[1] for out, _ in results}
    assert len(accounts) == 1 and len(keys) == 1, "every process found the same local account"
    store = Store()
    account_id = accounts.pop()
    for out, _ in results:
        run = store.get_run(account_id, out.split()[2])
        assert len(run["series"]) == batches * 20 and len(run["summary"]) == batches


def test_a_locked_sqlite_file_is_waited_out_then_reported(tmp_path, monkeypatch):
    """Past the busy timeout, a whole transaction is retried; a file that stays locked ends in StoreBusyError."""
    import sqlite3
    import threading

    from whileai.platform.store import StoreBusyError

    monkeypatch.setattr(platform_defaults, "SQLITE_BUSY_TIMEOUT_S", 0.01)
    monkeypatch.setattr(platform_defaults, "STORE_LOCK_BACKOFF_S", 0.02)
    path = tmp_path / "locked.db"
    store = Store(f"sqlite:///{path}")
    acct = store.create_account()[0]
    run = store.create_run(acct)

    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, lambda: holder.execute("COMMIT"))
    release.start()
    try:
        assert store.add_points(acct, run["id"], "b", _points(3))["accepted"] == 3
    finally:
        release.join()

    monkeypatch.setattr(platform_defaults, "STORE_LOCK_RETRIES", 1)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreBusyError, match="stayed locked"):
            store.add_points(acct, run["id"], "b2", _points(3))
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert store.count_points(acct, run["id"]) == 3
    store.close()


def test_run_and_job_lists_are_bounded_in_bytes(store, acct, monkeypatch):
    """A list answer stops at PLATFORM_LIST_MAX_BYTES and says it was cut, whatever the records hold."""
    from whileai.platform import defaults as platform_defaults

    big = {"note": "x" * 4000}
    for i in range(6):
        run = store.create_run(acct, name=f"r{i}", config=big)
        store.create_job(acct, run_id=run["id"], kind="sft", spec=big)
    assert len(store.list_runs(acct)) == 6 and len(store.list_jobs(acct)) == 6
    monkeypatch.setattr(platform_defaults, "PLATFORM_LIST_MAX_BYTES", 12_000)
    runs, jobs = store.list_runs(acct), store.list_jobs(acct)
    assert 1 <= len(runs) < 6 and runs.truncated
    assert 1 <= len(jobs) < 6 and jobs.truncated
    assert [r["name"] for r in runs] == ["r5", "r4", "r3", "r2", "r1"][: len(runs)]  # newest first, none skipped
