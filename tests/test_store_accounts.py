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
