"""The store's the model registry: served names per account, a version bumped on each re-serve.

Plain functions whose first argument, ``store``, is the :class:`~whileai.platform.store.Store`
facade that binds them as its methods; every query is scoped to the caller's account.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from whileai.platform.store.tables import ServedModel, _check_str, _model_record, _not_found
from whileai.platform.store.records import ModelDeleted, ModelRecord
from whileai.platform.store.values import InvalidError
from whileai.platform import defaults


def put_model(
    store,
    account_id: str,
    name: str,
    *,
    base_model: str | None = None,
    adapter: str | None = None,
    adapter_run_id: str | None = None,
) -> ModelRecord:
    """Register ``name`` (version 1), or point an existing name at the new adapter and bump its version."""
    name = _check_str(name, "name", defaults.PLATFORM_MAX_KEY_CHARS, required=True)
    base_model = _check_str(base_model, "baseModel")
    adapter = _check_str(adapter, "adapter", 4000)
    adapter_run_id = _check_str(adapter_run_id, "adapterRunId", 32)
    if base_model is None and adapter_run_id is None:
        raise InvalidError("a model needs baseModel or adapterRunId (the run whose adapter it serves)")

    def work(s: Session) -> ModelRecord:
        if adapter_run_id is not None:
            store._run(s, account_id, adapter_run_id)
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

    return store._tx(work)


def _model(store: Any, s: Session, account_id: str, name: Any) -> ServedModel:
    m = s.scalar(select(ServedModel).where(ServedModel.account_id == account_id, ServedModel.name == name))
    if m is None:
        raise _not_found("model", name)
    return m


def get_model(store: Any, account_id: str, name: str) -> ModelRecord:
    return store._tx(lambda s: _model_record(store._model(s, account_id, name)), write=False)


def list_models(store: Any, account_id: str) -> list[ModelRecord]:
    q = select(ServedModel).where(ServedModel.account_id == account_id).order_by(ServedModel.name)
    return store._tx(lambda s: [_model_record(m) for m in s.scalars(q)], write=False)


def delete_model(store: Any, account_id: str, name: str) -> ModelDeleted:
    def work(s: Session) -> ModelDeleted:
        s.delete(store._model(s, account_id, name))
        return {"name": name, "deleted": True}

    return store._tx(work)
