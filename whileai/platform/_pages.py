"""The run page: GET /runs/{id} as a small HTML page, and GET /login?key=... to open it in a browser.

The page shows the run's status, step/total, held-out before/after, cost with its
basis, the loss curve (inline SVG from the series), config as given and the
summary. Everything a user logged is HTML-escaped, and the page allows no
script at all (Content-Security-Policy). A browser authenticates with a cookie
holding the API key, set once by ``/login?key=...``; API clients may send the
bearer header instead.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from whileai.platform._routes_common import COOKIE_NAME, api_key_from, store
from whileai.platform.store import NotFoundError
from whileai.simulations import defaults

__all__ = ["router"]

router = APIRouter(include_in_schema=False)

_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # the login link carries the key in its query string
    "Cache-Control": "no-store",
}
_STYLE = (
    "body{font:15px/1.5 system-ui,sans-serif;max-width:58rem;margin:2rem auto;padding:0 1rem;color:#222}"
    "h1{font-size:1.4rem;margin-bottom:.2rem}.muted{color:#777}.big{font-size:1.6rem;font-weight:600}"
    "pre{background:#f6f6f6;padding:.7rem;overflow:auto;font-size:13px}table{border-collapse:collapse}"
    "td,th{padding:.2rem .8rem .2rem 0;text-align:left;vertical-align:top}"
    ".s-running{color:#b07800}.s-done{color:#187a2f}.s-failed{color:#b3261e}.s-stopped{color:#555}"
)


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    html = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<meta name="viewport" content="width=device-width,initial-scale=1"><style>{_STYLE}</style></head>'
        f"<body>{body}</body></html>"
    )
    return HTMLResponse(html, status_code=status, headers=_HEADERS)


def _login_help(request: Request, status: int = 401, note: str = "") -> HTMLResponse:
    target = quote(request.url.path, safe="/")
    return _page(
        "log in",
        f"<h1>Log in to see this page</h1><p>{escape(note)}</p>"
        "<p>Open this address once in this browser, with your API key in place of <code>KEY</code>:</p>"
        f"<pre>{escape(str(request.base_url).rstrip('/'))}/login?key=KEY&amp;next={escape(target)}</pre>"
        "<p>The local account's key is in the file <code>local_key</code> under the data root "
        "(<code>$WHILEAI_HOME</code>, else <code>~/.whileai</code>); the platform printed it on its first start.</p>",
        status,
    )


def _account(request: Request) -> str | None:
    key = api_key_from(request, allow_cookie=True)
    return store(request).account_for_key(key) if key else None


@router.get("/login")
def login(request: Request, key: str = "", next: str = "/runs") -> Response:
    """Set the key cookie and go on to ``next`` (a path on this server)."""
    if not key or store(request).account_for_key(key) is None:
        return _login_help(request, 401, "That key is not valid on this platform." if key else "")
    if not next.startswith("/") or next.startswith("//") or "\\" in next:
        next = "/runs"
    response = RedirectResponse(next, status_code=303, headers={"Referrer-Policy": "no-referrer"})
    response.set_cookie(
        COOKIE_NAME, key, httponly=True, samesite="lax", secure=request.url.scheme == "https", max_age=30 * 24 * 3600
    )
    return response


@router.get("/")
def home() -> Response:
    return RedirectResponse("/runs", status_code=307)


@router.get("/runs")
def runs_page(request: Request) -> HTMLResponse:
    account = _account(request)
    if account is None:
        return _login_help(request)
    rows = "".join(
        f'<tr><td><a href="/runs/{escape(r["id"])}">{escape(r["name"] or r["id"])}</a></td>'
        f'<td class="s-{escape(r["status"])}">{escape(r["status"])}</td>'
        f"<td>{r['step']}/{r['total_steps'] if r['total_steps'] is not None else '?'}</td>"
        f"<td>{escape(r['dataset'] or '')}</td></tr>"
        for r in store(request).list_runs(account)
    )
    return _page("runs", f"<h1>Runs</h1><table><tr><th>run</th><th>status</th><th>step</th><th>dataset</th></tr>{rows}</table>")


@router.get("/runs/{run_id}")
def run_page(run_id: str, request: Request) -> HTMLResponse:
    account = _account(request)
    if account is None:
        return _login_help(request)
    try:
        run = store(request).get_run(account, run_id)
    except NotFoundError:
        return _page("not found", f"<h1>No run {escape(run_id)} in this account</h1>", 404)
    return _page(run["name"] or run["id"], _run_body(run))


# --------------------------------------------------------------------------- page parts


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return escape(str(value))


def _json_block(value: Any) -> str:
    return f"<pre>{escape(json.dumps(value, indent=2, ensure_ascii=False, default=str))}</pre>"


_HOLDOUT_LABELS = {"pair_accuracy": "held-out pair accuracy", "row_accuracy": "held-out row accuracy"}


def _holdout(summary: dict[str, Any]) -> str:
    found = []
    training = summary.get("training")
    metric = training.get("metric") if isinstance(training, dict) else None
    rate = _HOLDOUT_LABELS.get(metric, "held-out pass rate")  # a reward model's before/after is an accuracy
    for prefix, label, better in (("holdout", rate, "higher"), ("holdout_loss", "held-out loss", "lower")):
        if f"{prefix}_before" in summary or f"{prefix}_after" in summary:
            found.append((label, summary.get(f"{prefix}_before"), summary.get(f"{prefix}_after"), better))
    if not found and isinstance(training, dict) and ("before" in training or "after" in training):
        found.append(("held-out", training.get("before"), training.get("after"), "higher"))
    return "".join(
        f'<p class="big">{escape(label)}: {_fmt(before) if before is not None else "?"} &rarr; '
        f'{_fmt(after) if after is not None else "?"} <span class="muted">({better} is better)</span></p>'
        for label, before, after, better in found
    )


def _cost(run: dict[str, Any]) -> str:
    basis = run.get("cost_basis")
    if not basis:
        return ""
    amount = f"about ${run['cost_usd']:.2f}" if run.get("cost_usd") is not None else "no cost estimate"
    return f"<p>Cost: {escape(amount)} <span class=\"muted\">({escape(str(basis.get('text', '')))})</span></p>"


def _curve(series: list[dict[str, Any]]) -> str:
    names: list[str] = []
    for point in series:
        for name in point["metrics"]:
            if name not in names:
                names.append(name)
    wanted = [n for n in ("loss", "eval_loss") if n in names] or names[:1]
    if not wanted:
        return '<p class="muted">No points logged yet.</p>'
    width, height, pad = 640, 220, 30
    lines, legend = [], []
    colors = ("#1f5fbf", "#c2410c")
    curves = {}
    for name in wanted:
        xy = [
            (p["step"] if p["step"] is not None else i, p["metrics"][name])
            for i, p in enumerate(series)
            if isinstance(p["metrics"].get(name), (int, float))
        ]
        stride = max(1, len(xy) // defaults.PAGE_CURVE_MAX_POINTS)
        curves[name] = xy[::stride] + ([xy[-1]] if xy and (len(xy) - 1) % stride else [])
    every = [pt for xy in curves.values() for pt in xy]
    x0, x1 = min(x for x, _ in every), max(x for x, _ in every)
    y0, y1 = min(y for _, y in every), max(y for _, y in every)
    sx = (width - 2 * pad) / ((x1 - x0) or 1)
    sy = (height - 2 * pad) / ((y1 - y0) or 1)
    for (name, xy), color in zip(curves.items(), colors):
        pts = " ".join(f"{pad + (x - x0) * sx:.1f},{height - pad - (y - y0) * sy:.1f}" for x, y in xy)
        lines.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{pts}"/>')
        legend.append(f'<span style="color:{color}">&#9632; {escape(name)}</span>')
    axes = (
        f'<text x="2" y="{pad - 8}" font-size="11">{_fmt(y1)}</text>'
        f'<text x="2" y="{height - 4}" font-size="11">{_fmt(y0)}</text>'
        f'<text x="{width - pad}" y="{height - 4}" font-size="11" text-anchor="end">step {_fmt(x1)}</text>'
    )
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="loss curve">{axes}{"".join(lines)}</svg>'
    )
    return f"<div>{' '.join(legend)}</div>{svg}"


def _run_body(run: dict[str, Any]) -> str:
    summary = run.get("summary") or {}
    total = run["total_steps"] if run["total_steps"] is not None else "?"
    parts = [
        f"<h1>{escape(run['name'] or run['id'])}</h1>",
        f'<p class="muted">{escape(run["id"])}'
        + (f" &middot; dataset {escape(run['dataset'])}" if run.get("dataset") else "")
        + "</p>",
        f'<p><b class="s-{escape(run["status"])}">{escape(run["status"])}</b> &middot; step {run["step"]}/{escape(str(total))}'
        + f" &middot; {len(run['series'])} points</p>",
        _holdout(summary),
        _cost(run),
    ]
    if run.get("error"):
        parts.append(f"<h2>Error</h2><pre>{escape(run['error'])}</pre>")
    parts.append("<h2>Curve</h2>" + _curve(run["series"]))
    parts.append("<h2>Config</h2>" + _json_block(run["config"]))
    if summary:
        parts.append(f"<h2>Summary</h2><p>Keys: {escape(', '.join(summary))}</p>" + _json_block(summary))
    return "".join(parts)
