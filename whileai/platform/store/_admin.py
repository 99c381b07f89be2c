"""Operator actions on a whole account: its page sessions, and deleting it with everything it owns.

Plain functions whose first argument, ``store``, is the :class:`~whileai.platform.store.Store`
facade that binds them as its methods (``python -m whileai accounts`` calls them).
"""

from __future__ import annotations

import time
from typing import Any, cast

from sqlalchemy import Delete, delete, func, select
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Session

from whileai.platform.store.tables import (
    Account,
    ApiKey,
    Dataset,
    Job,
    JobKey,
    Point,
    PointBatch,
    Run,
    RunMetricNames,
    ServedModel,
    Setting,
    _not_found,
)
from whileai.platform.store.sessions import PageToken
from whileai.platform.store._erase import erase_deleted
from whileai.platform.store._runs import retire_run_ids
from whileai.platform.store._accounts import KEY_TOMBSTONE_PREFIX

__all__ = ["count_sessions", "end_sessions", "delete_account"]

#: the Setting rows tied to an account or its jobs (see _accounts, _jobs)
_LOCAL_ACCOUNT_SETTING = "local_account_id"
_JOB_LEASE_PREFIX = "job_lease:"


def _gone(s: Session, statement: Delete) -> int:
    """Run a DELETE; how many rows it removed."""
    return cast(CursorResult[Any], s.execute(statement)).rowcount or 0


def count_sessions(store: Any, account_id: str) -> dict[str, int]:
    """The account's live page sessions and unspent one-time sign-in links: ``{"sessions", "links"}``."""

    def work(s: Session) -> dict[str, int]:
        if s.get(Account, account_id) is None:
            raise _not_found("account", account_id)
        rows = dict(s.execute(select(PageToken.kind, func.count()).where(
            PageToken.account_id == account_id, PageToken.expires_at > time.time()).group_by(PageToken.kind)).all())
        return {"sessions": int(rows.get("session", 0)), "links": int(rows.get("link", 0))}

    return store._tx(work, write=False)


def end_sessions(store: Any, account_id: str) -> int:
    """End every page session and one-time sign-in link of the account; how many ended (expired ones included)."""

    def work(s: Session) -> int:
        if s.get(Account, account_id) is None:
            raise _not_found("account", account_id)
        return _gone(s, delete(PageToken).where(PageToken.account_id == account_id))

    return store._tx(work)


def delete_account(store: Any, account_id: str, removed: dict[str, list[str]] | None = None) -> dict[str, int]:
    """Delete the account and everything it owns, in one transaction; how many rows of each kind went.

    Its keys, job keys, sessions and links, runs with their points and metric
    names, datasets, registered models and jobs. Its run ids are retired (a
    tombstone each, holding no trace of the account), so none can be claimed by
    another account. Deleting the local account also forgets it as the store's
    local account (the next ``python -m whileai platform`` makes a new one).
    Files are the caller's: ``removed``, when given, is filled with the ``runs``
    and ``jobs`` ids that went, whose adapters and job folders the launcher's
    ``remove_run_files`` deletes.
    """

    def work(s: Session) -> dict[str, int]:
        if s.get(Account, account_id) is None:
            raise _not_found("account", account_id)
        runs = select(Run.id).where(Run.account_id == account_id)
        run_ids = list(s.scalars(runs))
        jobs = [j for (j,) in s.execute(select(Job.id).where(Job.account_id == account_id))]
        if removed is not None:
            removed.update(runs=run_ids, jobs=jobs)
        retire_run_ids(s, run_ids)
        gone_at = str(time.time())  # its keys are remembered by hash: a client still sending one is told, not retried
        s.add_all(Setting(key=KEY_TOMBSTONE_PREFIX + h, value=gone_at)
                  for h in s.scalars(select(ApiKey.key_hash).where(ApiKey.account_id == account_id)))
        counts = {
            "points": _gone(s, delete(Point).where(Point.run_id.in_(runs))),
            "point_batches": _gone(s, delete(PointBatch).where(PointBatch.run_id.in_(runs))),
            "metric_names": _gone(s, delete(RunMetricNames).where(RunMetricNames.run_id.in_(runs))),
            "runs": _gone(s, delete(Run).where(Run.account_id == account_id)),
            "datasets": _gone(s, delete(Dataset).where(Dataset.account_id == account_id)),
            "models": _gone(s, delete(ServedModel).where(ServedModel.account_id == account_id)),
            "jobs": _gone(s, delete(Job).where(Job.account_id == account_id)),
            "job_keys": _gone(s, delete(JobKey).where(JobKey.account_id == account_id)),
            "sessions": _gone(s, delete(PageToken).where(PageToken.account_id == account_id)),
            "keys": _gone(s, delete(ApiKey).where(ApiKey.account_id == account_id)),
        }
        leases = [f"{_JOB_LEASE_PREFIX}{j}" for j in jobs]
        if leases:
            s.execute(delete(Setting).where(Setting.key.in_(leases)))
        s.execute(delete(Setting).where(Setting.key == _LOCAL_ACCOUNT_SETTING, Setting.value == account_id))
        s.execute(delete(Account).where(Account.id == account_id))
        return counts

    from whileai.core import copies

    done = store._tx(work)
    erase_deleted(store)  # the rows' old bytes out of the SQLite file's write-ahead log
    copies.forget(account_id)  # its report_to copies (W&B, MLflow, trackio) go too
    return done
