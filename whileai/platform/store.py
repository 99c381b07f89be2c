"""The platform's store: SQLAlchemy 2 models and the one implementation of store logic.

Every :class:`Store` method takes the caller's account id and scopes every query
by it: another account's id behaves exactly like a missing one
(:class:`NotFoundError`). Refused values raise :class:`InvalidError` whose
message names the value, what is accepted and the fix. Records are plain
JSON-shaped dicts; times are seconds since the epoch (floats).

The URL comes from :func:`store_url` (``WHILEAI_STORE_URL``, else SQLite under
the data root). SQLite is opened for several writing processes at once (see
``_store_engine``); PostgreSQL works through ``postgresql+psycopg://...``.

    store = Store()
    account_id, key = store.create_account("me")
    run = store.create_run(account_id, name="sft-1", config={"lr": 1e-4})
    store.add_points(account_id, run["id"], "batch-0", [{"step": 1, "metrics": {"loss": 2.3}, "ts": 1.0}])
"""

from __future__ import annotations

import hashlib
import json
import hmac
import os
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import delete, func, insert, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from whileai.platform import _store_sessions  # noqa: F401  (its page_tokens table joins the schema)
from whileai.platform._store_engine import (
    WRITE_OPTION,
    StoreBusyError,
    is_sqlite,
    make_engine,
    store_url,
    with_lock_retry,
)
from whileai.platform._store_models import (
    Account,
    ApiKey,
    Base,
    Dataset,
    Job,
    Point,
    PointBatch,
    Run,
    ServedModel,
    Setting,
    _check_count,
    _check_status,
    _check_str,
    _check_time,
    _dataset_record,
    _hash_key,
    _job_record,
    _model_record,
    _new_id,
    _not_found,
    _run_record,
)
from whileai.platform._store_values import (
    FINISHED_STATUSES,
    RUN_STOP_MARK,
    JOB_STATUSES,
    RUN_STATUSES,
    InvalidError,
    NotFoundError,
    canonical_json,
    check_json_value,
    clean_points,
    loads,
    run_cost,
)
from whileai.platform import defaults
from whileai.core.paths import data_root

__all__ = [
    "Store",
    "store_url",
    "ensure_local_account",
    "local_key_path",
    "run_cost",
    "InvalidError",
    "NotFoundError",
    "StoreBusyError",
    "RUN_STATUSES",
    "RUN_STOP_MARK",
    "JOB_STATUSES",
]

T = TypeVar("T")

#: file under the data root holding the local account's key in clear (mode 0600)
LOCAL_KEY_FILENAME = "local_key"
_LOCAL_ACCOUNT_SETTING = "local_account_id"
_KEY_PREFIX = "wai_"

# --------------------------------------------------------------------------- the store


class Store:
    """The platform's store over any SQLAlchemy URL (default :func:`store_url`)."""

    def __init__(self, url: str | None = None, *, create: bool = True):
        self.url = url or store_url()
        self.engine = make_engine(self.url)
        self._sqlite = is_sqlite(self.engine)
        self._writer = self.engine.execution_options(**{WRITE_OPTION: True})
        if create:
            self.create_schema()

    def __repr__(self) -> str:
        return f"Store({self.engine.url.render_as_string(hide_password=True)!r})"

    def close(self) -> None:
        """Close pooled connections (the store can still be used; it reconnects)."""
        self.engine.dispose()

    def create_schema(self) -> None:
        """Create missing tables; safe when several processes start on a fresh store at once."""

        def work() -> None:
            with self._writer.begin() as conn:
                if conn.dialect.name == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(847001)"))
                Base.metadata.create_all(conn)

        with_lock_retry(work)

    # -- transactions

    @contextmanager
    def _session(self, write: bool) -> Iterator[Session]:
        with Session(self._writer if write else self.engine, expire_on_commit=False) as s, s.begin():
            yield s

    def _tx(self, fn: Callable[[Session], T], *, write: bool = True) -> T:
        def attempt() -> T:
            with self._session(write) as s:
                return fn(s)

        return with_lock_retry(attempt)

    # -- accounts and keys

    def create_account(self, name: str | None = None) -> tuple[str, str]:
        """A new account and its first API key: ``(account_id, api_key)``. The key is shown only here."""
        name = _check_str(name, "name", 200) or "account"

        def work(s: Session) -> tuple[str, str]:
            account_id = _new_id("acct")
            s.add(Account(id=account_id, name=name, created_at=time.time()))
            s.flush()
            return account_id, self._issue_key(s, account_id)

        return self._tx(work)

    def _issue_key(self, s: Session, account_id: str) -> str:
        key = _KEY_PREFIX + secrets.token_urlsafe(defaults.API_KEY_BYTES)
        s.add(
            ApiKey(
                account_id=account_id,
                prefix=key[: defaults.API_KEY_PREFIX_CHARS],
                key_hash=_hash_key(key),
                created_at=time.time(),
            )
        )
        return key

    def issue_api_key(self, account_id: str) -> str:
        """Another API key for an existing account (the old ones keep working)."""

        def work(s: Session) -> str:
            if s.get(Account, account_id) is None:
                raise _not_found("account", account_id)
            return self._issue_key(s, account_id)

        return self._tx(work)

    def revoke_api_key(self, account_id: str, api_key: str) -> bool:
        """Stop ``api_key`` from authenticating; True when this account had it."""
        return self.revoke_api_key_hash(_hash_key(api_key), account_id=account_id)

    def revoke_api_key_hash(self, key_hash: str, *, account_id: str | None = None) -> bool:
        """Revoke the key whose SHA-256 is ``key_hash`` (e.g. a job-scoped key); True when one was removed."""

        def work(s: Session) -> bool:
            q = delete(ApiKey).where(ApiKey.key_hash == key_hash)
            if account_id is not None:
                q = q.where(ApiKey.account_id == account_id)
            return (s.execute(q).rowcount or 0) > 0

        return self._tx(work)

    def account_for_key(self, api_key: str | None) -> str | None:
        """The account id an API key belongs to, or None. Hashes are compared in constant time."""
        if not api_key or not isinstance(api_key, str) or len(api_key) > 200:
            return None
        prefix = api_key[: defaults.API_KEY_PREFIX_CHARS]
        digest = _hash_key(api_key)

        def work(s: Session) -> str | None:
            found = None
            for account_id, key_hash in s.execute(
                select(ApiKey.account_id, ApiKey.key_hash).where(ApiKey.prefix == prefix)
            ):
                if hmac.compare_digest(key_hash, digest):
                    found = account_id
            return found

        return self._tx(work, write=False)

    def get_account(self, account_id: str) -> dict[str, Any]:
        def work(s: Session) -> dict[str, Any]:
            a = s.get(Account, account_id)
            if a is None:
                raise _not_found("account", account_id)
            return {"account_id": a.id, "name": a.name, "created_at": a.created_at}

        return self._tx(work, write=False)

    def count_accounts(self) -> int:
        return self._tx(lambda s: s.scalar(select(func.count()).select_from(Account)) or 0, write=False)

    def local_account_id(self) -> str | None:
        """The id of the local account (the one the embedded SDK and a local server share), if made."""
        return self._tx(lambda s: s.scalar(select(Setting.value).where(Setting.key == _LOCAL_ACCOUNT_SETTING)), write=False)

    # -- runs

    def _run(self, s: Session, account_id: str, run_id: Any, *, lock: bool = False) -> Run:
        q = select(Run).where(Run.id == run_id, Run.account_id == account_id)
        if lock and not self._sqlite:
            q = q.with_for_update()
        r = s.scalar(q) if isinstance(run_id, str) else None
        if r is None:
            raise _not_found("run", run_id)
        return r

    def create_run(
        self,
        account_id: str,
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
    ) -> dict[str, Any]:
        """A new run (status ``running`` unless told otherwise); ``config`` is any JSON value, kept as given."""
        fields = {
            "name": _check_str(name, "name"),
            "dataset": _check_str(dataset, "dataset"),
            "after_dataset": _check_str(after_dataset, "after_dataset"),
            "kind": _check_str(kind, "kind", 100),
            "status": _check_status(status, RUN_STATUSES, "run"),
            "config_json": check_json_value(config, "config"),
            "summary_json": self._summary_text(summary),
            "step": _check_count(step, "step") or 0,
            "total_steps": _check_count(total_steps, "total_steps"),
        }

        def work(s: Session) -> dict[str, Any]:
            now = time.time()
            r = Run(
                id=_new_id("run"),
                account_id=account_id,
                created_at=now,
                updated_at=now,
                finished_at=now if fields["status"] in FINISHED_STATUSES else None,
                error=None,
                **fields,
            )
            s.add(r)
            s.flush()
            return _run_record(r)

        return self._tx(work)

    @staticmethod
    def _summary_text(summary: Any) -> str:
        if summary is None:
            return "{}"
        if not isinstance(summary, dict):
            raise InvalidError(f"summary is a {type(summary).__name__}; send an object of key to value")
        return check_json_value(summary, "summary")

    def get_run(self, account_id: str, run_id: str, *, series: bool = True) -> dict[str, Any]:
        """The run record, plus ``series`` (its points, oldest first) unless ``series=False``."""

        def work(s: Session) -> dict[str, Any]:
            record = _run_record(self._run(s, account_id, run_id))
            if series:
                record["series"] = [
                    {"step": step, "ts": ts, "metrics": loads(m)} for step, ts, m in self._point_rows(s, run_id)
                ]
            return record

        return self._tx(work, write=False)

    def get_run_with_series_json(self, account_id: str, run_id: str) -> tuple[dict[str, Any], str]:
        """The run record and its series as JSON array text, built without decoding each point."""

        def work(s: Session) -> tuple[dict[str, Any], str]:
            record = _run_record(self._run(s, account_id, run_id))
            parts = [
                f'{{"step":{"null" if step is None else step},"ts":{ts!r},"metrics":{m}}}'
                for step, ts, m in self._point_rows(s, run_id)
            ]
            return record, "[" + ",".join(parts) + "]"

        return self._tx(work, write=False)

    @staticmethod
    def _point_rows(s: Session, run_id: str):
        return s.execute(
            select(Point.step, Point.ts, Point.metrics).where(Point.run_id == run_id).order_by(Point.ts, Point.pk)
        ).all()

    def list_runs(
        self,
        account_id: str,
        *,
        status: str | None = None,
        dataset: str | None = None,
        name: str | None = None,
        kind: str | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """The account's runs, newest first, filtered by whichever of status/dataset/name/kind are given."""
        if status is not None:
            _check_status(status, RUN_STATUSES, "run")
        limit = self._limit(limit)
        q = select(Run).where(Run.account_id == account_id)
        for column, value in ((Run.status, status), (Run.dataset, dataset), (Run.name, name), (Run.kind, kind)):
            if value is not None:
                q = q.where(column == value)
        q = q.order_by(Run.pk.desc()).limit(limit)
        return self._tx(lambda s: [_run_record(r) for r in s.scalars(q)], write=False)

    @staticmethod
    def _limit(limit: Any) -> int:
        if limit is None:
            return defaults.PLATFORM_LIST_LIMIT
        if type(limit) is not int or not 1 <= limit <= defaults.PLATFORM_LIST_LIMIT_MAX:
            raise InvalidError(
                f"limit={limit!r} is not accepted; send a whole number from 1 to "
                f"{defaults.PLATFORM_LIST_LIMIT_MAX} (PLATFORM_LIST_LIMIT_MAX)"
            )
        return limit

    def update_run(self, account_id: str, run_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        """Apply the given fields: status, error, summary (merged key by key), step, total_steps, name, config.

        A finishing status sets ``finished_at``; ``running`` clears it. Nothing
        changes when any field is refused. A run stopped on request (RUN_STOP_MARK
        on its summary) keeps its status and error: what its stopped job still
        sends cannot turn it done or failed.
        """
        allowed = ("status", "error", "summary", "step", "total_steps", "name", "config", "kind")
        unknown = sorted(set(changes) - set(allowed))
        if unknown:
            raise InvalidError(f"unknown run fields {unknown}; a run update accepts {', '.join(allowed)}")
        values: dict[str, Any] = {}
        if "status" in changes:
            values["status"] = _check_status(changes["status"], RUN_STATUSES, "run")
        if "error" in changes:
            values["error"] = _check_str(changes["error"], "error", 100_000)
        if "step" in changes:
            values["step"] = _check_count(changes["step"], "step", nullable=False)
        if "total_steps" in changes:
            values["total_steps"] = _check_count(changes["total_steps"], "total_steps")
        if "name" in changes:
            values["name"] = _check_str(changes["name"], "name")
        if "kind" in changes:
            values["kind"] = _check_str(changes["kind"], "kind", 100)
        if "config" in changes:
            values["config_json"] = check_json_value(changes["config"], "config")
        patch = None
        if "summary" in changes and changes["summary"] is not None:
            self._summary_text(changes["summary"])  # refuse bad values before touching the row
            patch = changes["summary"]

        def work(s: Session) -> dict[str, Any]:
            r = self._run(s, account_id, run_id, lock=True)
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
                r.summary_json = canonical_json(merged)
            r.updated_at = now
            s.flush()
            return _run_record(r)

        return self._tx(work)

    def delete_run(self, account_id: str, run_id: str) -> dict[str, Any]:
        """Delete a run with its points and batch ids. Models and jobs that name it stay."""

        def work(s: Session) -> dict[str, Any]:
            r = self._run(s, account_id, run_id)
            s.execute(delete(Point).where(Point.run_id == r.id))
            s.execute(delete(PointBatch).where(PointBatch.run_id == r.id))
            s.delete(r)
            return {"id": r.id, "deleted": True}

        return self._tx(work)

    # -- points

    def add_points(self, account_id: str, run_id: str, batch_id: str, points: Any) -> dict[str, Any]:
        """Store a batch of points once: ``{"accepted": n, "duplicate": False}``.

        A ``batch_id`` this run has seen before stores nothing and answers
        ``{"accepted": 0, "duplicate": True}``, so a client may resend a batch
        whose reply it lost. One bad point refuses the whole batch. The run's
        ``step`` advances to the largest step in the batch.
        """
        _check_str(batch_id, "batch_id", defaults.PLATFORM_MAX_KEY_CHARS, required=True)
        rows = clean_points(points, run_id)
        top = max((row[1] for row in rows if row[1] is not None), default=None)

        def work(s: Session) -> dict[str, Any]:
            r = self._run(s, account_id, run_id, lock=True)
            if s.get(PointBatch, (run_id, batch_id)) is not None:
                return {"accepted": 0, "duplicate": True}
            now = time.time()
            s.add(PointBatch(run_id=run_id, batch_id=batch_id, count=len(rows), created_at=now))
            s.flush()
            if rows:
                self._insert_points(s, rows)
            r.updated_at = now
            if top is not None and top > (r.step or 0):
                r.step = top
            return {"accepted": len(rows), "duplicate": False}

        try:
            return self._tx(work)
        except IntegrityError:
            # Two writers raced on the same batch id; the other one stored it.
            return {"accepted": 0, "duplicate": True}

    def _insert_points(self, s: Session, rows: list[tuple[str, int | None, float, str]]) -> None:
        conn = s.connection()
        if self._sqlite:  # the driver's own executemany: no per-row work in Python
            conn.exec_driver_sql("INSERT INTO points (run_id, step, ts, metrics) VALUES (?, ?, ?, ?)", rows)
        else:
            keys = ("run_id", "step", "ts", "metrics")
            conn.execute(insert(Point.__table__), [dict(zip(keys, row)) for row in rows])

    def count_points(self, account_id: str, run_id: str) -> int:
        def work(s: Session) -> int:
            self._run(s, account_id, run_id)
            return s.scalar(select(func.count()).select_from(Point).where(Point.run_id == run_id)) or 0

        return self._tx(work, write=False)

    # -- datasets

    def _dataset(self, s: Session, account_id: str, dataset_id: Any) -> Dataset:
        d = (
            s.scalar(select(Dataset).where(Dataset.id == dataset_id, Dataset.account_id == account_id))
            if isinstance(dataset_id, str)
            else None
        )
        if d is None:
            raise _not_found("dataset", dataset_id)
        return d

    def create_dataset(
        self,
        account_id: str,
        rows: Any,
        *,
        name: str | None = None,
        split: str | None = None,
        sibling: str | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Store rows as pushed: ``(record, created)``. Identical content answers the existing dataset."""
        name = _check_str(name, "name")
        split = _check_str(split, "split", 100)
        if not isinstance(rows, list):
            raise InvalidError(f"rows is a {type(rows).__name__}; send a list of row objects")
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise InvalidError(f"rows[{i}] is a {type(row).__name__}; each row is a JSON object")
        body = check_json_value(rows, "rows")
        content_hash = hashlib.sha256(body.encode()).hexdigest()

        def existing(s: Session) -> Dataset | None:
            return s.scalar(
                select(Dataset).where(Dataset.account_id == account_id, Dataset.content_hash == content_hash)
            )

        def work(s: Session) -> tuple[dict[str, Any], bool]:
            found = existing(s)
            if found is not None:
                return _dataset_record(found), False
            if sibling is not None:
                self._dataset(s, account_id, sibling)
            now = time.time()
            d = Dataset(
                id=_new_id("ds"),
                account_id=account_id,
                name=name,
                rows_json=body,
                row_count=len(rows),
                content_hash=content_hash,
                split=split,
                sibling=sibling,
                created_at=now,
                updated_at=now,
            )
            s.add(d)
            s.flush()
            return _dataset_record(d), True

        try:
            return self._tx(work)
        except IntegrityError:  # the same content landed from another writer meanwhile
            return self._tx(lambda s: (_dataset_record(existing(s)), False), write=False)

    def get_dataset(self, account_id: str, dataset_id: str) -> dict[str, Any]:
        return self._tx(lambda s: _dataset_record(self._dataset(s, account_id, dataset_id)), write=False)

    def dataset_rows_json(self, account_id: str, dataset_id: str) -> str:
        """The dataset's rows as the stored JSON array text (values and key order as pushed)."""
        return self._tx(lambda s: self._dataset(s, account_id, dataset_id).rows_json, write=False)

    def dataset_rows(self, account_id: str, dataset_id: str) -> list[dict[str, Any]]:
        return json.loads(self.dataset_rows_json(account_id, dataset_id))  # stdlib: keeps ints past 64 bits

    def list_datasets(self, account_id: str, *, limit: int | None = None) -> list[dict[str, Any]]:
        """The account's datasets, newest first (records without their rows)."""
        limit = self._limit(limit)
        cols = [c for c in Dataset.__table__.c if c.name != "rows_json"]

        def work(s: Session) -> list[dict[str, Any]]:
            out = s.execute(
                select(*cols).where(Dataset.account_id == account_id).order_by(Dataset.pk.desc()).limit(limit)
            )
            return [_dataset_record(Dataset(**row._mapping)) for row in out]

        return self._tx(work, write=False)

    def update_dataset(self, account_id: str, dataset_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        """Set ``split``, ``sibling`` (another dataset of this account, or None) and ``name``."""
        allowed = ("split", "sibling", "name")
        unknown = sorted(set(changes) - set(allowed))
        if unknown:
            raise InvalidError(f"unknown dataset fields {unknown}; a dataset update accepts {', '.join(allowed)}")
        values = {}
        if "split" in changes:
            values["split"] = _check_str(changes["split"], "split", 100)
        if "name" in changes:
            values["name"] = _check_str(changes["name"], "name")
        if "sibling" in changes:
            values["sibling"] = _check_str(changes["sibling"], "sibling", 32)

        def work(s: Session) -> dict[str, Any]:
            d = self._dataset(s, account_id, dataset_id)
            if values.get("sibling") is not None:
                self._dataset(s, account_id, values["sibling"])
            for k, v in values.items():
                setattr(d, k, v)
            d.updated_at = time.time()
            s.flush()
            return _dataset_record(d)

        return self._tx(work)

    def delete_dataset(self, account_id: str, dataset_id: str) -> dict[str, Any]:
        def work(s: Session) -> dict[str, Any]:
            d = self._dataset(s, account_id, dataset_id)
            s.delete(d)
            return {"id": d.id, "deleted": True}

        return self._tx(work)

    # -- models (the serving registry)

    def put_model(
        self,
        account_id: str,
        name: str,
        *,
        base_model: str | None = None,
        adapter: str | None = None,
        adapter_run_id: str | None = None,
    ) -> dict[str, Any]:
        """Register ``name`` (version 1), or point an existing name at the new adapter and bump its version."""
        name = _check_str(name, "name", defaults.PLATFORM_MAX_KEY_CHARS, required=True)
        base_model = _check_str(base_model, "baseModel")
        adapter = _check_str(adapter, "adapter", 4000)
        adapter_run_id = _check_str(adapter_run_id, "adapterRunId", 32)
        if base_model is None and adapter_run_id is None:
            raise InvalidError("a model needs baseModel or adapterRunId (the run whose adapter it serves)")

        def work(s: Session) -> dict[str, Any]:
            if adapter_run_id is not None:
                self._run(s, account_id, adapter_run_id)
            now = time.time()
            m = s.scalar(
                select(ServedModel).where(ServedModel.account_id == account_id, ServedModel.name == name)
            )
            if m is None:
                m = ServedModel(account_id=account_id, name=name, version=1, created_at=now)
                s.add(m)
            else:
                m.version += 1
            m.base_model, m.adapter, m.adapter_run_id, m.updated_at = base_model, adapter, adapter_run_id, now
            s.flush()
            return _model_record(m)

        return self._tx(work)

    def _model(self, s: Session, account_id: str, name: Any) -> ServedModel:
        m = s.scalar(select(ServedModel).where(ServedModel.account_id == account_id, ServedModel.name == name))
        if m is None:
            raise _not_found("model", name)
        return m

    def get_model(self, account_id: str, name: str) -> dict[str, Any]:
        return self._tx(lambda s: _model_record(self._model(s, account_id, name)), write=False)

    def list_models(self, account_id: str) -> list[dict[str, Any]]:
        q = select(ServedModel).where(ServedModel.account_id == account_id).order_by(ServedModel.name)
        return self._tx(lambda s: [_model_record(m) for m in s.scalars(q)], write=False)

    def delete_model(self, account_id: str, name: str) -> dict[str, Any]:
        def work(s: Session) -> dict[str, Any]:
            s.delete(self._model(s, account_id, name))
            return {"name": name, "deleted": True}

        return self._tx(work)

    # -- jobs

    _JOB_FIELDS = ("run_id", "kind", "target", "status", "pid", "call_id", "spec", "heartbeat_at", "error")

    def _job_values(self, fields: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(fields) - set(self._JOB_FIELDS))
        if unknown:
            raise InvalidError(f"unknown job fields {unknown}; a job accepts {', '.join(self._JOB_FIELDS)}")
        v: dict[str, Any] = {}
        for key in ("run_id", "kind", "target", "call_id"):
            if key in fields:
                v[key] = _check_str(fields[key], key, 32 if key == "run_id" else 400)
        if "status" in fields:
            v["status"] = _check_status(fields["status"], JOB_STATUSES, "job")
        if "pid" in fields:
            v["pid"] = _check_count(fields["pid"], "pid")
        if "spec" in fields:
            v["spec_json"] = check_json_value(fields["spec"], "spec")
        if "heartbeat_at" in fields:
            v["heartbeat_at"] = _check_time(fields["heartbeat_at"], "heartbeat_at")
        if "error" in fields:
            v["error"] = _check_str(fields["error"], "error", 100_000)
        return v

    def create_job(self, account_id: str, **fields: Any) -> dict[str, Any]:
        """A job row (status ``queued`` unless given); ``run_id``, when given, must be this account's run."""
        values = self._job_values(fields)
        values.setdefault("status", "queued")

        def work(s: Session) -> dict[str, Any]:
            if values.get("run_id") is not None:
                self._run(s, account_id, values["run_id"])
            now = time.time()
            finished = now if values["status"] in FINISHED_STATUSES else None
            j = Job(id=_new_id("job"), account_id=account_id, created_at=now, updated_at=now, finished_at=finished, **values)
            s.add(j)
            s.flush()
            return _job_record(j)

        return self._tx(work)

    def _job(self, s: Session, account_id: str, job_id: Any) -> Job:
        j = s.scalar(select(Job).where(Job.id == job_id, Job.account_id == account_id)) if isinstance(job_id, str) else None
        if j is None:
            raise _not_found("job", job_id)
        return j

    def get_job(self, account_id: str, job_id: str) -> dict[str, Any]:
        return self._tx(lambda s: _job_record(self._job(s, account_id, job_id)), write=False)

    def update_job(self, account_id: str, job_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        values = self._job_values(changes)

        def work(s: Session) -> dict[str, Any]:
            j = self._job(s, account_id, job_id)
            if values.get("run_id") is not None:
                self._run(s, account_id, values["run_id"])
            now = time.time()
            if "status" in values and values["status"] != j.status:
                j.finished_at = now if values["status"] in FINISHED_STATUSES else None
            for k, v in values.items():
                setattr(j, k, v)
            j.updated_at = now
            s.flush()
            return _job_record(j)

        return self._tx(work)

    def list_jobs(
        self, account_id: str, *, status: str | None = None, run_id: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """The account's jobs, newest first, filtered by status and/or run id."""
        if status is not None:
            _check_status(status, JOB_STATUSES, "job")
        q = select(Job).where(Job.account_id == account_id)
        if status is not None:
            q = q.where(Job.status == status)
        if run_id is not None:
            q = q.where(Job.run_id == run_id)
        q = q.order_by(Job.pk.desc()).limit(self._limit(limit))
        return self._tx(lambda s: [_job_record(j) for j in s.scalars(q)], write=False)


# --------------------------------------------------------------------------- the local account


def local_key_path() -> Path:
    """Where the local account's key is kept in clear: ``<data_root>/local_key`` (mode 0600)."""
    return data_root() / LOCAL_KEY_FILENAME


def _write_key_file(path: Path, key: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, (key + "\n").encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _read_key_file(path: Path) -> str | None:
    try:
        key = path.read_text().strip()
    except OSError:
        return None
    return key or None


def ensure_local_account(store: Store) -> tuple[str, str | None]:
    """The local account shared by the embedded SDK and a server on the same data root.

    Created on the first call, with its key written to :func:`local_key_path`
    (mode 0600) and nowhere else in clear. Returns ``(account_id, api_key)``;
    the key is read back from that file on later calls. When the account exists
    but the file is gone or no longer matches, a new key is issued and written
    (the old one stops being findable, not valid). ``api_key`` is None only when
    the file cannot be written.
    """
    path = local_key_path()

    def create(s: Session) -> tuple[str, str]:
        existing = s.scalar(select(Setting.value).where(Setting.key == _LOCAL_ACCOUNT_SETTING))
        if existing is not None:
            return existing, ""
        account_id = _new_id("acct")
        s.add(Account(id=account_id, name="local", created_at=time.time()))
        s.add(Setting(key=_LOCAL_ACCOUNT_SETTING, value=account_id))
        s.flush()  # a concurrent first start fails here and reads the winner's row instead
        key = store._issue_key(s, account_id)
        s.flush()
        _write_key_file(path, key)
        return account_id, key

    try:
        account_id, key = store._tx(create)
    except IntegrityError:
        account_id, key = store._tx(create)
    if key:
        return account_id, key
    key = _read_key_file(path)
    if key is not None and store.account_for_key(key) == account_id:
        return account_id, key
    new_key = store.issue_api_key(account_id)
    try:
        _write_key_file(path, new_key)
    except OSError:
        return account_id, None
    return account_id, new_key
