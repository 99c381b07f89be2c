"""The platform's store: one :class:`Store` facade over the one implementation of store logic.

The logic is split by area, each a module of plain functions the facade binds as
its methods: accounts and keys (``_accounts``), runs and points
(``_runs``), datasets (``_datasets``), the model registry
(``_registry``), jobs (``_jobs``), whole-account actions (``_admin``) and
the local key file (``_keyfiles``). Tables are in ``tables``, value checks in
``values``, the engine in ``_engine``; the schema's revisions are kept by
``migrate`` (Alembic scripts in ``migrations/``).

Every :class:`Store` method takes the caller's account id and scopes every query
by it: another account's id behaves exactly like a missing one
(:class:`NotFoundError`). Refused values raise :class:`InvalidError` whose
message names the value, what is accepted and the fix. Records are plain
JSON-shaped dicts; times are seconds since the epoch (floats).

The URL comes from :func:`store_url` (``WHILEAI_STORE_URL``, else SQLite under
the data root). SQLite is opened for several writing processes at once (see
``_engine``); PostgreSQL works through ``postgresql+psycopg://...``.

    store = Store()
    account_id, key = store.create_account("me")
    run = store.create_run(account_id, name="sft-1", config={"lr": 1e-4})
    store.add_points(account_id, run["id"], "batch-0", [{"step": 1, "metrics": {"loss": 2.3}, "ts": 1.0}])
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from sqlalchemy.orm import Session

from whileai.platform.store import sessions  # noqa: F401  (its page_tokens table joins the schema)
from whileai.platform.store import _accounts, _admin, _datasets, _jobs, _registry, _runs, _servers, migrate
from whileai.platform.store._writers import mark_writers
from whileai.platform.store._servers import ServerBeat, register_server  # the server registers itself on its store
from whileai.platform.store._engine import WRITE_OPTION, StoreBusyError, is_sqlite, make_engine, store_url, with_lock_retry
from whileai.platform.store._keyfiles import (
    LOCAL_KEY_FILENAME,
    ensure_local_account,
    local_key_name,
    local_key_path,
    rotate_local_key_file,
)
from whileai.platform.store.migrate import StoreVersionError
from whileai.platform.store.tables import ApiKey, Base, hash_key  # noqa: F401  (re-exported: the key table, its hasher)
from whileai.platform.store._runs import RetiredIdError
from whileai.platform.store.values import FINISHED_STATUSES, JOB_STATUSES, RUN_STATUSES, RUN_STOP_MARK, InvalidError, NotFoundError, run_cost

__all__ = [
    "Store",
    "ServerBeat",
    "register_server",
    "store_url",
    "ensure_local_account",
    "local_key_name",
    "local_key_path",
    "rotate_local_key_file",
    "LOCAL_KEY_FILENAME",
    "run_cost",
    "InvalidError",
    "NotFoundError",
    "RetiredIdError",
    "StoreBusyError",
    "StoreVersionError",
    "RUN_STATUSES",
    "RUN_STOP_MARK",
    "JOB_STATUSES",
    "FINISHED_STATUSES",
]

T = TypeVar("T")


# --------------------------------------------------------------------------- the store


class Store:
    """The platform's store over any SQLAlchemy URL (default :func:`store_url`)."""

    def __init__(self, url: str | None = None, *, create: bool = True):
        self.url = url or store_url()
        self.engine = make_engine(self.url)
        mark_writers(self.engine, migrate.HEAD_REVISION)  # this code's writes pass the store's older-writer guard
        self._sqlite = is_sqlite(self.engine)
        self._writer = self.engine.execution_options(**{WRITE_OPTION: True})
        self._check_schema = create  # a store opened at this code's revision writes only while it stays there
        if create:
            self.create_schema()

    def __repr__(self) -> str:
        return f"Store({self.engine.url.render_as_string(hide_password=True)!r})"

    def close(self) -> None:
        """Close pooled connections (the store can still be used; it reconnects)."""
        self.engine.dispose()

    def create_schema(self) -> None:
        """Create or upgrade the schema to this code's revision (``migrate``); refuse a newer store.

        Safe when several processes open a fresh or older store at once: one
        upgrades, the others find it done.
        """
        migrate.ensure_current(self)

    @contextmanager
    def _session(self, write: bool) -> Iterator[Session]:
        with Session(self._writer if write else self.engine, expire_on_commit=False) as s, s.begin():
            if write and self._check_schema:
                _servers.check_revision(self, s)
            yield s

    def _tx(self, fn: Callable[[Session], T], *, write: bool = True) -> T:
        def attempt() -> T:
            with self._session(write) as s:
                return fn(s)

        return with_lock_retry(attempt)

    # -- accounts and api keys (_accounts.py)
    create_account = _accounts.create_account
    _issue_key = _accounts._issue_key
    issue_api_key = _accounts.issue_api_key
    revoke_api_key = _accounts.revoke_api_key
    revoke_api_key_hash = _accounts.revoke_api_key_hash
    account_for_key = _accounts.account_for_key
    deleted_account_key = _accounts.deleted_account_key
    get_account = _accounts.get_account
    count_accounts = _accounts.count_accounts
    local_account_id = _accounts.local_account_id
    list_accounts = _accounts.list_accounts
    rotate_api_key = _accounts.rotate_api_key
    issue_job_key = _accounts.issue_job_key
    job_key_scope = _accounts.job_key_scope
    revoke_job_keys = _accounts.revoke_job_keys
    list_keys = _accounts.list_keys

    # -- whole accounts: sessions, deletion (_admin.py)
    count_sessions = _admin.count_sessions
    end_sessions = _admin.end_sessions
    delete_account = _admin.delete_account

    # -- runs and their points (_runs.py)
    _run = _runs._run
    create_run = _runs.create_run
    ensure_run = _runs.ensure_run
    create_run_once = _runs.create_run_once
    _summary_text = staticmethod(_runs._summary_text)
    get_run = _runs.get_run
    reopen_run = _runs.reopen_run
    get_run_with_series_json = _runs.get_run_with_series_json
    _point_rows = staticmethod(_runs._point_rows)
    list_runs = _runs.list_runs
    _limit = staticmethod(_runs._limit)
    update_run = _runs.update_run
    delete_run = _runs.delete_run
    add_points = _runs.add_points
    _insert_points = _runs._insert_points
    count_points = _runs.count_points

    # -- datasets (_datasets.py)
    _dataset = _datasets._dataset
    create_dataset = _datasets.create_dataset
    get_dataset = _datasets.get_dataset
    dataset_rows_json = _datasets.dataset_rows_json
    dataset_rows = _datasets.dataset_rows
    list_datasets = _datasets.list_datasets
    update_dataset = _datasets.update_dataset
    delete_dataset = _datasets.delete_dataset

    # -- the model registry (_registry.py)
    put_model = _registry.put_model
    _model = _registry._model
    get_model = _registry.get_model
    list_models = _registry.list_models
    delete_model = _registry.delete_model

    # -- jobs (_jobs.py)
    _job_values = _jobs._job_values
    create_job = _jobs.create_job
    _job = _jobs._job
    get_job = _jobs.get_job
    update_job = _jobs.update_job
    list_jobs = _jobs.list_jobs
    lease_job = _jobs.lease_job
    release_job = _jobs.release_job
