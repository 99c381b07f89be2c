"""The store's tables (SQLAlchemy 2 typed models) and how their rows become JSON records.

Record builders and the small field checks live here beside the models they
read; the logic that decides what may be stored lives in ``store.Store``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any, Literal, overload

from sqlalchemy import BigInteger, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy import select
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, object_session

from whileai.core.ids import new_id
from whileai.platform.store.records import DatasetRecord, JobRecord, ModelRecord, RunRecord
from whileai.platform.store.values import FINISHED_STATUSES, InvalidError, NotFoundError, run_cost
from whileai.platform import defaults

# Point ids are 64-bit on PostgreSQL; SQLite needs INTEGER PRIMARY KEY (its rowid) to autoincrement.
_BigPK = BigInteger().with_variant(Integer(), "sqlite")

# --------------------------------------------------------------------------- models


class Base(DeclarativeBase):
    pass


class Account(Base):
    __tablename__ = "accounts"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[float] = mapped_column(Float)


class ApiKey(Base):
    __tablename__ = "api_keys"
    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), index=True)
    prefix: Mapped[str] = mapped_column(String(32), index=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[float] = mapped_column(Float)
    #: whose key it is, e.g. a data root's local key "local: host:/home/me/.whileai" (revision 0002)
    name: Mapped[str | None] = mapped_column(String(200), nullable=True)


class JobKey(Base):
    """A job's own key (hashed): it reaches only that job, its run and the datasets the job reads, and
    only while the job is unfinished. It is not an account key: ``api_keys`` never holds it."""

    __tablename__ = "job_keys"
    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    account_id: Mapped[str] = mapped_column(String(32), index=True)
    job_id: Mapped[str] = mapped_column(String(32), index=True)
    prefix: Mapped[str] = mapped_column(String(32), index=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[float] = mapped_column(Float)


class Setting(Base):
    """Store-wide facts, e.g. which account is the local one (a primary key makes the first writer win)."""

    __tablename__ = "settings"
    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class Dataset(Base):
    __tablename__ = "datasets"
    __table_args__ = (UniqueConstraint("account_id", "content_hash"),)
    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(32), unique=True)
    account_id: Mapped[str] = mapped_column(String(32), index=True)
    name: Mapped[str | None] = mapped_column(String(400))
    rows_json: Mapped[str] = mapped_column(Text)
    row_count: Mapped[int] = mapped_column(Integer)
    content_hash: Mapped[str] = mapped_column(String(64))
    split: Mapped[str | None] = mapped_column(String(100))
    sibling: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (Index("ix_runs_account_pk", "account_id", "pk"),)
    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(32), unique=True)
    account_id: Mapped[str] = mapped_column(String(32))
    name: Mapped[str | None] = mapped_column(String(400))
    kind: Mapped[str | None] = mapped_column(String(100))
    status: Mapped[str] = mapped_column(String(16))
    dataset: Mapped[str | None] = mapped_column(String(400))
    after_dataset: Mapped[str | None] = mapped_column(String(400))
    config_json: Mapped[str] = mapped_column(Text, default="null")
    summary_json: Mapped[str] = mapped_column(Text, default="{}")
    error: Mapped[str | None] = mapped_column(Text)
    step: Mapped[int] = mapped_column(BigInteger, default=0)
    total_steps: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float)


class RunMetricNames(Base):
    """The distinct metric names a run's points carry, as a JSON array (RUN_METRIC_NAMES_MAX). A table of its
    own, so a store made before it gains it with ``create_all``; a run without a row has its names read once
    from its points."""

    __tablename__ = "run_metric_names"
    run_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    names: Mapped[str] = mapped_column(Text)


class Point(Base):
    """One logged point: its metrics are one JSON object (not a row per metric), for fast bulk inserts."""

    __tablename__ = "points"
    __table_args__ = (Index("ix_points_run_ts", "run_id", "ts"),)
    pk: Mapped[int] = mapped_column(_BigPK, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(32))
    step: Mapped[int | None] = mapped_column(BigInteger)
    ts: Mapped[float] = mapped_column(Float)
    metrics: Mapped[str] = mapped_column(Text)


class PointBatch(Base):
    """A batch id seen for a run: a retried batch finds its row here and stores nothing."""

    __tablename__ = "point_batches"
    run_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    batch_id: Mapped[str] = mapped_column(String(defaults.PLATFORM_MAX_KEY_CHARS), primary_key=True)
    count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[float] = mapped_column(Float)


class ServedModel(Base):
    __tablename__ = "models"
    __table_args__ = (UniqueConstraint("account_id", "name"),)
    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    account_id: Mapped[str] = mapped_column(String(32), index=True)
    name: Mapped[str] = mapped_column(String(defaults.PLATFORM_MAX_KEY_CHARS))
    base_model: Mapped[str | None] = mapped_column(String(400))
    adapter: Mapped[str | None] = mapped_column(Text)
    adapter_run_id: Mapped[str | None] = mapped_column(String(32))
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class Job(Base):
    __tablename__ = "jobs"
    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(32), unique=True)
    account_id: Mapped[str] = mapped_column(String(32), index=True)
    run_id: Mapped[str | None] = mapped_column(String(32), index=True)
    kind: Mapped[str | None] = mapped_column(String(100))
    target: Mapped[str | None] = mapped_column(String(100))
    status: Mapped[str] = mapped_column(String(16))
    pid: Mapped[int | None] = mapped_column(Integer)
    call_id: Mapped[str | None] = mapped_column(String(400))
    #: the run's spec as the launch validated it (``whileai.core.spec.spec_json``)
    spec_json: Mapped[str] = mapped_column(Text, default="null")
    #: the platform's bookkeeping beside it (``whileai.core.jobrow.JobPlatform``; revision 0006)
    platform_json: Mapped[str] = mapped_column(Text, default="{}", server_default="{}")
    heartbeat_at: Mapped[float | None] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float)


# --------------------------------------------------------------------------- helpers


def _new_id(prefix: str) -> str:
    return new_id(prefix)  # one id format with the SDK, which names a run itself when offline


def hash_key(key: str) -> str:
    """How an API key is kept at rest: its SHA-256 hex digest (API_KEY_BYTES explains why one hash is enough)."""
    return hashlib.sha256(key.encode()).hexdigest()


def run_stale_s() -> float:
    """Seconds of silence after which a running run reads ``crashed`` (RUN_STALE_S, or RUN_STALE_ENV when set)."""
    raw = os.environ.get(defaults.RUN_STALE_ENV, "").strip()
    try:
        value = float(raw) if raw else defaults.RUN_STALE_S
    except ValueError:
        value = defaults.RUN_STALE_S
    return value if value > 0 else defaults.RUN_STALE_S


def _crash_reason(r: Run) -> str | None:
    """Why a stored ``running`` run reads ``crashed``, or None when it does not: its writer went silent
    (RUN_STALE_S) and no job of it is unfinished.

    A run with an unfinished hosted job is the job's to settle (its own heartbeat, JOB_STALE_S), so it is never
    read as crashed here; a run whose jobs have all ended is settled like any silent run (a resume whose process
    died before its new job existed left one). Any later send (points, an update, the SDK's heartbeat) moves
    ``updated_at`` and revives it.
    """
    if r.status != "running" or r.updated_at is None or r.updated_at >= time.time() - run_stale_s():
        return None
    silent = f"it read running with no word for over {run_stale_s():g} s (RUN_STALE_S)"
    session = object_session(r)
    if session is None:
        return silent
    jobs = list(session.execute(select(Job.id, Job.status).where(Job.run_id == r.id).order_by(Job.pk.desc())))
    if any(status not in FINISHED_STATUSES for _id, status in jobs):
        return None
    if jobs:
        return (f"{silent} while every job of it had ended (the last, {jobs[0][0]}, ended {jobs[0][1]}): the process "
                "starting its next job ended before the job existed; resume it again")
    return f"{silent} and it has no job: its writer stopped without ending it"


def _shown_status(r: Run) -> str:
    """The run's status as read: ``crashed`` where :func:`_crash_reason` gives a reason."""
    return r.status if r.status != "running" or _crash_reason(r) is None else "crashed"


def run_record(r: Run) -> RunRecord:
    summary = json.loads(r.summary_json)  # stdlib: exact past 64-bit ints, as given
    cost_usd, cost_basis = run_cost(summary)
    crashed = _crash_reason(r)
    return {
        "id": r.id,
        "name": r.name,
        "status": "crashed" if crashed else r.status,
        "kind": r.kind,
        "dataset": r.dataset,
        "after_dataset": r.after_dataset,
        "config": json.loads(r.config_json),
        "summary": summary,
        "error": crashed or r.error,
        "step": r.step,
        "total_steps": r.total_steps,
        "created_at": r.created_at,
        "updated_at": r.updated_at,
        "finished_at": r.finished_at,
        "cost_usd": cost_usd,
        "cost_basis": cost_basis,
    }


def _dataset_record(d: Dataset) -> DatasetRecord:
    return {
        "id": d.id,
        "name": d.name,
        "rows": d.row_count,
        "content_hash": d.content_hash,
        "split": d.split,
        "sibling": d.sibling,
        "created_at": d.created_at,
        "updated_at": d.updated_at,
    }


def _model_record(m: ServedModel) -> ModelRecord:
    return {
        "name": m.name,
        "baseModel": m.base_model,
        "adapter": m.adapter,
        "adapterRunId": m.adapter_run_id,
        "version": m.version,
        "created_at": m.created_at,
        "updated_at": m.updated_at,
    }


def _job_record(j: Job) -> JobRecord:
    return {
        "id": j.id,
        "run_id": j.run_id,
        "kind": j.kind,
        "target": j.target,
        "status": j.status,
        "pid": j.pid,
        "call_id": j.call_id,
        "spec": json.loads(j.spec_json),
        "platform": json.loads(j.platform_json or "{}"),
        "heartbeat_at": j.heartbeat_at,
        "error": j.error,
        "created_at": j.created_at,
        "updated_at": j.updated_at,
        "finished_at": j.finished_at,
    }


def _check_status(status: Any, accepted: tuple[str, ...], what: str) -> str:
    if status not in accepted:
        raise InvalidError(f"{what} status {status!r} is not accepted; use one of {', '.join(accepted)}")
    return status


@overload
def _check_str(value: Any, field: str, max_chars: int = 400, *, required: Literal[True]) -> str: ...
@overload
def _check_str(value: Any, field: str, max_chars: int = 400, *, required: bool = False) -> str | None: ...
def _check_str(value: Any, field: str, max_chars: int = 400, *, required: bool = False) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise InvalidError(f"{field}={value!r:.80} is not accepted; send a non-empty string")
    if len(value) > max_chars:
        raise InvalidError(f"{field} is {len(value)} characters; send at most {max_chars}")
    return value


@overload
def _check_count(value: Any, field: str, *, nullable: Literal[False]) -> int: ...
@overload
def _check_count(value: Any, field: str, *, nullable: bool = True) -> int | None: ...
def _check_count(value: Any, field: str, *, nullable: bool = True) -> int | None:
    if value is None and nullable:
        return None
    if type(value) is not int or not 0 <= value < 2**62:
        raise InvalidError(f"{field}={value!r:.80} is not accepted; send a whole number >= 0")
    return value


def _check_time(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) == float("inf"):
        raise InvalidError(f"{field}={value!r:.80} is not accepted; send seconds since the epoch as a number")
    return float(value)


def _not_found(kind: str, ident: Any) -> NotFoundError:
    return NotFoundError(f"{kind} {ident!r} not found in this account; check the id (list them to see yours)")
