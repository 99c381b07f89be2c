"""Rows from any accepted source, and the task key that groups them.

Datasets, judges and the delta report all take "a dataset" in the same forms: a
list of rollout rows, a ``SimulationData``, a ``ScoredData``, a JSONL path, or a
pushed dataset (a handle, its record, or its ``ds_...`` id). ``rows_of`` turns
each of them into a list of row mappings; ``task_key`` (the row contract's,
from ``rows``) says which task a row belongs to.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from whileai.core.ids import names_id

from whileai.domain.rows.taskkey import task_key

__all__ = ["rows_of", "read_jsonl", "task_key", "group_by_task", "describe_source", "ACCEPTED_SOURCES"]

ACCEPTED_SOURCES = (
    "a list of rollout rows (dicts), a SimulationData, a ScoredData, a JSONL path, "
    "or a pushed dataset (its handle, record or 'ds_...' id)"
)


def _is_dataset_id(value: Any) -> bool:
    return names_id(value, "ds")


def _dataset_id(source: Any) -> str | None:
    """The ``ds_...`` id when ``source`` names a pushed dataset, else None."""
    if _is_dataset_id(source):
        return source
    ident = getattr(source, "id", None)
    if isinstance(ident, str) and ident.startswith("ds_") and isinstance(getattr(source, "rows", None), int):
        return ident  # a DatasetHandle (its .rows is a count, not the rows)
    if isinstance(source, Mapping) and "messages" not in source:
        ident = source.get("id")
        if isinstance(ident, str) and ident.startswith("ds_"):
            return ident  # a dataset record from the platform
    return None


def _as_row(item: Any, index: int) -> Mapping[str, Any]:
    if type(item) is dict or isinstance(item, Mapping):
        return item
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True)
    raise TypeError(
        f"row {index} is a {type(item).__name__}, not a rollout row; each row must be a dict "
        "with 'messages' (see the row contract in docs/architecture.md)"
    )


def read_jsonl(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Read a JSONL file of rows; a line that breaks the row contract raises ``RowFormatError`` naming it."""
    if not Path(path).expanduser().is_file():
        raise FileNotFoundError(f"{str(path)!r} is not a file; pass a JSONL path that exists, or {ACCEPTED_SOURCES}")
    from whileai.domain.rows.rollouts import read_rows

    return read_rows(Path(path).expanduser())[0]


def rows_of(source: Any) -> list[Mapping[str, Any]]:
    """The rows of ``source`` as a list of mappings (never copies, never mutates).

    ``source`` is any of ``ACCEPTED_SOURCES``. A pushed dataset is fetched from
    the platform through the client seam.
    """
    ident = _dataset_id(source)
    if ident is not None:
        from whileai.domain.client import get_client

        body = get_client().request("GET", f"/datasets/{ident}/rows")
        return list(body["rows"])
    if isinstance(source, (str, os.PathLike)):
        return list(read_jsonl(source))  # a list of Mappings (lists are invariant)
    if isinstance(source, Mapping):
        what = "a single rollout row" if "messages" in source else "a mapping"
        raise TypeError(f"got {what}, not a dataset; pass {ACCEPTED_SOURCES} (wrap one row in a list)")
    rows_attr = getattr(source, "rows", None)
    if rows_attr is not None and not isinstance(source, (list, tuple)):
        items = rows_attr() if callable(rows_attr) else rows_attr
    elif isinstance(source, Iterable) and not isinstance(source, (bytes, bytearray)):
        items = source
    else:
        raise TypeError(f"cannot read rows from a {type(source).__name__}; pass {ACCEPTED_SOURCES}")
    return [_as_row(item, i) for i, item in enumerate(items)]


def describe_source(source: Any) -> str | None:
    """A short label for where the rows came from (dataset id, path or name), for reports."""
    ident = _dataset_id(source)
    if ident is not None:
        return ident
    if isinstance(source, (str, os.PathLike)):
        return str(source)
    name = getattr(source, "name", None)
    return name if isinstance(name, str) else None


def group_by_task(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[int]]:
    """Task key -> indices of its rows, tasks in order of first appearance."""
    groups: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        groups.setdefault(task_key(row), []).append(i)
    return groups
