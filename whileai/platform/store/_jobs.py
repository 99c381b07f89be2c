"""The store's jobs: one row per hosted training job, its status, heartbeat, spec and the platform's fields.

Plain functions whose first argument, ``store``, is the :class:`~whileai.platform.store.Store`
facade that binds them as its methods; every query is scoped to the caller's account.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from whileai.core.jobrow import JobPlatform, platform_json, read_platform
from whileai.core.spec import RunSpec, spec_json
from whileai.platform.store.tables import Job, Setting, _check_count, _check_status, _check_str, _check_time, _job_record, _new_id, _not_found
from whileai.platform import defaults
from whileai.platform.store._runs import RunList, take_reopen
from whileai.platform.store.records import JobRecord
from whileai.platform.store.values import FINISHED_STATUSES, JOB_STATUSES, InvalidError, check_json_value


#: the fields a job record takes from its creator and its worker
_JOB_FIELDS = ("run_id", "kind", "target", "status", "pid", "call_id", "spec", "platform", "heartbeat_at", "error")


def _job_values(store: Any, fields: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(fields) - set(_JOB_FIELDS))
    if unknown:
        raise InvalidError(f"unknown job fields {unknown}; a job accepts {', '.join(_JOB_FIELDS)}")
    v: dict[str, Any] = {}
    for key in ("run_id", "kind", "target", "call_id"):
        if key in fields:
            v[key] = _check_str(fields[key], key, 32 if key == "run_id" else 400)
    if "status" in fields:
        v["status"] = _check_status(fields["status"], JOB_STATUSES, "job")
    if "pid" in fields:
        v["pid"] = _check_count(fields["pid"], "pid")
    if "spec" in fields:  # a launch's validated spec (its own JSON), or what a refused resume was sent
        spec = fields["spec"]
        v["spec_json"] = check_json_value(spec_json(spec) if isinstance(spec, RunSpec) else spec, "spec")
    if "platform" in fields:
        v["platform_json"] = _platform_json(fields["platform"])
    if "heartbeat_at" in fields:
        v["heartbeat_at"] = _check_time(fields["heartbeat_at"], "heartbeat_at")
    if "error" in fields:
        v["error"] = _check_str(fields["error"], "error", 100_000)
    return v


def _platform_json(fields: JobPlatform | dict[str, Any]) -> str:
    """The platform's fields of a job as stored: the typed model's JSON, only what is set."""
    try:
        typed = read_platform(fields, "a job")
    except ValueError as exc:
        raise InvalidError(str(exc)) from None
    return check_json_value(platform_json(typed), "platform")


def create_job(store: Any, account_id: str, **fields: Any) -> JobRecord:
    """A job row (status ``queued`` unless given); ``run_id``, when given, must be this account's run."""
    values = store._job_values(fields)
    values.setdefault("status", "queued")

    def work(s: Session) -> JobRecord:
        if values.get("run_id") is not None:
            store._run(s, account_id, values["run_id"])
            take_reopen(store, s, account_id, values["run_id"])  # a resume's run turns running with its job, at once
        now = time.time()
        finished = now if values["status"] in FINISHED_STATUSES else None
        j = Job(id=_new_id("job"), account_id=account_id, created_at=now, updated_at=now, finished_at=finished, **values)
        s.add(j)
        s.flush()
        return _job_record(j)

    return store._tx(work)


def _job(store: Any, s: Session, account_id: str, job_id: Any) -> Job:
    j = s.scalar(select(Job).where(Job.id == job_id, Job.account_id == account_id)) if isinstance(job_id, str) else None
    if j is None:
        raise _not_found("job", job_id)
    return j


def get_job(store: Any, account_id: str, job_id: str) -> JobRecord:
    return store._tx(lambda s: _job_record(store._job(s, account_id, job_id)), write=False)


def update_job(store: Any, account_id: str, job_id: str, changes: dict[str, Any]) -> JobRecord:
    values = store._job_values(changes)

    def work(s: Session) -> JobRecord:
        j = store._job(s, account_id, job_id)
        if values.get("run_id") is not None:
            store._run(s, account_id, values["run_id"])
        now = time.time()
        if "status" in values and values["status"] != j.status:
            j.finished_at = now if values["status"] in FINISHED_STATUSES else None
        for k, v in values.items():
            setattr(j, k, v)
        j.updated_at = now
        s.flush()
        return _job_record(j)

    return store._tx(work)


def list_jobs(
    store, account_id: str, *, status: str | None = None, run_id: str | None = None, limit: int | None = None
) -> RunList[JobRecord]:
    """The account's jobs, newest first, filtered by status and/or run id."""
    if status is not None:
        _check_status(status, JOB_STATUSES, "job")
    q = select(Job).where(Job.account_id == account_id)
    if status is not None:
        q = q.where(Job.status == status)
    if run_id is not None:
        q = q.where(Job.run_id == run_id)
    q = q.order_by(Job.pk.desc()).limit(store._limit(limit))

    def work(s: Session) -> RunList[JobRecord]:
        out: RunList[JobRecord] = RunList()
        budget = defaults.PLATFORM_LIST_MAX_BYTES  # a list is a menu: its answer is bounded in bytes, as runs'
        for j in s.scalars(q.execution_options(yield_per=50)):
            budget -= len(j.spec_json or "") + len(j.platform_json or "") + len(j.error or "") + 1000
            if budget < 0 and out:
                out.truncated = True
                break
            out.append(_job_record(j))
        return out

    return store._tx(work, write=False)


# --------------------------------------------------------------------------- leases

#: the Setting rows that hold job leases: ``job_lease:<job_id>`` -> ``"<holder> <until>"``
_LEASE_SETTING = "job_lease:"


def lease_job(store: Any, account_id: str, job_id: str, holder: str, seconds: float) -> bool:
    """Take the job's lease for ``seconds`` unless another holder's lease is live; True when taken.

    One reader at a time settles a job (a Modal job's progress is replayed
    exactly once). A compare-and-set on one row of ``settings``: a primary key,
    so of two writers that find no lease one inserts and the other fails, and
    on PostgreSQL an existing row is locked while it is read. It holds across
    processes on SQLite and PostgreSQL alike.
    """
    lease_key = f"{_LEASE_SETTING}{job_id}"

    def work(s: Session) -> bool:
        store._job(s, account_id, job_id)
        q = select(Setting).where(Setting.key == lease_key)
        if not store._sqlite:
            q = q.with_for_update()
        row = s.scalar(q)
        now = time.time()
        if row is not None:
            other, _, until = row.value.partition(" ")
            if other != holder and float(until or 0) > now:
                return False
            row.value = f"{holder} {now + seconds!r}"
        else:
            s.add(Setting(key=lease_key, value=f"{holder} {now + seconds!r}"))
        s.flush()
        return True

    try:
        return store._tx(work)
    except IntegrityError:  # another reader inserted its lease first
        return False


def release_job(store: Any, job_id: str, holder: str) -> None:
    """Give the lease back (only ``holder``'s own lease is removed)."""
    lease_key = f"{_LEASE_SETTING}{job_id}"
    store._tx(lambda s: s.execute(delete(Setting).where(
        Setting.key == lease_key, Setting.value.startswith(f"{holder} "))))
