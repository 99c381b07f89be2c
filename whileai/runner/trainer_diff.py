"""Which of two runs' trainer settings differ, and whether a difference is the user's or a library default's.

Reads the ``trainer`` record each job notes on its run (``whileai.jobs.trainer_record``): every
field of the TRL config as the trainer saw it, the fields that held the library's own default,
and the library versions. A field that differs while holding the library default on both
sides changed because the library changed (for example TRL's GRPO ``loss_type`` between minor
versions), not because of anything in the spec.
"""

from __future__ import annotations

from typing import Any

__all__ = ["trainer_differences"]

_SKIP = {"output_dir", "logging_dir", "run_name", "hub_model_id"}  # per-run paths and names, never a setting


def _record(run: dict[str, Any]) -> dict[str, Any]:
    summary = run.get("summary") or {}
    found = summary.get("trainer")
    return found if isinstance(found, dict) else {}


def _libraries(a: dict[str, Any], b: dict[str, Any]) -> str:
    va, vb = a.get("versions") or {}, b.get("versions") or {}
    changed = [f"{n} {va.get(n)} -> {vb.get(n)}" for n in sorted(set(va) | set(vb)) if va.get(n) != vb.get(n)]
    return ", ".join(changed) or "same library versions"


def trainer_differences(run_a: dict[str, Any], run_b: dict[str, Any]) -> list[list[str]]:
    """Rows ``[field, value in A, value in B, cause]`` for every trainer setting that differs.

    ``cause`` is ``library default (trl 1.16.0 -> 1.17.0)`` when both sides held their library's
    default, else ``set by the spec``. Empty when either run has no trainer record.
    """
    a, b = _record(run_a), _record(run_b)
    if not a or not b:
        return []
    rows: list[list[str]] = []
    ca, cb = a.get("config") or {}, b.get("config") or {}
    da, db = set(a.get("library_defaults") or ()), set(b.get("library_defaults") or ())
    for key in sorted(set(ca) | set(cb)):
        if key in _SKIP or ca.get(key) == cb.get(key):
            continue
        from_library = (key in da or key not in ca) and (key in db or key not in cb)
        cause = f"library default ({_libraries(a, b)})" if from_library else "set by the spec"
        rows.append([key, repr(ca.get(key, "(absent)")), repr(cb.get(key, "(absent)")), cause])
    pa, pb = a.get("peft") or {}, b.get("peft") or {}
    for name in sorted(set(pa) | set(pb)):
        xa, xb = pa.get(name) or {}, pb.get(name) or {}
        for key in sorted(set(xa) | set(xb)):
            if xa.get(key) != xb.get(key):
                rows.append([f"peft.{name}.{key}", repr(xa.get(key)), repr(xb.get(key)), "peft config"])
    return rows
