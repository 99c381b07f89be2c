"""The store's accounts and API keys: create an account, issue, revoke and look up keys (stored hashed).

Plain functions whose first argument, ``store``, is the :class:`~whileai.platform.store.Store`
facade that binds them as its methods; every query is scoped to the caller's account.
"""

from __future__ import annotations

import hmac
import json
import secrets
import time
from typing import Any, cast

from sqlalchemy import delete, func, select
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Session

from whileai.platform.store.tables import Account, ApiKey, Job, JobKey, Setting, _check_str, hash_key, _new_id, _not_found
from whileai.platform.store.sessions import PageToken
from whileai.platform.store.records import AccountListing, AccountRecord, JobKeyScope, KeyListing
from whileai.platform.store.values import FINISHED_STATUSES
from whileai.platform import defaults


#: the leading characters of every API key (then API_KEY_BYTES of randomness, URL-safe)
_KEY_PREFIX = "wai_"
#: the leading characters of a job's own key (see issue_job_key): never an account key
_JOB_KEY_PREFIX = "waijob_"
#: the Setting row that names the local account (made once per store by ensure_local_account)
_LOCAL_ACCOUNT_SETTING = "local_account_id"
#: the Setting key that remembers a deleted account's key (by its hash, as stored): ``key_tombstone:<hash>``
KEY_TOMBSTONE_PREFIX = "key_tombstone:"


def create_account(store: Any, name: str | None = None) -> tuple[str, str]:
    """A new account and its first API key: ``(account_id, api_key)``. The key is shown only here."""
    name = _check_str(name, "name", 200) or "account"

    def work(s: Session) -> tuple[str, str]:
        account_id = _new_id("acct")
        s.add(Account(id=account_id, name=name, created_at=time.time()))
        s.flush()
        return account_id, store._issue_key(s, account_id)

    return store._tx(work)


def _issue_key(store: Any, s: Session, account_id: str, name: str | None = None) -> str:
    key = _KEY_PREFIX + secrets.token_urlsafe(defaults.API_KEY_BYTES)
    s.add(
        ApiKey(
            account_id=account_id,
            prefix=key[: defaults.API_KEY_PREFIX_CHARS],
            key_hash=hash_key(key),
            created_at=time.time(),
            name=_check_str(name, "key name", 200),
        )
    )
    return key


def issue_api_key(store: Any, account_id: str, name: str | None = None) -> str:
    """Another API key for an existing account, named ``name`` (the old ones keep working)."""

    def work(s: Session) -> str:
        if s.get(Account, account_id) is None:
            raise _not_found("account", account_id)
        return store._issue_key(s, account_id, name)

    return store._tx(work)


def _end_sessions(s: Session, account_id: str) -> int:
    """End every page session and unspent sign-in link of an account made until now (a key of it changed)."""
    # Session.execute is typed as returning Result; a DELETE's is a CursorResult, which has rowcount
    done = s.execute(delete(PageToken).where(PageToken.account_id == account_id, PageToken.created_at <= time.time()))
    return cast(CursorResult[Any], done).rowcount or 0


def revoke_api_key(store: Any, account_id: str, api_key: str) -> bool:
    """Stop ``api_key`` from authenticating; True when this account had it."""
    return store.revoke_api_key_hash(hash_key(api_key), account_id=account_id)


def revoke_api_key_hash(store: Any, key_hash: str, *, account_id: str | None = None, end_sessions: bool = True) -> bool:
    """Revoke the key whose SHA-256 is ``key_hash``; True when one was removed.

    Every page session and sign-in link of its account made before ends with it,
    unless ``end_sessions`` is False (a machine's key, e.g. an old job's, that no
    person signed in with; a session signed in with that very key still ends).
    """

    def work(s: Session) -> bool:
        q = select(ApiKey.account_id).where(ApiKey.key_hash == key_hash)
        if account_id is not None:
            q = q.where(ApiKey.account_id == account_id)
        owner = s.scalar(q)
        if owner is None:
            return False
        s.execute(delete(ApiKey).where(ApiKey.key_hash == key_hash, ApiKey.account_id == owner))
        if end_sessions:  # a revoked key ends every session of its account, one-time links included
            _end_sessions(s, owner)
        return True

    return store._tx(work)


def account_for_key(store: Any, api_key: str | None) -> str | None:
    """The account id an API key belongs to, or None. Hashes are compared in constant time."""
    if not api_key or not isinstance(api_key, str) or len(api_key) > 200:
        return None
    prefix = api_key[: defaults.API_KEY_PREFIX_CHARS]
    digest = hash_key(api_key)

    def work(s: Session) -> str | None:
        found = None
        for account_id, key_hash in s.execute(
            select(ApiKey.account_id, ApiKey.key_hash).where(ApiKey.prefix == prefix)
        ):
            if hmac.compare_digest(key_hash, digest):
                found = account_id
        return found

    return store._tx(work, write=False)


def deleted_account_key(store: Any, api_key: str | None) -> bool:
    """Whether ``api_key`` was a key of an account since deleted (:func:`_admin.delete_account` keeps its hash)."""
    if not api_key or not isinstance(api_key, str) or len(api_key) > 200:
        return False
    key = KEY_TOMBSTONE_PREFIX + hash_key(api_key)
    return store._tx(lambda s: s.get(Setting, key) is not None, write=False)


def list_keys(store: Any, account_id: str) -> list[KeyListing]:
    """The account's live keys, oldest first: ``{name, created_at}`` (never the key, nor its prefix)."""

    def work(s: Session) -> list[KeyListing]:
        if s.get(Account, account_id) is None:
            raise _not_found("account", account_id)
        rows = s.execute(select(ApiKey.name, ApiKey.created_at).where(ApiKey.account_id == account_id)
                         .order_by(ApiKey.created_at, ApiKey.pk))
        return [{"name": name, "created_at": created_at} for name, created_at in rows]

    return store._tx(work, write=False)


def get_account(store: Any, account_id: str) -> AccountRecord:
    def work(s: Session) -> AccountRecord:
        a = s.get(Account, account_id)
        if a is None:
            raise _not_found("account", account_id)
        return {"account_id": a.id, "name": a.name, "created_at": a.created_at}

    return store._tx(work, write=False)


def count_accounts(store: Any) -> int:
    return store._tx(lambda s: s.scalar(select(func.count()).select_from(Account)) or 0, write=False)


def local_account_id(store: Any) -> str | None:
    """The id of the local account (the one the embedded SDK and a local server share), if made."""
    return store._tx(lambda s: s.scalar(select(Setting.value).where(Setting.key == _LOCAL_ACCOUNT_SETTING)), write=False)


def list_accounts(store: Any) -> list[AccountListing]:
    """Every account, oldest first: ``{account_id, name, created_at, keys, local}`` (``keys``: live account keys)."""

    def work(s: Session) -> list[AccountListing]:
        local = s.scalar(select(Setting.value).where(Setting.key == _LOCAL_ACCOUNT_SETTING))
        counts = dict(s.execute(select(ApiKey.account_id, func.count()).group_by(ApiKey.account_id)).all())
        return [
            {"account_id": a.id, "name": a.name, "created_at": a.created_at, "keys": counts.get(a.id, 0),
             "local": a.id == local}
            for a in s.scalars(select(Account).order_by(Account.created_at, Account.id))
        ]

    return store._tx(work, write=False)


def rotate_api_key(store: Any, account_id: str, name: str | None = None) -> str:
    """A new key (named ``name``) for the account, and every key it had before revoked, in one transaction.

    Every page session and one-time sign-in link of the account made before ends too.
    """

    def work(s: Session) -> str:
        if s.get(Account, account_id) is None:
            raise _not_found("account", account_id)
        s.execute(delete(ApiKey).where(ApiKey.account_id == account_id))
        _end_sessions(s, account_id)
        return store._issue_key(s, account_id, name)

    return store._tx(work)


# --------------------------------------------------------------------------- job keys


def issue_job_key(store: Any, account_id: str, job_id: str) -> str:
    """A key for one job's worker (stored hashed); see :func:`job_key_scope` for what it reaches."""

    def work(s: Session) -> str:
        store._job(s, account_id, job_id)
        key = _JOB_KEY_PREFIX + secrets.token_urlsafe(defaults.API_KEY_BYTES)
        s.add(JobKey(account_id=account_id, job_id=job_id, prefix=key[: defaults.API_KEY_PREFIX_CHARS],
                     key_hash=hash_key(key), created_at=time.time()))
        return key

    return store._tx(work)


def job_key_scope(store: Any, api_key: str | None) -> JobKeyScope | None:
    """What a job key reaches, or None (not a job key, or its job has finished).

    ``{"account_id", "job_id", "run_id", "datasets", "reads"}``: the datasets are the
    ones the platform put on the job's spec (``dataset`` and ``holdout``); ``reads``
    are the other runs the spec names for the job to read (its ``gold_judge``, the
    reward-model run a GRPO job's monitor scores with), which the key may only read.
    """
    if not api_key or not isinstance(api_key, str) or len(api_key) > 200 or not api_key.startswith(_JOB_KEY_PREFIX):
        return None
    digest = hash_key(api_key)

    def work(s: Session) -> JobKeyScope | None:
        for key_hash, job_id, account_id in s.execute(
            select(JobKey.key_hash, JobKey.job_id, JobKey.account_id).where(
                JobKey.prefix == api_key[: defaults.API_KEY_PREFIX_CHARS])
        ):
            if not hmac.compare_digest(key_hash, digest):
                continue
            j = s.scalar(select(Job).where(Job.id == job_id, Job.account_id == account_id))
            if j is None or j.status in FINISHED_STATUSES:
                return None
            spec = json.loads(j.spec_json) if j.spec_json else None
            spec = spec if isinstance(spec, dict) else {}
            datasets = tuple(d for d in (spec.get("dataset"), spec.get("holdout")) if isinstance(d, str))
            reads = tuple(r for r in (spec.get("gold_judge"),) if isinstance(r, str))
            return {"account_id": account_id, "job_id": job_id, "run_id": j.run_id, "datasets": datasets,
                    "reads": reads}
        return None

    return store._tx(work, write=False)


def revoke_job_keys(store: Any, job_id: str) -> int:
    """Revoke every key of a job (its worker's); the number removed."""
    return store._tx(lambda s: s.execute(delete(JobKey).where(JobKey.job_id == job_id)).rowcount or 0)
