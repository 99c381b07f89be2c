"""Columns a person adds to the runs list, and stage runs nested under the run they started from.

A column is named ``config.<key>`` (a dotted key of the run's config, e.g.
``config.beta`` or ``config.dataset.holdout``) or ``metric.<name>`` (the last
value the run logged for that series, e.g. ``metric.loss`` or
``metric.train_runtime``). The list page keeps them in its address
(``/runs?cols=config.beta,metric.loss``), so a view can be shared.

A final metric is read in SQL: the run's newest points whose stored JSON holds
the metric's key (a ``LIKE`` on the run's rows, newest first), decoded one at a
time until its number is found, never by decoding a run's whole series.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from whileai.core.codec import dumps
from whileai.platform.store.tables import Point
from whileai.platform.store.values import InvalidError, loads
from whileai.platform import defaults
from whileai.platform.pages._views import config_parts, flatten
from whileai.platform.store.records import RunRecord

__all__ = ["choices", "parent", "parse", "values"]

_KINDS = ("config", "metric")
_NAME = re.compile(r"^[^\x00-\x1f,]{1,200}$")
#: points read back per run to offer its metric names as columns (the newest ones)
_SAMPLE_POINTS = 50


def parse(cols: str | None) -> list[dict[str, str]]:
    """``[{"id", "kind", "key"}]`` from the address's ``cols``; a malformed one names the accepted form."""
    found: list[dict[str, str]] = []
    for part in dict.fromkeys(p.strip() for p in (cols or "").split(",") if p.strip()):
        kind, _, key = part.partition(".")
        if kind not in _KINDS or not key or not _NAME.match(key):
            raise InvalidError(f"cols={part!r} is not a column; name one as config.<key> (config.beta, "
                               "config.dataset.holdout) or metric.<series> (metric.loss, metric.train_runtime)")
        found.append({"id": part, "kind": kind, "key": key})
    if len(found) > defaults.LIST_EXTRA_COLUMNS_MAX:
        raise InvalidError(f"cols names {len(found)} columns; add at most {defaults.LIST_EXTRA_COLUMNS_MAX} "
                           "(LIST_EXTRA_COLUMNS_MAX)")
    return found


def _config_flat(record: RunRecord) -> dict[str, Any]:
    """The run's config as dotted keys: what it trained with (the config's own keys, as ``wai.train``
    resolved them), then the spec as written for the keys the config leaves out or null (a runner's
    recipe keys; a stage run shares its recipe's spec, so the spec never overrides the run's own)."""
    config: dict[str, Any] = record["config"] if isinstance(record.get("config"), dict) else {}
    top = {k: v for k, v in config.items() if k not in ("extra", "runner", "spec")}
    flat = flatten(top) if top else {}
    spec = config_parts(record)["spec"]
    for k, v in (flatten(spec) if isinstance(spec, dict) and spec else {}).items():
        if flat.get(k) is None:
            flat[k] = v
    return flat


#: newest points holding a metric's key that are decoded to find its last number (a key may also
#: appear inside another metric's name or a string, so a few candidates are read, newest first)
_CANDIDATES = 4


def _last_value(s: Session, run_id: str, name: str) -> float | None:
    """The newest number the run logged as ``name``: its key is searched for in the stored JSON text
    (``"name":``, written by the store's codec), then the few newest matching rows are decoded."""
    token = dumps(name) + ":"
    q = (select(Point.metrics).where(Point.run_id == run_id, Point.metrics.contains(token, autoescape=True))
         .order_by(Point.ts.desc(), Point.pk.desc()).limit(_CANDIDATES))
    for text in s.scalars(q):
        found = loads(text)
        value = found.get(name) if isinstance(found, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
    return None


def values(store: Any, records: list[RunRecord], columns: list[dict[str, str]]) -> dict[str, dict[str, Any]]:
    """``{run id: {column id: value}}`` for the runs shown (their account already checked by the caller)."""
    out: dict[str, dict[str, Any]] = {r["id"]: {} for r in records}
    for r in records:
        flat = _config_flat(r) if any(c["kind"] == "config" for c in columns) else {}
        for c in columns:
            if c["kind"] == "config":
                out[r["id"]][c["id"]] = flat.get(c["key"])
    metrics = [c for c in columns if c["kind"] == "metric"]
    if not metrics or not records:
        return out

    def work(s: Session) -> None:
        for c in metrics:
            for r in records:
                out[r["id"]][c["id"]] = _last_value(s, r["id"], c["key"])

    store._tx(work, write=False)
    return out


def choices(store: Any, records: list[RunRecord]) -> list[str]:
    """Columns to offer: the config keys of the runs shown and the series names of their newest points."""
    keys: dict[str, None] = {}
    for r in records:
        for k, v in _config_flat(r).items():
            if not isinstance(v, (dict, list)) and k.split(".")[0] not in ("command", "versions", "git", "hydra_dir"):
                keys["config." + k] = None
    names: set[str] = set()
    if records:
        def work(s: Session) -> None:
            for r in records:
                q = select(Point.metrics).where(Point.run_id == r["id"]).order_by(Point.ts.desc()).limit(_SAMPLE_POINTS)
                for text in s.scalars(q):
                    found = loads(text)
                    if isinstance(found, dict):
                        names.update(found)

        store._tx(work, write=False)
    return sorted(keys) + ["metric." + n for n in sorted(names)]


def parent(record: RunRecord) -> str | None:
    """The run this one started from (a stage's ``init_from``), or None."""
    found = config_parts(record)["init_from"]
    if not isinstance(found, str):
        training = (record.get("summary") or {}).get("training") if isinstance(record.get("summary"), dict) else None
        found = training.get("init_from") if isinstance(training, dict) else None
    return found if isinstance(found, str) and found != record.get("id") else None
