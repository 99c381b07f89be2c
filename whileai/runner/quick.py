"""``quick=true``: any recipe at a few steps, to tell a working install from a broken one in about a minute.

A full recipe trains for minutes to hours, and its ``expect`` block is sized for the full run,
so shortening ``steps`` by hand makes every expect line fail and a working install looks broken.
``python -m whileai run recipe=NAME quick=true`` instead rewrites the composed, validated spec
before the run: every stage's steps capped at QUICK_STEPS (epochs left to the steps), the held-out
prompts capped at QUICK_HOLDOUT_ROWS, an SFT stage's rows capped at what its capped steps reach
(``sft_rows``: tokenizing and checking 753 rows for 4 steps of 8 was most of a quick run's time), and the
expect block set aside. The run says so: its closing
summary reads ``quick run: expect not checked``, its record carries ``quick`` (what was changed)
and its name ends with ``quick``. Everything else (data, gates, export, training, the held-out
measure, serving) runs as in the full recipe.

``quick`` is read off the command line before Hydra sees it (it is no key of the spec), and
travels to a sweep's joblib workers in QUICK_ENV.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from whileai.core.runnerrecord import QuickNote

from whileai.runner import defaults

if TYPE_CHECKING:
    from whileai.runner.schema import RecipeSpec

__all__ = ["QUICK_ENV", "pop_quick", "is_quick", "rewrite", "note", "sft_rows", "status_line"]


class _State(TypedDict, total=False):
    """The note of the rewrite this process ran (a run, or one job of a sweep, is one process)."""

    note: QuickNote


QUICK_ENV = "WHILEAI_RUNNER_QUICK"
_STATE: _State = {}
_TRUE = ("true", "True", "1", "yes", "on")
_FALSE = ("false", "False", "0", "no", "off")


def pop_quick(argv: list[str]) -> tuple[list[str], bool]:
    """(argv without ``quick=...``, whether a quick run was asked for); sets QUICK_ENV for the jobs.

    ``quick=maybe`` says the accepted values and exits 2.
    """
    out, quick = [], False
    for arg in argv:
        key, _, value = arg.lstrip("+").partition("=")
        if key == "quick" and "=" in arg:
            if value not in (*_TRUE, *_FALSE):
                print(f"quick={value!r} is not accepted; pass quick=true (a few steps, expect not checked) or leave "
                      "it out", file=sys.stderr)
                raise SystemExit(2)
            quick = value in _TRUE
        else:
            out.append(arg)
    if quick:
        os.environ[QUICK_ENV] = "1"
    else:
        os.environ.pop(QUICK_ENV, None)
    return out, quick


def is_quick() -> bool:
    """True in a run (or a sweep's job) started with ``quick=true``."""
    return os.environ.get(QUICK_ENV) == "1"


def _cap(value: Any, most: int) -> int:
    return most if not isinstance(value, int) or isinstance(value, bool) or value > most else value


class _Caps(TypedDict):
    """The keys a quick run changes on the root or a stage: its steps, its epochs (None) and its held-out rows."""

    steps: int
    epochs: None
    holdout_rows: NotRequired[int]  # on the root, and a stage that sets its own


def _capped(given: dict[str, Any], root: bool) -> _Caps:
    """The root's or a stage's ``steps`` capped, ``epochs`` None (steps decide) and ``holdout_rows`` capped."""
    update: _Caps = {"steps": _cap(given.get("steps"), defaults.QUICK_STEPS), "epochs": None}
    if root or given.get("holdout_rows") is not None:
        update["holdout_rows"] = _cap(given.get("holdout_rows"), defaults.QUICK_HOLDOUT_ROWS)
    return update


def rewrite(spec: RecipeSpec) -> tuple[RecipeSpec, QuickNote]:
    """(the spec a quick run runs, what was changed: ``{"steps", "holdout_rows", "expect_not_checked"}``).

    The root and every stage get ``steps`` capped at QUICK_STEPS and ``epochs`` None (steps decide);
    ``holdout_rows`` is capped at QUICK_HOLDOUT_ROWS; the expect block is emptied (its keys kept,
    every value None, a list empty) and the keys it held are named in the note. Each change is validated
    (``whileai.core.spec.updated``).
    """
    from whileai.core.spec import updated

    asked = spec.expect.model_fields_set
    skipped = sorted(k for k in asked if getattr(spec.expect, k) is not None)
    stages = {name: updated(stage, **_capped(stage.given(), False)) for name, stage in spec.stages.items()}
    # each line asked set to its field's default: None, or an empty list for a list of verdicts (nothing asked)
    emptied = updated(spec.expect, **{k: type(spec.expect).model_fields[k].get_default() for k in asked})
    out = updated(spec, **_capped(spec.given(), True), stages=stages, expect=emptied)
    note: QuickNote = {"steps": defaults.QUICK_STEPS, "holdout_rows": defaults.QUICK_HOLDOUT_ROWS,
            "expect_not_checked": skipped}
    _STATE["note"] = note
    return out, note


def sft_rows(rows: list[dict[str, Any]], batch_size: Any, seed: Any) -> list[dict[str, Any]]:
    """An SFT stage's passing rows in a quick run: QUICK_STEPS batches of ``batch_size`` of them (each row seen once),
    drawn with the run's seed and kept in their order; all of them when they are fewer. The note records the count."""
    import random

    batch = batch_size if isinstance(batch_size, int) and not isinstance(batch_size, bool) and batch_size > 0 else 1
    most = defaults.QUICK_STEPS * batch
    if len(rows) <= most:
        return rows
    kept = sorted(random.Random(seed if isinstance(seed, int) else 0).sample(range(len(rows)), most))
    _STATE.setdefault("note", {})["sft_rows"] = {"kept": most, "of": len(rows)}
    return [rows[i] for i in kept]


def note() -> QuickNote | None:
    """What the quick run in this process changed (``rewrite``'s note), None when the run is not quick."""
    return _STATE.get("note") if is_quick() else None


def status_line(status: Any, note: QuickNote | None = None) -> str:
    """The closing summary's status for a quick run: ``done · quick run: expect not checked (...)``."""
    skipped = (note or {}).get("expect_not_checked") or []
    what = f"{len(skipped)} line(s) set aside" if skipped else "the spec asks nothing"
    rows = (note or {}).get("sft_rows")
    sft = f", SFT on {rows['kept']} of {rows['of']} rows" if isinstance(rows, dict) else ""
    return (f"{status} · quick run: expect not checked ({what}; at most {defaults.QUICK_STEPS} steps per stage, "
            f"{defaults.QUICK_HOLDOUT_ROWS} held-out prompts{sft}: drop quick=true for the full run)")
