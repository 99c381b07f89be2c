"""The run pages' routes: HTML shells, the page-data JSON their scripts read, sign-in and static files.

    GET /runs                     the runs list          GET /page-data/runs
    GET /runs/{id}                a run                  GET /page-data/runs/{id}[?metrics=&start=&end=]
                                                         GET /page-data/runs/{id}/live?after=STEP
    GET /compare?runs=a,b,...     2 to 10 runs           GET /page-data/compare?runs=...[&metrics=&start=&end=]
    GET /sweeps/{sweep}           one sweep              GET /page-data/sweeps/{sweep}
                                                         GET /page-data/runs/{id}/log[?offset=N]

A shell is fixed HTML (nothing a user logged is in it); the page's script reads
the page-data route and inserts every logged string as text. A page-data
route answers 401 without a session or bearer key, and 404 for a run that is
not the reader's account's, exactly like a missing one.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from whileai.core import codec
from whileai.platform.api.common import ApiError, base_url, store
from whileai.platform.store.records import RunRecord
from whileai.platform.store.values import NotFoundError
from whileai.platform import defaults
from whileai.platform.pages import _charts, _columns, _episodes, _list, _series, _setup, _views, auth
from whileai.platform.pages._shapes import CompareChart, RunView, ServedName

__all__ = ["router"]

router = APIRouter(include_in_schema=False)
router.include_router(auth.router)

_HERE = Path(__file__).parent
_STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
# Every static file the pages load, read once: a request names one of these, never a path on disk.
_STATIC = {
    str(p.relative_to(_HERE / "static")): (p.read_bytes(), _STATIC_TYPES[p.suffix])
    for p in sorted((_HERE / "static").rglob("*")) if p.suffix in _STATIC_TYPES
}
_VERSION = hashlib.sha256(b"".join(body for body, _ in _STATIC.values())).hexdigest()[:12]  # busts caches on change
_SHELL = (_HERE / "templates" / "shell.html").read_text()
_PAGES = ("runs", "run", "compare", "sweep")


def _shell(page: str, status: int = 200) -> HTMLResponse:
    html = _SHELL.replace("{{page}}", page).replace("{{version}}", _VERSION)
    html = html.replace("{{poll_ms}}", str(defaults.LIVE_POLL_MS))
    return HTMLResponse(html, status_code=status, headers=auth.PAGE_HEADERS)


def _reader(request: Request) -> str:
    account = auth.page_account(request)
    if account is None:
        raise ApiError(401, "sign in first: open /signin, or send 'Authorization: Bearer <key>'", "unauthorized")
    return account


def _page(request: Request, page: str, check: Any = None) -> Response:
    """The shell for a signed-in reader (404 when ``check`` finds nothing of theirs); else the sign-in form."""
    account = auth.page_account(request)
    if account is None:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/signin?next={quote(target, safe='')}", status_code=303, headers=auth.PAGE_HEADERS)
    if check is not None:
        try:
            check(account)
        except (NotFoundError, ApiError):
            return _shell("notfound", 404)
    return _shell(page)


def _data(value: Any) -> Response:
    try:  # bytes straight from the encoder: a 20 MB page of series is not also held as text
        body = codec.dumps_bytes(value)
    except TypeError:  # a record orjson will not encode (an integer past 64 bits): the series as plain values
        body = codec.dumps_bytes(_plain(value))
    response = Response(body, media_type="application/json")
    response.headers.update(auth.PAGE_HEADERS)
    return response


def _plain(value: Any) -> Any:
    """``value`` with the series' pre-encoded JSON text (orjson fragments) decoded back to lists."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    contents = getattr(value, "contents", None)
    if contents is not None and type(value).__name__ == "Fragment":
        return json.loads(contents)
    return value


# --------------------------------------------------------------------------- shells


@router.get("/")
def home() -> Response:
    return RedirectResponse("/runs", status_code=307)


@router.get("/runs")
def runs_page(request: Request) -> Response:
    return _page(request, "runs")


@router.get("/runs/{run_id}")
def run_page(run_id: str, request: Request) -> Response:
    return _page(request, "run", lambda acct: store(request).get_run(acct, run_id, series=False))


@router.get("/compare")
def compare_page(request: Request, runs: str = "") -> Response:
    return _page(request, "compare", lambda acct: _compare_records(request, acct, runs))


@router.get("/sweeps/{sweep}")
def sweep_page(sweep: str, request: Request) -> Response:
    def check(acct: str) -> None:
        if not _list.sweep_records(store(request), acct, sweep):
            raise NotFoundError(sweep)

    return _page(request, "sweep", check)


@router.get("/favicon.ico")
def favicon() -> Response:
    return Response(status_code=204)


@router.get("/static/{name:path}")
def static(name: str) -> Response:
    found = _STATIC.get(name)
    if found is None:
        raise ApiError(404, f"no static file {name!r}; the pages serve {', '.join(sorted(_STATIC))}", "not_found")
    body, kind = found
    return Response(body, media_type=kind, headers={"Cache-Control": "public, max-age=86400",
                                                    "X-Content-Type-Options": "nosniff"})


# --------------------------------------------------------------------------- page data


@router.get("/page-data/runs")
def runs_data(
    request: Request,
    status: str | None = None, method: str | None = None, recipe: str | None = None,
    dataset: str | None = None, sweep: str | None = None, cols: str | None = None,
    page: int = Query(1, ge=1), per_page: int = Query(defaults.RUNS_PER_PAGE, ge=1, le=defaults.RUNS_PER_PAGE_MAX),
) -> Response:
    acct = _reader(request)
    columns = _columns.parse(cols)
    filters = {"status": status, "method": method, "recipe": recipe, "dataset": dataset, "sweep": sweep}
    the_store = store(request)
    found = _list.list_page(the_store, acct, filters, page, per_page)
    records = found["records"]
    paging = {k: v for k, v in found.items() if k != "records"}  # total, choices, page, per_page, pages, filters
    extra = _columns.values(the_store, records, columns)
    rows = [{**_views.list_row(r), "cols": extra[r["id"]], "parent": _columns.parent(r)} for r in records]
    return _data({"runs": rows, **paging, "compare": [defaults.COMPARE_MIN_RUNS, defaults.COMPARE_MAX_RUNS],
                  "columns": columns, "column_choices": _columns.choices(the_store, records)})


def _metrics_arg(metrics: str | None) -> list[str] | None:
    return [m for m in metrics.split(",") if m] if metrics else None


@router.get("/page-data/runs/{run_id}")
def run_data(run_id: str, request: Request, metrics: str | None = None,
             start: float | None = None, end: float | None = None) -> Response:
    acct = _reader(request)
    the_store = store(request)
    record = the_store.get_run(acct, run_id, series=False)
    cols = _series.columns(the_store, run_id)
    if metrics is not None or start is not None or end is not None:  # a zoom: these series only, in range
        return _data({"series": _series.chart_series(cols, _metrics_arg(metrics), start, end, encoded=True)})
    return _data(_run_view(request, acct, record, cols))


@router.get("/page-data/runs/{run_id}/live")
def run_live(run_id: str, request: Request, after: float = -1) -> Response:
    """Status and the points past step ``after``: what a running run's page polls for (LIVE_POLL_MS)."""
    acct = _reader(request)
    the_store = store(request)
    record = the_store.get_run(acct, run_id, series=False)
    cols = _series.columns(the_store, run_id)
    return _data({"status": record["status"], "step": record["step"], "total_steps": record["total_steps"],
                  "updated_at": record["updated_at"], "created_at": record["created_at"],
                  "metrics": sorted(cols.metrics), "points": _series.points_after(cols, after, encoded=True)})


@router.get("/page-data/runs/{run_id}/log")
def run_log(run_id: str, request: Request, offset: int | None = Query(None, ge=0)) -> Response:
    """The worker's log of the run's job (its tail, or the bytes past ``offset``): found by job id, this account's."""
    acct = _reader(request)
    the_store = store(request)
    record = the_store.get_run(acct, run_id, series=False)  # another account's run: 404, like a missing one
    return _data({**_setup.worker_log(the_store, acct, record["id"], offset), "status": record["status"]})


def _served(request: Request, acct: str, run_id: str) -> list[ServedName]:
    models = [m for m in store(request).list_models(acct) if m.get("adapterRunId") == run_id]
    endpoint = f"{base_url(request)}/v1"
    return [{"name": m["name"], "version": m["version"], "endpoint": endpoint, "baseModel": m.get("baseModel")}
            for m in models]


def _run_view(request: Request, acct: str, record: RunRecord, cols: _series.Columns) -> RunView:
    summary: dict[str, Any] = record["summary"] if isinstance(record.get("summary"), dict) else {}
    names = sorted(cols.metrics)
    drawn = _charts.layout(cols)
    charts = [c for section in drawn["sections"] for c in section["charts"]]
    monitor = _views.monitor_view(summary, names)
    wanted = [m for c in charts for m in c["metrics"]] + (monitor["metrics"] if monitor else [])
    parts = _views.config_parts(record)
    delta = summary.get("delta") if isinstance(summary.get("delta"), dict) else None
    shown = ("holdout_before", "holdout_after", "holdout_loss_before", "holdout_loss_after", "delta",
             "monitor", "selection", "export", "export_report", "adapter", "setup", "expect", "episodes")
    return {
        "run": {k: v for k, v in record.items() if k not in ("config", "summary")},
        "facts": _views.facts(record),
        "headline": _views.headline(summary),
        "delta": delta,
        "charts": charts,
        "sections": drawn["sections"],
        "scalars": drawn["scalars"],
        "setup": _setup.setup(record),
        "series": _series.chart_series(cols, wanted, encoded=True),
        "unstepped": _series.unstepped(cols),
        "monitor": monitor,
        "selection": summary.get("selection") if isinstance(summary.get("selection"), dict) else None,
        "export": _first_dict(summary.get("export_report"), summary.get("export"),
                              (record.get("config") or {}).get("export_report")
                              if isinstance(record.get("config"), dict) else None),
        "training": summary.get("training") if isinstance(summary.get("training"), dict) else None,
        "episodes": _episodes.episodes_view(summary),
        "adapter": summary.get("adapter"),
        "served": _served(request, acct, record["id"]),
        "config": {**parts, "reproduce": _views.reproduce_commands(record)},
        "summary_other": {k: v for k, v in summary.items() if k not in shown and k not in ("training", "phase")},
        "live": {"poll_ms": defaults.LIVE_POLL_MS, "buckets": defaults.CHART_BUCKETS},
    }


def _first_dict(*values: Any) -> dict[str, Any] | None:
    return next((v for v in values if isinstance(v, dict)), None)


def _compare_records(request: Request, acct: str, runs: str) -> list[RunRecord]:
    ids = [r for r in dict.fromkeys(runs.split(",")) if r]
    if not defaults.COMPARE_MIN_RUNS <= len(ids) <= defaults.COMPARE_MAX_RUNS:
        raise ApiError(422, f"runs={runs!r} names {len(ids)} runs; compare {defaults.COMPARE_MIN_RUNS} to "
                            f"{defaults.COMPARE_MAX_RUNS} (COMPARE_MIN_RUNS, COMPARE_MAX_RUNS), "
                            "e.g. /compare?runs=run_a,run_b", "invalid_value")
    return [store(request).get_run(acct, r, series=False) for r in ids]


@router.get("/page-data/compare")
def compare_data(request: Request, runs: str = "", metrics: str | None = None,
                 start: float | None = None, end: float | None = None) -> Response:
    acct = _reader(request)
    records = _compare_records(request, acct, runs)
    cols = {r["id"]: _series.columns(store(request), r["id"]) for r in records}
    if metrics is not None or start is not None or end is not None:
        return _data({"series": {rid: _series.chart_series(c, _metrics_arg(metrics), start, end, encoded=True)
                                 for rid, c in cols.items()}})
    names = sorted({n for c in cols.values() for n in c.metrics})
    everywhere = [n for n in names if all(n in c.metrics for c in cols.values())]
    charts: list[CompareChart] = [{"id": "m:" + n, "title": n, "metrics": [n], "in_all": n in everywhere}
              for g in _views.chart_groups(names) for n in g["metrics"]]
    charts.sort(key=lambda c: not c["in_all"])  # metrics every run logged first, loss first among them
    return _data({
        "runs": [{"id": r["id"], "name": r["name"], "status": r["status"], "dataset": r["dataset"],
                  "cost_usd": r["cost_usd"], "cost_basis": r["cost_basis"], "facts": _views.facts(r),
                  "headline": _views.headline(r.get("summary")),
                  "delta": (r.get("summary") or {}).get("delta", {}).get("verdict")
                  if isinstance((r.get("summary") or {}).get("delta"), dict) else None} for r in records],
        "charts": charts,
        "series": {rid: _series.chart_series(c, [m for ch in charts for m in ch["metrics"] if m in c.metrics],
                                             encoded=True)
                   for rid, c in cols.items()},
        "config": _views.compare_config(records),
    })


@router.get("/page-data/sweeps/{sweep}")
def sweep_data(sweep: str, request: Request) -> Response:
    acct = _reader(request)
    records = _list.sweep_records(store(request), acct, sweep)
    if not records:
        raise NotFoundError(f"sweep {sweep!r} not found in this account; its runs carry the sweep id in their config")
    knobs = _views.sweep_knobs(records)
    rows = []
    for r in records:
        f = _views.facts(r)
        rows.append({"id": r["id"], "name": r["name"], "status": r["status"], "cost_usd": r["cost_usd"],
                     "knobs": {k: _views.knob_value(r, k) for k in knobs}, "holdout": f["holdout"],
                     "alarms": f["alarms"], "verdict": f["verdict"], "method": f["method"], "recipe": f["recipe"]})
    label = next((row["holdout"]["label"] for row in rows if row["holdout"]), "held-out")
    return _data({"sweep": sweep, "knobs": knobs, "runs": rows, "holdout_label": label,
                  "categorical_max": defaults.SWEEP_CATEGORICAL_MAX})
