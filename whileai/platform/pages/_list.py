"""The runs list as the page asks for it: filtered and paged in SQL, newest first.

Status and dataset are columns; method, recipe and sweep live inside the run's
config JSON (or its summary), so they are read with the database's own JSON
functions (``json_extract`` on SQLite, ``jsonb_extract_path_text`` on
PostgreSQL) and never decoded row by row in Python. Thousands of runs answer
one page (RUNS_PER_PAGE) and a count.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import String, cast, func, select
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Session

from whileai.platform.pages._shapes import RunsPage
from whileai.platform.store.records import RunRecord
from whileai.platform.store.tables import Run, run_record
from whileai.platform.store.values import RUN_STATUSES, InvalidError
from whileai.platform import defaults

__all__ = ["FILTERS", "list_page", "sweep_records", "check_filters"]

#: filter name -> where its value is read, first hit wins: ("column", name) or (json column, path...)
_PATHS: dict[str, list[tuple[str, ...]]] = {
    "method": [("config_json", "method"), ("config_json", "spec", "method"), ("config_json", "runner", "spec", "method"),
               ("summary_json", "training", "method")],
    "recipe": [("config_json", "runner", "recipe"), ("config_json", "extra", "runner", "recipe"),
               ("config_json", "recipe"), ("config_json", "spec", "recipe")],
    "sweep": [("config_json", "runner", "sweep_id"), ("config_json", "extra", "runner", "sweep_id"),
              ("config_json", "sweep", "id"), ("config_json", "sweep_id"), ("config_json", "sweep"),
              ("config_json", "spec", "sweep_id")],
}
FILTERS = ("status", "method", "recipe", "dataset", "sweep")


def _json_text(store: Any, column: Any, path: tuple[str, ...]) -> Any:
    if store._sqlite:
        quoted = "".join(f'."{p}"' for p in path)
        return cast(func.json_extract(column, f"${quoted}"), String)
    return func.jsonb_extract_path_text(cast(column, JSONB), *path)


def _expr(store: Any, name: str) -> Any:
    if name == "status":
        return Run.status
    if name == "dataset":
        return Run.dataset
    return func.coalesce(*[_json_text(store, getattr(Run, path[0]), path[1:]) for path in _PATHS[name]])


def check_filters(given: Mapping[str, Any]) -> dict[str, str]:
    """The filters that were given (empty ones dropped); a bad status names the accepted ones."""
    chosen = {k: v for k, v in given.items() if k in FILTERS and isinstance(v, str) and v != ""}
    if "status" in chosen and chosen["status"] not in RUN_STATUSES:
        raise InvalidError(f"status={chosen['status']!r} is not a run status; use one of {', '.join(RUN_STATUSES)}")
    return chosen


def list_page(store: Any, account_id: str, filters: Mapping[str, str | None], page: int, per_page: int) -> RunsPage:
    """One page of the account's runs (newest first) with the total, the page count and each filter's choices."""
    if type(page) is not int or page < 1:
        raise InvalidError(f"page={page!r} is not accepted; pages count from 1")
    if type(per_page) is not int or not 1 <= per_page <= defaults.RUNS_PER_PAGE_MAX:
        raise InvalidError(f"per_page={per_page!r} is not accepted; send 1 to {defaults.RUNS_PER_PAGE_MAX} "
                           "(RUNS_PER_PAGE_MAX)")
    filters = check_filters(filters)

    def work(s: Session) -> tuple[list[RunRecord], int, dict[str, list[str]]]:
        where = [Run.account_id == account_id] + [_expr(store, k) == v for k, v in filters.items()]
        total = s.scalar(select(func.count()).select_from(Run).where(*where)) or 0
        rows = s.scalars(select(Run).where(*where).order_by(Run.pk.desc())
                         .limit(per_page).offset((page - 1) * per_page)).all()
        choices: dict[str, list[str]] = {}
        for name in FILTERS:
            expr = _expr(store, name)
            found = s.execute(select(expr).where(Run.account_id == account_id, expr.is_not(None))
                              .group_by(expr).order_by(expr).limit(defaults.FILTER_CHOICES_MAX)).scalars().all()
            choices[name] = [v for v in found if v != ""]
        return [run_record(r) for r in rows], total, choices

    records, total, choices = store._tx(work, write=False)
    return {"records": records, "total": total, "choices": choices, "page": page, "per_page": per_page,
            "pages": max(1, -(-total // per_page)), "filters": filters}


def sweep_records(store: Any, account_id: str, sweep: str) -> list[RunRecord]:
    """The account's runs of one sweep, oldest first (at most SWEEP_MAX_RUNS)."""

    def work(s: Session) -> list[RunRecord]:
        q = (select(Run).where(Run.account_id == account_id, _expr(store, "sweep") == sweep)
             .order_by(Run.pk.desc()).limit(defaults.SWEEP_MAX_RUNS))
        return [run_record(r) for r in reversed(s.scalars(q).all())]

    return store._tx(work, write=False)
