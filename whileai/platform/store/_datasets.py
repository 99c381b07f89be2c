"""The store's datasets: rows pushed by an account, deduplicated by content, read back as pushed, split siblings.

Plain functions whose first argument, ``store``, is the :class:`~whileai.platform.store.Store`
facade that binds them as its methods; every query is scoped to the caller's account.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from whileai.platform.store._erase import erase_deleted
from whileai.platform.store.records import DatasetDeleted, DatasetRecord
from whileai.platform.store.tables import Dataset, _check_str, _dataset_record, _new_id, _not_found
from whileai.platform.store.values import InvalidError, check_json_value


def _dataset(store: Any, s: Session, account_id: str, dataset_id: Any) -> Dataset:
    d = (
        s.scalar(select(Dataset).where(Dataset.id == dataset_id, Dataset.account_id == account_id))
        if isinstance(dataset_id, str)
        else None
    )
    if d is None:
        raise _not_found("dataset", dataset_id)
    return d


def create_dataset(
    store,
    account_id: str,
    rows: Any,
    *,
    name: str | None = None,
    split: str | None = None,
    sibling: str | None = None,
) -> tuple[DatasetRecord, bool]:
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

    def work(s: Session) -> tuple[DatasetRecord, bool]:
        found = existing(s)
        if found is not None:
            return _dataset_record(found), False
        if sibling is not None:
            store._dataset(s, account_id, sibling)
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
        return store._tx(work)
    except IntegrityError as exc:  # the same content landed from another writer meanwhile
        conflict = exc

    def landed(s: Session) -> tuple[DatasetRecord, bool]:
        found = existing(s)
        if found is None:  # what collided is gone again: the insert's own error says what happened
            raise conflict
        return _dataset_record(found), False

    return store._tx(landed, write=False)


def get_dataset(store: Any, account_id: str, dataset_id: str) -> DatasetRecord:
    return store._tx(lambda s: _dataset_record(store._dataset(s, account_id, dataset_id)), write=False)


def dataset_rows_json(store: Any, account_id: str, dataset_id: str) -> str:
    """The dataset's rows as the stored JSON array text (values and key order as pushed)."""
    return store._tx(lambda s: store._dataset(s, account_id, dataset_id).rows_json, write=False)


def dataset_rows(store: Any, account_id: str, dataset_id: str) -> list[dict[str, Any]]:
    return json.loads(store.dataset_rows_json(account_id, dataset_id))  # stdlib: keeps ints past 64 bits


def list_datasets(store: Any, account_id: str, *, limit: int | None = None) -> list[DatasetRecord]:
    """The account's datasets, newest first (records without their rows)."""
    limit = store._limit(limit)
    cols = [c for c in Dataset.__table__.c if c.name != "rows_json"]

    def work(s: Session) -> list[DatasetRecord]:
        out = s.execute(
            select(*cols).where(Dataset.account_id == account_id).order_by(Dataset.pk.desc()).limit(limit)
        )
        return [_dataset_record(Dataset(**row._mapping)) for row in out]

    return store._tx(work, write=False)


def update_dataset(store: Any, account_id: str, dataset_id: str, changes: dict[str, Any]) -> DatasetRecord:
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

    def work(s: Session) -> DatasetRecord:
        d = store._dataset(s, account_id, dataset_id)
        if values.get("sibling") is not None:
            store._dataset(s, account_id, values["sibling"])
        for k, v in values.items():
            setattr(d, k, v)
        d.updated_at = time.time()
        s.flush()
        return _dataset_record(d)

    return store._tx(work)


def delete_dataset(store: Any, account_id: str, dataset_id: str) -> DatasetDeleted:
    def work(s: Session) -> DatasetDeleted:
        d = store._dataset(s, account_id, dataset_id)
        s.execute(update(Dataset).where(Dataset.account_id == account_id, Dataset.sibling == d.id)
                  .values(sibling=None))  # no dataset names one that is gone
        s.delete(d)
        return {"id": d.id, "deleted": True}

    done = store._tx(work)
    erase_deleted(store)  # its rows' old bytes out of the SQLite file's write-ahead log
    return done
