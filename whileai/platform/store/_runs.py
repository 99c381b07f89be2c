"""The store's runs and their points: create, read, list, update and delete runs; ingest point batches exactly once.

Plain functions whose first argument, ``store``, is the :class:`~whileai.platform.store.Store`
facade that binds them as its methods; every query is scoped to the caller's account.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from typing import Any, Generic, TypedDict, TypeVar

from sqlalchemy import Table, and_, delete, func, insert, or_, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from whileai.platform.store.tables import (
    Job,
    JobKey,
    Point,
    PointBatch,
    Run,
    RunMetricNames,
    ServedModel,
    Setting,
    _check_count,
    _check_status,
    _check_str,
    _new_id,
    _not_found,
    run_record,
    run_stale_s,
)
from whileai.platform.store._erase import erase_deleted
from whileai.platform.store.records import PointsAccepted, RunDeleted, RunRecord, SeriesPoint
from whileai.platform.store.values import (
    FINISHED_STATUSES,
    RUN_STOP_MARK,
    RUN_STATUSES,
    InvalidError,
    RetiredIdError,
    canonical_json,
    check_json_value,
    clean_points,
    loads,
)
from whileai.platform import defaults
from whileai.platform._faults import fault_point
from whileai.core.ids import id_shape, is_id
from whileai.core.spec import same_run


#: the Setting key that retires a deleted run's id for good, followed by :func:`tombstone_key`'s hash of the id
#: (its value: when it was deleted): the id itself is not kept, so nothing of the deleted run stays readable
RUN_TOMBSTONE_PREFIX = "run_tombstone:"
#: the Setting key of a job's Modal pull lease (_jobs.py), removed with the job
_JOB_LEASE_PREFIX = "job_lease:"
#: the Setting key of a resume whose job does not exist yet (its value: when it was asked and the summary to merge)
RUN_REOPEN_PREFIX = "run_reopen:"


def tombstone_key(run_id: str) -> str:
    """The Setting key retiring ``run_id``: its SHA-256, so a create under the id is recognised without the store
    keeping the id of a deleted run."""
    return RUN_TOMBSTONE_PREFIX + hashlib.sha256(run_id.encode("utf-8")).hexdigest()


class _RunColumns(TypedDict, total=False):
    """A run's columns as checked: all of them for a new run (:func:`_run_fields`), those sent for an update."""

    name: str | None
    dataset: str | None
    after_dataset: str | None
    kind: str | None
    status: str
    config_json: str
    summary_json: str
    error: str | None
    step: int
    total_steps: int | None


_R = TypeVar("_R")


def retire_run_ids(s: Session, run_ids: list[str]) -> None:
    """Tombstones for deleted runs' ids, so no account can create a run under one again."""
    now = str(time.time())
    keys = {tombstone_key(r) for r in run_ids}
    known = set(s.scalars(select(Setting.key).where(Setting.key.in_(keys))))
    s.add_all(Setting(key=key, value=now) for key in sorted(keys - known))


def _refuse_retired(s: Session, run_id: str) -> None:
    if s.get(Setting, tombstone_key(run_id)) is not None:
        raise RetiredIdError(
            f"id={run_id!r} belonged to a run that was deleted, and a run id is never used again (so nothing of the "
            "deleted run can be reached through it); leave id out and the platform names the run, or make a fresh "
            "one with whileai.core.ids.new_id('run')"
        )


def _run(store: Any, s: Session, account_id: str, run_id: Any, *, lock: bool = False) -> Run:
    q = select(Run).where(Run.id == run_id, Run.account_id == account_id)
    if lock and not store._sqlite:
        q = q.with_for_update()
    r = s.scalar(q) if isinstance(run_id, str) else None
    if r is None:
        raise _not_found("run", run_id)
    return r


def create_run(
    store,
    account_id: str,
    *,
    id: str | None = None,
    name: str | None = None,
    dataset: str | None = None,
    after_dataset: str | None = None,
    config: Any = None,
    kind: str | None = None,
    status: str = "running",
    summary: dict[str, Any] | None = None,
    step: int | None = None,
    total_steps: int | None = None,
) -> RunRecord:
    """A new run (status ``running`` unless told otherwise); ``config`` is any JSON value, kept as given.

    ``id`` names the run instead of a fresh one (see :func:`ensure_run`, which also
    says whether it was made now).
    """
    fields = dict(name=name, dataset=dataset, after_dataset=after_dataset, config=config, kind=kind,
                  status=status, summary=summary, step=step, total_steps=total_steps)
    if id is not None:
        return ensure_run(store, account_id, id, **fields)[0]
    values = _run_fields(store, **fields)

    def work(s: Session) -> RunRecord:
        r = _new_run(s, account_id, _new_id("run"), values)
        return run_record(r)

    return store._tx(work)


def create_run_once(store: Any, account_id: str, **fields: Any) -> tuple[RunRecord, bool]:
    """A new run unless this account has a ``running`` one with the same dataset, kind and spec: ``(record, created)``.

    "The same spec" is :func:`whileai.core.spec.same_run`, the rule ``wai.train`` applies too.

    Guards a training submit that is sent twice: the second answers the run the
    first made. Another config on the same dataset (a sweep over its knobs) is
    another run. The look and the insert are one transaction that writers of the
    same dataset take in turn (SQLite's write lock, a transaction-scoped advisory
    lock on PostgreSQL), so two identical submits at once still make one run.
    """
    values = _run_fields(store, **fields)
    wanted = loads(values["config_json"])

    def work(s: Session) -> tuple[RunRecord, bool]:
        if not store._sqlite:
            digest = hashlib.sha256(f"{account_id}\0{values['dataset']}".encode()).digest()
            s.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": int.from_bytes(digest[:8], "big", signed=True)})
        q = select(Run).where(Run.account_id == account_id, Run.status == "running", Run.dataset == values["dataset"],
                              Run.kind == values["kind"] if values["kind"] is not None else Run.kind.is_(None))
        for found in s.scalars(q.order_by(Run.pk)):
            theirs = loads(found.config_json)
            if isinstance(theirs, dict) and isinstance(wanted, dict) and same_run(theirs, wanted):
                return run_record(found), False
        return run_record(_new_run(s, account_id, _new_id("run"), values)), True

    return store._tx(work)


def ensure_run(store: Any, account_id: str, run_id: Any, **fields: Any) -> tuple[RunRecord, bool]:
    """The run ``run_id`` of this account, made now from ``fields`` when it does not exist: ``(record, created)``.

    For a client that named its run itself (the SDK does, while the platform
    cannot be reached): sending the same create again, after a reply that was
    lost, answers the run already made and changes nothing. An id of another
    account is refused as not found, exactly like reading it would be, and an id
    that is not the platform's shape (whileai.core.ids) is refused as invalid.
    """
    if not is_id(run_id, "run"):
        shown = run_id if isinstance(run_id, str) else type(run_id).__name__
        raise InvalidError(
            f"id={str(shown)[:80]!r} is not a run id; send {id_shape('run')} (the shape whileai.core.ids.new_id "
            "gives), or leave id out and the platform names the run"
        )
    values = _run_fields(store, **fields)

    def existing(s: Session) -> tuple[RunRecord, bool] | None:
        found = s.scalar(select(Run).where(Run.id == run_id))
        if found is None:
            return None
        if found.account_id != account_id:
            raise _not_found("run", run_id)
        return run_record(found), False

    def work(s: Session) -> tuple[RunRecord, bool]:
        found = existing(s)
        if found is not None:
            return found
        _refuse_retired(s, run_id)
        return run_record(_new_run(s, account_id, run_id, values)), True

    try:
        return store._tx(work)
    except IntegrityError:  # a concurrent create of the same id won the race: answer what it made
        found = store._tx(existing, write=False)
        if found is None:  # pragma: no cover - a unique violation on a row that then vanished
            raise
        return found


def _run_fields(
    store: Any,
    *,
    name: str | None = None,
    dataset: str | None = None,
    after_dataset: str | None = None,
    config: Any = None,
    kind: str | None = None,
    status: str = "running",
    summary: dict[str, Any] | None = None,
    step: int | None = None,
    total_steps: int | None = None,
) -> _RunColumns:
    return {
        "name": _check_str(name, "name"),
        "dataset": _check_str(dataset, "dataset"),
        "after_dataset": _check_str(after_dataset, "after_dataset"),
        "kind": _check_str(kind, "kind", 100),
        "status": _check_status(status, RUN_STATUSES, "run"),
        "config_json": _capped(check_json_value(config, "config"), "config", defaults.RUN_CONFIG_MAX_BYTES,
                               "RUN_CONFIG_MAX_BYTES"),
        "summary_json": store._summary_text(summary),
        "step": _check_count(step, "step") or 0,
        "total_steps": _check_count(total_steps, "total_steps"),
    }


def _new_run(s: Session, account_id: str, run_id: str, values: _RunColumns) -> Run:
    now = time.time()
    r = Run(
        id=run_id,
        account_id=account_id,
        created_at=now,
        updated_at=now,
        finished_at=now if values["status"] in FINISHED_STATUSES else None,
        error=None,
        **values,
    )
    s.add(r)
    s.flush()
    return r


def _capped(text: str, field: str, cap: int, name: str) -> str:
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > cap:
        raise InvalidError(f"{field} is {size} bytes as JSON, over the cap of {cap} bytes ({name}); keep large "
                           "values in files or datasets and put their name or path here")
    return text


def _summary_text(summary: Any) -> str:
    if summary is None:
        return "{}"
    if not isinstance(summary, dict):
        raise InvalidError(f"summary is a {type(summary).__name__}; send an object of key to value")
    return _capped(check_json_value(summary, "summary"), "summary", defaults.RUN_SUMMARY_MAX_BYTES,
                   "RUN_SUMMARY_MAX_BYTES")


def get_run(store: Any, account_id: str, run_id: str, *, series: bool = True) -> RunRecord:
    """The run record, plus ``series`` (its points, oldest first) unless ``series=False``."""

    def work(s: Session) -> RunRecord:
        record = run_record(store._run(s, account_id, run_id))
        if series:
            points: list[SeriesPoint] = [
                {"step": step, "ts": ts, "metrics": loads(m)} for step, ts, m in store._point_rows(s, run_id)
            ]
            record["series"] = points
        return record

    return store._tx(work, write=False)


def get_run_with_series_json(store: Any, account_id: str, run_id: str) -> tuple[RunRecord, str]:
    """The run record and its series as JSON array text, built without decoding each point."""

    def work(s: Session) -> tuple[RunRecord, str]:
        record = run_record(store._run(s, account_id, run_id))
        parts = [
            f'{{"step":{"null" if step is None else step},"ts":{ts!r},"metrics":{m}}}'
            for step, ts, m in store._point_rows(s, run_id)
        ]
        return record, "[" + ",".join(parts) + "]"

    return store._tx(work, write=False)


def _point_rows(s: Session, run_id: str):
    return s.execute(
        select(Point.step, Point.ts, Point.metrics).where(Point.run_id == run_id).order_by(Point.ts, Point.pk)
    ).all()


def list_runs(
    store,
    account_id: str,
    *,
    status: str | None = None,
    dataset: str | None = None,
    name: str | None = None,
    kind: str | None = None,
    limit: int | None = None,
) -> RunList[RunRecord]:
    """The account's runs, newest first, filtered by whichever of status/dataset/name/kind are given."""
    if status is not None:
        _check_status(status, RUN_STATUSES, "run")
    limit = store._limit(limit)
    q = select(Run).where(Run.account_id == account_id)
    stored_status = None if status == "crashed" else status
    for column, value in ((Run.status, stored_status), (Run.dataset, dataset), (Run.name, name), (Run.kind, kind)):
        if value is not None:
            q = q.where(column == value)
    if status == "crashed":  # settled so (its job's process vanished), or running with a silent writer
        q = q.where(or_(Run.status == "crashed",
                        and_(Run.status == "running", Run.updated_at < time.time() - run_stale_s())))
    q = q.order_by(Run.pk.desc()).limit(limit)

    def work(s: Session) -> RunList[RunRecord]:
        out: RunList[RunRecord] = RunList()
        budget = defaults.PLATFORM_LIST_MAX_BYTES
        for r in s.scalars(q.execution_options(yield_per=50)):
            budget -= len(r.config_json) + len(r.summary_json) + len(r.error or "") + 1000
            if budget < 0 and out:
                out.truncated = True  # a list is a menu: PLATFORM_LIST_MAX_BYTES bounds its answer
                break
            record = run_record(r)
            if status is None or record["status"] == status:
                out.append(record)
        return out

    return store._tx(work, write=False)


class RunList(list[_R], Generic[_R]):
    """Records (a run's, or a job's), and whether PLATFORM_LIST_MAX_BYTES cut the list short (``truncated``)."""

    truncated = False


def _limit(limit: Any) -> int:
    if limit is None:
        return defaults.PLATFORM_LIST_LIMIT
    if type(limit) is not int or not 1 <= limit <= defaults.PLATFORM_LIST_LIMIT_MAX:
        raise InvalidError(
            f"limit={limit!r} is not accepted; send a whole number from 1 to "
            f"{defaults.PLATFORM_LIST_LIMIT_MAX} (PLATFORM_LIST_LIMIT_MAX)"
        )
    return limit


def update_run(store: Any, account_id: str, run_id: str, changes: dict[str, Any], *,
               if_stored: str | None = None) -> RunRecord:
    """Apply the given fields: status, error, summary (merged key by key), step, total_steps, name, config.

    A finishing status sets ``finished_at``; ``running`` clears it. Nothing
    changes when any field is refused. A run stopped on request (RUN_STOP_MARK
    on its summary) keeps its status and error: what its stopped job still
    sends cannot turn it done or failed. With ``if_stored``, nothing changes
    unless the stored status is that one, checked under the row's lock: a
    silent ``running`` run reads ``crashed`` (RUN_STALE_S) but is still stored
    ``running``, and its job's end must still settle it.
    """
    allowed = ("status", "error", "summary", "step", "total_steps", "name", "config", "kind")
    unknown = sorted(set(changes) - set(allowed))
    if unknown:
        raise InvalidError(f"unknown run fields {unknown}; a run update accepts {', '.join(allowed)}")
    values: _RunColumns = {}
    if "status" in changes:
        values["status"] = _check_status(changes["status"], RUN_STATUSES, "run")
    if "error" in changes:
        values["error"] = _check_str(changes["error"], "error", defaults.RUN_ERROR_MAX_CHARS)
    if "step" in changes:
        values["step"] = _check_count(changes["step"], "step", nullable=False)
    if "total_steps" in changes:
        values["total_steps"] = _check_count(changes["total_steps"], "total_steps")
    if "name" in changes:
        values["name"] = _check_str(changes["name"], "name")
    if "kind" in changes:
        values["kind"] = _check_str(changes["kind"], "kind", 100)
    if "config" in changes:
        values["config_json"] = _capped(check_json_value(changes["config"], "config"), "config",
                                        defaults.RUN_CONFIG_MAX_BYTES, "RUN_CONFIG_MAX_BYTES")
    patch = None
    if "summary" in changes and changes["summary"] is not None:
        store._summary_text(changes["summary"])  # refuse bad values before touching the row
        patch = changes["summary"]

    def work(s: Session) -> RunRecord:
        r = store._run(s, account_id, run_id, lock=True)
        if if_stored is not None and r.status != if_stored:
            return run_record(r)
        now = time.time()
        if r.status == "stopped" and values.get("status", "stopped") != "stopped" \
                and RUN_STOP_MARK in json.loads(r.summary_json):
            values.pop("status")
            values.pop("error", None)
        if "status" in values and values["status"] != r.status:
            r.finished_at = now if values["status"] in FINISHED_STATUSES else None
        for k, v in values.items():
            setattr(r, k, v)
        if patch is not None:
            merged = json.loads(r.summary_json)
            merged.update(patch)
            r.summary_json = _capped(canonical_json(merged), "summary (merged with the stored one)",
                                     defaults.RUN_SUMMARY_MAX_BYTES, "RUN_SUMMARY_MAX_BYTES")
        r.updated_at = now
        s.flush()
        return run_record(r)

    return store._tx(work)


def reopen_run(store: Any, account_id: str, run_id: str, summary: dict[str, Any]) -> RunRecord:
    """Ask for a stopped, failed or crashed run to run again (its job resumed), with ``summary`` to merge in.

    Nothing of the run changes here: the request is kept (a RUN_REOPEN_PREFIX setting) and the next job
    created for the run takes it in the job's own transaction (:func:`take_reopen`), where the run turns
    ``running`` with no error, no ``finished_at`` and the stop mark (RUN_STOP_MARK) lifted. A process that
    ends between the two leaves the run as it was, never ``running`` with no job to end it. Only the
    launcher's resume calls it, after checking that the run has a checkpoint to continue from; returns the
    run's record as it stands.
    """
    store._summary_text(summary)

    def work(s: Session) -> RunRecord:
        r = store._run(s, account_id, run_id, lock=True)
        _check_reopenable(r)
        now = time.time()
        value = canonical_json({"at": now, "summary": summary, "host": socket.gethostname(), "pid": os.getpid()})
        row = s.get(Setting, RUN_REOPEN_PREFIX + r.id)
        if row is not None and _resume_starting(loads(row.value), now):
            left = defaults.RUN_REOPEN_TTL_S - (now - float(loads(row.value).get("at") or 0))
            raise InvalidError(f"{run_id} is being resumed already (its new job is starting); see the run, or "
                               f"resume again in {left:.0f} s (RUN_REOPEN_TTL_S) if no job appears")
        if row is None:
            s.add(Setting(key=RUN_REOPEN_PREFIX + r.id, value=value))
        else:
            row.value = value
        s.flush()
        return run_record(r)

    record = store._tx(work)
    fault_point("after_reopen")
    return record


def _resume_starting(asked: Any, now: float) -> bool:
    """Whether a kept resume request is still starting its job: fresh (RUN_REOPEN_TTL_S), and made by a process
    that lives (where it ran on this host; one that died there left it for good)."""
    from whileai.platform.store._servers import _alive

    if not isinstance(asked, dict) or now - float(asked.get("at") or 0) > defaults.RUN_REOPEN_TTL_S:
        return False
    return asked.get("host") != socket.gethostname() or _alive(asked.get("pid"))


def _check_reopenable(r: Run) -> None:
    status = run_record(r)["status"]
    if status not in ("stopped", "failed", "crashed"):
        raise InvalidError(f"{r.id} is {status}: only a stopped, failed or crashed run runs again")


def take_reopen(store: Any, s: Session, account_id: str, run_id: str) -> None:
    """Inside a job's creation: turn the run ``running`` if a resume asked for it (:func:`reopen_run`).

    A request older than RUN_REOPEN_TTL_S is dropped unapplied: the resume that made it ended without its job.
    """
    row = s.get(Setting, RUN_REOPEN_PREFIX + run_id)
    if row is None:
        return
    s.delete(row)
    asked = loads(row.value)
    if not isinstance(asked, dict) or time.time() - float(asked.get("at") or 0) > defaults.RUN_REOPEN_TTL_S:
        return
    r = store._run(s, account_id, run_id, lock=True)
    _check_reopenable(r)
    merged = json.loads(r.summary_json)
    merged.pop(RUN_STOP_MARK, None)
    merged.update(asked.get("summary") or {})
    r.summary_json = _capped(canonical_json(merged), "summary (merged with the stored one)",
                             defaults.RUN_SUMMARY_MAX_BYTES, "RUN_SUMMARY_MAX_BYTES")
    r.status, r.error, r.finished_at, r.updated_at = "running", None, None, time.time()


def delete_run(store: Any, account_id: str, run_id: str) -> RunDeleted:
    """Delete a run with its points, batch ids, jobs (and their keys) and the models served from it.

    Its id is retired (a tombstone): creating a run under it again is refused
    (:class:`RetiredIdError`). Returns ``{"id", "deleted", "jobs", "models"}``:
    the ids of the jobs and the names of the models that went, so the caller can
    remove their files (the launcher's ``remove_run_files``).
    """

    def work(s: Session) -> RunDeleted:
        r = store._run(s, account_id, run_id)
        jobs = list(s.scalars(select(Job.id).where(Job.account_id == account_id, Job.run_id == r.id)))
        models = list(s.scalars(select(ServedModel.name).where(ServedModel.account_id == account_id,
                                                                ServedModel.adapter_run_id == r.id)))
        s.execute(delete(Point).where(Point.run_id == r.id))
        s.execute(delete(PointBatch).where(PointBatch.run_id == r.id))
        s.execute(delete(RunMetricNames).where(RunMetricNames.run_id == r.id))
        s.execute(delete(ServedModel).where(ServedModel.account_id == account_id, ServedModel.adapter_run_id == r.id))
        if jobs:
            s.execute(delete(JobKey).where(JobKey.job_id.in_(jobs)))
            s.execute(delete(Setting).where(Setting.key.in_([_JOB_LEASE_PREFIX + j for j in jobs])))
            s.execute(delete(Job).where(Job.id.in_(jobs)))
        s.execute(delete(Setting).where(Setting.key == RUN_REOPEN_PREFIX + r.id))
        retire_run_ids(s, [r.id])
        s.delete(r)
        return {"id": r.id, "deleted": True, "jobs": jobs, "models": models}

    from whileai.core import copies

    done = store._tx(work)
    erase_deleted(store)  # the rows' old bytes out of the SQLite file's write-ahead log
    copies.forget(account_id, [run_id])  # its report_to copies (W&B, MLflow, trackio) go too
    return done


def add_points(store: Any, account_id: str, run_id: str, batch_id: str, points: Any) -> PointsAccepted:
    """Store a batch of points once: ``{"accepted": n, "duplicate": False}``.

    A ``batch_id`` this run has seen before stores nothing and answers
    ``{"accepted": 0, "duplicate": True}``, so a client may resend a batch
    whose reply it lost. One bad point refuses the whole batch. The run's
    ``step`` advances to the largest step in the batch.
    """
    _check_str(batch_id, "batch_id", defaults.PLATFORM_MAX_KEY_CHARS, required=True)
    rows = clean_points(points, run_id)
    top = max((row[1] for row in rows if row[1] is not None), default=None)
    names: set[str] = set().union(*(p["metrics"] for p in points)) if rows else set()

    def work(s: Session) -> PointsAccepted:
        r = store._run(s, account_id, run_id, lock=True)
        if s.get(PointBatch, (run_id, batch_id)) is not None:
            return {"accepted": 0, "duplicate": True}
        _add_names(s, r, names, points)
        now = time.time()
        s.add(PointBatch(run_id=run_id, batch_id=batch_id, count=len(rows), created_at=now))
        s.flush()
        if rows:
            store._insert_points(s, rows)
        r.updated_at = now
        if top is not None and top > (r.step or 0):
            r.step = top
        return {"accepted": len(rows), "duplicate": False}

    try:
        return store._tx(work)
    except IntegrityError:
        # Two writers raced on the same batch id; the other one stored it.
        return {"accepted": 0, "duplicate": True}


def _add_names(s: Session, r: Run, names: set[str], points: list[Any]) -> None:
    """Record the batch's metric names for the run; refuse the batch when they would pass RUN_METRIC_NAMES_MAX."""
    if not names:
        return
    row = s.get(RunMetricNames, r.id)
    if row is None:  # a run from before names were kept (or its first batch): read them once from its points
        known: set[str] = set()
        for (text_,) in s.execute(select(Point.metrics).where(Point.run_id == r.id)):
            known.update(loads(text_))
    else:
        known = set(json.loads(row.names))
    new = names - known
    if not new and row is not None:
        return
    cap = defaults.RUN_METRIC_NAMES_MAX
    if len(known) + len(new) > cap:
        first = next(i for i, p in enumerate(points) if not known.issuperset(p["metrics"]))
        raise InvalidError(
            f"points[{first}] would make this run's metric names {len(known) + len(new)}, over the cap of {cap} "
            f"(RUN_METRIC_NAMES_MAX; it has {len(known)}); log values under names it already has, or start "
            "another run; nothing from this batch was stored"
        )
    text_ = json.dumps(sorted(known | new), ensure_ascii=False)
    if row is None:
        s.add(RunMetricNames(run_id=r.id, names=text_))
    else:
        row.names = text_


def _insert_points(store: Any, s: Session, rows: list[tuple[str, int | None, float, str]]) -> None:
    conn = s.connection()
    if store._sqlite:  # the driver's own executemany: no per-row work in Python
        conn.exec_driver_sql("INSERT INTO points (run_id, step, ts, metrics) VALUES (?, ?, ?, ?)", rows)
    else:
        keys = ("run_id", "step", "ts", "metrics")
        table = Point.__table__
        if not isinstance(table, Table):  # declarative types __table__ as a FromClause; a mapped class's is a Table
            raise TypeError(f"Point.__table__ is a {type(table).__name__}, not a Table")
        conn.execute(insert(table), [dict(zip(keys, row)) for row in rows])


def count_points(store: Any, account_id: str, run_id: str) -> int:
    def work(s: Session) -> int:
        store._run(s, account_id, run_id)
        return s.scalar(select(func.count()).select_from(Point).where(Point.run_id == run_id)) or 0

    return store._tx(work, write=False)
