"""The platform's store: one :class:`Store` facade over the one implementation of store logic.

The logic is split by area, each a module of plain functions the facade binds as
its methods: accounts and keys (``_store_accounts``), runs and points
(``_store_runs``), datasets (``_store_datasets``), the model registry
(``_store_registry``), jobs (``_store_jobs``) and the local key file
(``_store_keyfiles``). Tables are in ``_store_models``, value checks in
``_store_values``, the engine in ``_store_engine``.

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

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from sqlalchemy import text
from sqlalchemy.orm import Session

from whileai.platform import _store_sessions  # noqa: F401  (its page_tokens table joins the schema)
from whileai.platform import (
    _store_accounts,
    _store_datasets,
    _store_jobs,
    _store_registry,
    _store_runs,
)
from whileai.platform._store_engine import (
    WRITE_OPTION,
    StoreBusyError,
    is_sqlite,
    make_engine,
    store_url,
    with_lock_retry,
)
from whileai.platform._store_keyfiles import (  # noqa: F401
    LOCAL_KEY_FILENAME,
    ensure_local_account,
    local_key_path,
    rotate_local_key_file,
)
from whileai.platform._store_models import ApiKey, Base, hash_key  # noqa: F401  (re-exported: the key table, its hasher)
from whileai.platform._store_values import (  # noqa: F401  (re-exported: the store's statuses and errors)
    FINISHED_STATUSES,
    JOB_STATUSES,
    RUN_STATUSES,
    RUN_STOP_MARK,
    InvalidError,
    NotFoundError,
    run_cost,
)

__all__ = [
    "Store",
    "store_url",
    "ensure_local_account",
    "local_key_path",
    "rotate_local_key_file",
    "rotate_local_key_file",
    "run_cost",
    "InvalidError",
    "NotFoundError",
    "StoreBusyError",
    "RUN_STATUSES",
    "RUN_STOP_MARK",
    "JOB_STATUSES",
]

T = TypeVar("T")


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

    @contextmanager
    def _session(self, write: bool) -> Iterator[Session]:
        with Session(self._writer if write else self.engine, expire_on_commit=False) as s, s.begin():
            yield s

    def _tx(self, fn: Callable[[Session], T], *, write: bool = True) -> T:
        def attempt() -> T:
            with self._session(write) as s:
                return fn(s)

        return with_lock_retry(attempt)

    # -- accounts and api keys (_store_accounts.py)
    create_account = _store_accounts.create_account
    _issue_key = _store_accounts._issue_key
    issue_api_key = _store_accounts.issue_api_key
    revoke_api_key = _store_accounts.revoke_api_key
    revoke_api_key_hash = _store_accounts.revoke_api_key_hash
    account_for_key = _store_accounts.account_for_key
    get_account = _store_accounts.get_account
    count_accounts = _store_accounts.count_accounts
    local_account_id = _store_accounts.local_account_id
    list_accounts = _store_accounts.list_accounts
    rotate_api_key = _store_accounts.rotate_api_key
    issue_job_key = _store_accounts.issue_job_key
    job_key_scope = _store_accounts.job_key_scope
    revoke_job_keys = _store_accounts.revoke_job_keys

    # -- runs and their points (_store_runs.py)
    _run = _store_runs._run
    create_run = _store_runs.create_run
    ensure_run = _store_runs.ensure_run
    create_run_once = _store_runs.create_run_once
    _summary_text = staticmethod(_store_runs._summary_text)
    get_run = _store_runs.get_run
    get_run_with_series_json = _store_runs.get_run_with_series_json
    _point_rows = staticmethod(_store_runs._point_rows)
    list_runs = _store_runs.list_runs
    _limit = staticmethod(_store_runs._limit)
    update_run = _store_runs.update_run
    delete_run = _store_runs.delete_run
    add_points = _store_runs.add_points
    _insert_points = _store_runs._insert_points
    count_points = _store_runs.count_points

    # -- datasets (_store_datasets.py)
    _dataset = _store_datasets._dataset
    create_dataset = _store_datasets.create_dataset
    get_dataset = _store_datasets.get_dataset
    dataset_rows_json = _store_datasets.dataset_rows_json
    dataset_rows = _store_datasets.dataset_rows
    list_datasets = _store_datasets.list_datasets
    update_dataset = _store_datasets.update_dataset
    delete_dataset = _store_datasets.delete_dataset

    # -- the model registry (_store_registry.py)
    put_model = _store_registry.put_model
    _model = _store_registry._model
    get_model = _store_registry.get_model
    list_models = _store_registry.list_models
    delete_model = _store_registry.delete_model

    # -- jobs (_store_jobs.py)
    _job_values = _store_jobs._job_values
    create_job = _store_jobs.create_job
    _job = _store_jobs._job
    get_job = _store_jobs.get_job
    update_job = _store_jobs.update_job
    list_jobs = _store_jobs.list_jobs
    lease_job = _store_jobs.lease_job
    release_job = _store_jobs.release_job
