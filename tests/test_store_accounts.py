"""The store's accounts and keys (whileai/platform/store/_accounts.py) on a fresh SQLite store: how a key is made and
kept (its SHA-256 only, its prefix to find it), what it resolves to, how revoking and rotating scope to one account
and end its page sessions, and what a job's key reaches."""

from __future__ import annotations

import hashlib
import time

import pytest
from sqlalchemy import select

from whileai.platform import defaults
from whileai.platform.store import Store, sessions
from whileai.platform.store import _accounts
from whileai.platform.store.tables import ApiKey, JobKey, Setting
from _stores import sqlite_store


@pytest.fixture
def store(tmp_path):
    yield from sqlite_store(tmp_path)


def _rows(store: Store, table) -> list:
    return store._tx(lambda s: list(s.scalars(select(table))), write=False)


def test_a_key_is_issued_once_and_kept_as_its_hash_and_prefix(store):
    account, key = store.create_account("alice")
    assert account.startswith("acct_") and key.startswith("wai_") and len(key) > 4 + defaults.API_KEY_BYTES
    (row,) = _rows(store, ApiKey)
    assert row.account_id == account and row.key_hash == hashlib.sha256(key.encode()).hexdigest()
    assert row.prefix == key[: defaults.API_KEY_PREFIX_CHARS] and row.name is None and row.created_at <= time.time()
    assert store.account_for_key(key) == account
    assert store.get_account(account)["name"] == "alice" and store.create_account()[0] != account
    assert [a["name"] for a in store.list_accounts()] == ["alice", "account"], "no name: 'account'"
    assert store.count_accounts() == 2


def test_a_key_resolves_only_whole_and_only_when_it_is_a_string_of_up_to_200_characters(store):
    account, key = store.create_account("alice")
    for wrong in (None, "", key[:-1], key + "x", key.upper(), 5, ["k"], "wai_" + "x" * 197):
        assert store.account_for_key(wrong) is None, wrong
    same_prefix = key[: defaults.API_KEY_PREFIX_CHARS] + "x" * (len(key) - defaults.API_KEY_PREFIX_CHARS)
    assert store.account_for_key(same_prefix) is None, "the prefix finds the row; the hash decides"
    long_key = "wai_" + "k" * 196
    store._tx(lambda s: s.add(ApiKey(account_id=account, prefix=long_key[:12], key_hash=_accounts.hash_key(long_key),
                                     created_at=1.0)))
    assert store.account_for_key(long_key) == account, "200 characters is still a key"
    assert store.account_for_key(long_key + "k") is None


def test_more_keys_each_with_a_name_and_listed_oldest_first_never_the_key(store):
    account, first = store.create_account("alice")
    second = store.issue_api_key(account, "laptop")
    assert store.account_for_key(first) == store.account_for_key(second) == account
    keys = store.list_keys(account)
    assert [k["name"] for k in keys] == [None, "laptop"] and set(keys[0]) == {"name", "created_at"}
    assert keys[0]["created_at"] <= keys[1]["created_at"]
    assert [a["keys"] for a in store.list_accounts()] == [2]
    for call in (lambda: store.issue_api_key("acct_missing"), lambda: store.list_keys("acct_missing"),
                 lambda: store.rotate_api_key("acct_missing"), lambda: store.get_account("acct_missing")):
        with pytest.raises(Exception, match="acct_missing"):
            call()


def test_revoking_a_key_is_scoped_to_its_account_and_ends_that_accounts_sessions(store):
    alice, a_key = store.create_account("alice")
    bob, b_key = store.create_account("bob")
    a_session, b_session = sessions.create_session(store, alice), sessions.create_session(store, bob)
    assert store.revoke_api_key(bob, a_key) is False, "bob cannot revoke alice's key"
    assert store.account_for_key(a_key) == alice and sessions.account_for_session(store, a_session) == alice
    assert store.revoke_api_key(alice, a_key) is True and store.account_for_key(a_key) is None
    assert sessions.account_for_session(store, a_session) is None, "a revoked key ends its account's sessions"
    assert sessions.account_for_session(store, b_session) == bob and store.account_for_key(b_key) == bob
    assert store.revoke_api_key(alice, a_key) is False, "already gone"


def test_revoking_by_hash_may_keep_the_sessions_and_needs_no_account(store):
    alice, key = store.create_account("alice")
    other = store.issue_api_key(alice)
    session = sessions.create_session(store, alice)
    assert store.revoke_api_key_hash(_accounts.hash_key(key), end_sessions=False) is True
    assert sessions.account_for_session(store, session) == alice and store.account_for_key(other) == alice
    assert store.revoke_api_key_hash(_accounts.hash_key(other), account_id=alice) is True
    assert sessions.account_for_session(store, session) is None
    assert store.revoke_api_key_hash("0" * 64) is False


def test_rotating_revokes_every_older_key_and_session_of_the_account_alone(store):
    alice, first = store.create_account("alice")
    second = store.issue_api_key(alice)
    bob, b_key = store.create_account("bob")
    a_session, b_session = sessions.create_session(store, alice), sessions.create_session(store, bob)
    new = store.rotate_api_key(alice, "rotated")
    assert store.account_for_key(first) is None and store.account_for_key(second) is None
    assert store.account_for_key(new) == alice and [k["name"] for k in store.list_keys(alice)] == ["rotated"]
    assert sessions.account_for_session(store, a_session) is None
    assert sessions.account_for_session(store, b_session) == bob and store.account_for_key(b_key) == bob
    assert store.count_sessions(bob)["sessions"] == 1


def test_a_deleted_accounts_key_is_remembered_by_its_hash(store):
    alice, key = store.create_account("alice")
    assert store.deleted_account_key(key) is False
    store.delete_account(alice)
    assert store.deleted_account_key(key) is True and store.account_for_key(key) is None
    tombstones = [r.key for r in _rows(store, Setting) if r.key.startswith(_accounts.KEY_TOMBSTONE_PREFIX)]
    assert tombstones == ["key_tombstone:" + hashlib.sha256(key.encode()).hexdigest()]
    for wrong in (None, "", 5, key + "x", "k" * 201):
        assert store.deleted_account_key(wrong) is False, wrong
    long_key = "k" * 200
    store._tx(lambda s: s.add(Setting(key=_accounts.KEY_TOMBSTONE_PREFIX + _accounts.hash_key(long_key), value="1")))
    assert store.deleted_account_key(long_key) is True


def test_the_local_account_is_named_in_the_list(store):
    alice, _ = store.create_account("alice")
    assert store.local_account_id() is None
    store._tx(lambda s: s.add(Setting(key="local_account_id", value=alice)))
    bob, _ = store.create_account("bob")
    assert store.local_account_id() == alice
    listed = store.list_accounts()
    assert [(a["account_id"], a["local"], a["keys"]) for a in listed] == [(alice, True, 1), (bob, False, 1)]
    assert set(listed[0]) == {"account_id", "name", "created_at", "keys", "local"}
    store.revoke_api_key(bob, store.rotate_api_key(bob))
    assert [a["keys"] for a in store.list_accounts()] == [1, 0]


def _job(store: Store, account: str, **spec) -> str:
    run = store.create_run(account)
    return store.create_job(account, run_id=run["id"], kind="sft", target="local", spec=spec)["id"]


def test_a_job_key_reaches_its_job_its_datasets_and_the_runs_it_reads_until_the_job_ends(store):
    alice, _ = store.create_account("alice")
    job = _job(store, alice, dataset="ds_1", holdout="ds_2", gold_judge="run_9", other="x")
    key = store.issue_job_key(alice, job)
    assert key.startswith("waijob_") and store.account_for_key(key) is None, "a job's key is no account key"
    (row,) = _rows(store, JobKey)
    assert row.key_hash == _accounts.hash_key(key) and row.prefix == key[: defaults.API_KEY_PREFIX_CHARS]
    run_id = store.get_job(alice, job)["run_id"]
    assert store.job_key_scope(key) == {"account_id": alice, "job_id": job, "run_id": run_id,
                                        "datasets": ("ds_1", "ds_2"), "reads": ("run_9",)}
    for wrong in (None, "", 5, key + "x", key[:-1], "wai_" + key[4:], "waijob_" + "x" * 194):
        assert store.job_key_scope(wrong) is None, wrong
    store.update_job(alice, job, {"status": "done"})
    assert store.job_key_scope(key) is None, "a finished job's key reaches nothing"


def test_a_job_key_reads_only_the_string_names_its_spec_gives(store):
    alice, _ = store.create_account("alice")
    bare = _job(store, alice, dataset=3, holdout=None, gold_judge=["run_1"])
    scope = store.job_key_scope(store.issue_job_key(alice, bare))
    assert (scope["datasets"], scope["reads"]) == ((), ())
    only_holdout = _job(store, alice, holdout="ds_h")
    assert store.job_key_scope(store.issue_job_key(alice, only_holdout))["datasets"] == ("ds_h",)
    listed = store.create_job(alice, kind="sft", target="local", spec=None)["id"]
    assert store.job_key_scope(store.issue_job_key(alice, listed))["datasets"] == ()


def test_a_job_key_is_for_a_job_of_the_account_and_is_revoked_with_its_job(store):
    alice, _ = store.create_account("alice")
    bob, _ = store.create_account("bob")
    job = _job(store, alice)
    with pytest.raises(Exception, match=job):
        store.issue_job_key(bob, job)
    first, second = store.issue_job_key(alice, job), store.issue_job_key(alice, job)
    other = store.issue_job_key(alice, _job(store, alice))
    assert store.revoke_job_keys(job) == 2 and store.revoke_job_keys(job) == 0
    assert store.job_key_scope(first) is None and store.job_key_scope(second) is None
    assert store.job_key_scope(other) is not None


def test_a_key_of_exactly_200_characters_is_read_and_one_longer_is_not(store):
    alice, _ = store.create_account("alice")
    job = _job(store, alice)
    key = "waijob_" + "j" * 193
    store._tx(lambda s: s.add(JobKey(account_id=alice, job_id=job, prefix=key[: defaults.API_KEY_PREFIX_CHARS],
                                     key_hash=_accounts.hash_key(key), created_at=1.0)))
    assert store.job_key_scope(key)["job_id"] == job
    assert store.job_key_scope(key + "j") is None


def test_names_are_strings_of_at_most_200_characters_and_a_missing_account_is_named(store):
    store.create_account("a" * 200)
    for bad, said in (("a" * 201, "name is 201 characters; send at most 200"),
                      (5, "name=5 is not accepted; send a non-empty string")):
        with pytest.raises(Exception) as raised:
            store.create_account(bad)
        assert str(raised.value) == said
    account, _ = store.create_account("alice")
    store.issue_api_key(account, "k" * 200)
    with pytest.raises(Exception) as raised:
        store.issue_api_key(account, "k" * 201)
    assert str(raised.value) == "key name is 201 characters; send at most 200"
    with pytest.raises(Exception) as raised:
        store.rotate_api_key(account, ["laptop"])
    assert str(raised.value) == "key name=['laptop'] is not accepted; send a non-empty string"
    missing = "account 'acct_missing' not found in this account; check the id (list them to see yours)"
    for call in (store.issue_api_key, store.list_keys, store.rotate_api_key, store.get_account):
        with pytest.raises(Exception) as raised:
            call("acct_missing")
        assert str(raised.value) == missing, call
    assert store.get_account(account) == {"account_id": account, "name": "alice",
                                          "created_at": store.list_accounts()[-1]["created_at"]}


def test_a_fresh_store_counts_no_accounts(store):
    assert store.count_accounts() == 0 and store.list_accounts() == [] and store.local_account_id() is None


def test_reads_never_take_the_writer(store):
    alice, key = store.create_account("alice")
    job_key = store.issue_job_key(alice, _job(store, alice))
    flags: list[object] = []
    real = store._tx

    def spy(fn, *, write=True):
        flags.append(write)
        return real(fn, write=write)

    store._tx = spy
    reads = (lambda: store.account_for_key(key), lambda: store.deleted_account_key(key), lambda: store.list_keys(alice),
             lambda: store.get_account(alice), store.count_accounts, store.local_account_id, store.list_accounts,
             lambda: store.job_key_scope(job_key))
    for read in reads:
        flags.clear()
        read()
        assert flags == [False], read


def test_sessions_end_as_of_the_change_and_one_made_after_it_lives(store, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(_accounts.time, "time", lambda: now[0])
    alice, key = store.create_account("alice")
    same_instant = sessions.create_session(store, alice)
    now[0] = 2000.0
    later = sessions.create_session(store, alice)
    now[0] = 1000.0
    store.rotate_api_key(alice)
    now[0] = 1500.0
    assert sessions.account_for_session(store, same_instant) is None, "made at the very instant of the change: ended"
    now[0] = 2500.0
    assert sessions.account_for_session(store, later) == alice, "made after the change: kept"
    ended = store._tx(lambda s: _accounts._end_sessions(s, alice))
    assert ended == 1 and store._tx(lambda s: _accounts._end_sessions(s, alice)) == 0


def test_a_201_character_key_is_never_read_even_when_stored(store):
    alice, _ = store.create_account("alice")
    long_key = "wai_" + "k" * 197
    store._tx(lambda s: s.add(ApiKey(account_id=alice, prefix=long_key[:12], key_hash=_accounts.hash_key(long_key),
                                     created_at=1.0)))
    store._tx(lambda s: s.add(Setting(key=_accounts.KEY_TOMBSTONE_PREFIX + _accounts.hash_key(long_key), value="1")))
    assert store.account_for_key(long_key) is None and store.deleted_account_key(long_key) is False
    job = _job(store, alice)
    long_job = "waijob_" + "j" * 194
    store._tx(lambda s: s.add(JobKey(account_id=alice, job_id=job, prefix=long_job[:12],
                                     key_hash=_accounts.hash_key(long_job), created_at=1.0)))
    assert store.job_key_scope(long_job) is None


def test_a_job_key_must_say_it_is_one_match_its_hash_and_belong_to_its_jobs_account(store):
    alice, _ = store.create_account("alice")
    bob, _ = store.create_account("bob")
    job = _job(store, alice)
    plain = "wai_" + "p" * 40  # an account key's shape, stored as a job's: never read as one
    store._tx(lambda s: s.add(JobKey(account_id=alice, job_id=job, prefix=plain[:12], key_hash=_accounts.hash_key(plain),
                                     created_at=1.0)))
    assert store.job_key_scope(plain) is None
    twin = "waijob_" + "t" * 40
    for owner, text in ((alice, "waijob_" + "t" * 39 + "u"), (alice, twin)):  # one prefix, the wrong hash first
        store._tx(lambda s, owner=owner, text=text: s.add(JobKey(account_id=owner, job_id=job, prefix=twin[:12],
                                                                 key_hash=_accounts.hash_key(text), created_at=1.0)))
    assert store.job_key_scope(twin)["job_id"] == job
    stolen = "waijob_" + "s" * 40  # a key row naming bob for alice's job: it reaches nothing
    store._tx(lambda s: s.add(JobKey(account_id=bob, job_id=job, prefix=stolen[:12], key_hash=_accounts.hash_key(stolen),
                                     created_at=1.0)))
    assert store.job_key_scope(stolen) is None


def test_a_job_with_an_empty_spec_gives_its_key_no_datasets(store):
    from whileai.platform.store.tables import Job

    alice, _ = store.create_account("alice")
    job = _job(store, alice, dataset="ds_1")
    key = store.issue_job_key(alice, job)

    def clear(s):
        s.scalar(select(Job).where(Job.id == job)).spec_json = ""

    store._tx(clear)
    assert store.job_key_scope(key)["datasets"] == () and store.job_key_scope(key)["reads"] == ()


def test_keys_list_oldest_first_and_accounts_made_at_one_instant_by_id(store, monkeypatch):
    now = [2000.0]
    monkeypatch.setattr(_accounts.time, "time", lambda: now[0])
    alice, _ = store.create_account("alice")
    now[0] = 1000.0
    store.issue_api_key(alice, "older")
    assert [k["name"] for k in store.list_keys(alice)] == ["older", None], "by date, not by the order made"
    now[0] = 3000.0
    made = [store.create_account(f"same-{i}")[0] for i in range(6)]
    listed = [a["account_id"] for a in store.list_accounts()]
    assert listed[0] == alice and listed[1:] == sorted(made), "one instant: by id"
