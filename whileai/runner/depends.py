"""What a run's result depends on beyond its spec, read off its record, and where two runs differ in it.

A held-out figure is a function of the spec and of these: the base's weights (their SHA-256, which the job
records: ``training["base_weights"]``), the data (the pushed dataset's content hash, and the held-out prompts'
digest), torch's CPU kernel path and thread count (``training["compute"]``: float sums are split differently by
the AVX2 and the scalar kernels, so a trained adapter follows them), the packages installed off
``constraints.txt``, the versions of what computes and the commit. ``diff`` prints the ones two runs differ in
and ``reproduce`` the ones a reproduction differs in from its original, so a moved result says first what moved
under it.
"""

from __future__ import annotations

from typing import Any, TypedDict

from whileai.core.stats import constraints_words

from whileai.runner import defaults
from whileai.runner.provenance import record_of

__all__ = ["depends_on", "depends_differences"]


def _short(value: Any) -> str | None:
    return str(value)[: defaults.HASH_SHOWN_CHARS] if value else None


def _training(record: dict[str, Any]) -> dict[str, Any]:
    summary = record.get("summary")
    training = summary.get("training") if isinstance(summary, dict) else None
    return training if isinstance(training, dict) else {}


def _part(record: dict[str, Any], key: str) -> dict[str, Any]:
    found = record.get(key)
    return found if isinstance(found, dict) else {}


def _kernel_path(compute: dict[str, Any]) -> str | None:
    """``AVX2``, or ``DEFAULT (forced: ATEN_CPU_CAPABILITY=default)``; None for a run that did not record it."""
    chosen = compute.get("cpu_capability")
    if chosen is None:
        return None
    forced = compute.get("aten_cpu_capability")
    return f"{chosen} (forced: ATEN_CPU_CAPABILITY={forced})" if forced else str(chosen)


def _blas_text(compute: dict[str, Any]) -> str | None:
    """``AVX512 (set by whileai; the processor's own AVX512_E1)``, ``auto (the processor's own AVX2)``; None for a
    run that did not record it (a job before the field, a torch without MKL)."""
    blas = compute.get("blas")
    if not isinstance(blas, dict) or not blas.get("branch"):
        return None
    by = f"set by {blas['set_by']}; " if blas.get("set_by") else ""
    return f"{blas['branch']} ({by}the processor's own {blas.get('processor')})"


#: What one run's result depends on beyond its spec, each entry under the words ``diff`` and ``reproduce`` print
#: for it: the base weights' hash, the data's content hash, the held-out prompts' digest (each cut short), torch's
#: CPU kernel path, the processor (model and vector extensions: two on one path can round apart), the branch of MKL
#: its matrix products ran (a processor's own, unless pinned), thread count and device, the packages off
#: constraints.txt (or that there was no such file to compare with), the versions of what computes and the commit. None where the run did not record it. The keys are phrases, hence this form.
Depends = TypedDict("Depends", {
    "base weights (SHA-256)": str | None,
    "data (content hash)": str | None,
    "held-out prompts (digest)": str | None,
    "CPU kernel path": str | None,
    "CPU": str | None,
    "BLAS branch (MKL)": str | None,
    "torch threads": int | None,
    "device": str | None,
    "packages off constraints.txt": str | None,
    "versions": dict[str, str | None] | None,
    "commit": str | None,
})


def depends_on(record: dict[str, Any]) -> Depends:
    """``{what: value}`` for one run, in the words ``diff`` and ``reproduce`` print; a value the run did not
    record is None (a run from before the field existed)."""
    runner = record_of(record) or {}
    training = _training(record)
    base, compute = _part(training, "base_weights"), _part(training, "compute")
    dataset, git = _part(runner, "dataset"), _part(runner, "git")
    return {
        "base weights (SHA-256)": _short(base.get("sha256")),
        "data (content hash)": _short(dataset.get("content_hash")),
        "held-out prompts (digest)": _short(training.get("holdout_digest")),
        "CPU kernel path": _kernel_path(compute),
        "CPU": compute.get("cpu"),
        "BLAS branch (MKL)": _blas_text(compute),
        "torch threads": compute.get("threads"),
        "device": compute.get("device") or training.get("device"),
        # "none", the packages that differ, or "no constraints.txt to compare with"; None: not recorded
        "packages off constraints.txt": constraints_words(runner),
        "versions": runner.get("versions"),
        "commit": (f"{_short(git.get('commit'))}" + (" (uncommitted changes)" if git.get("dirty") else ""))
        if git.get("commit") else None,
    }


def depends_differences(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """``[(what, a's, b's)]`` for each of ``depends_on``'s entries the two runs differ in. Versions compare
    package by package; an entry one run did not record is left out (nothing is known to differ)."""
    da, db = depends_on(a), depends_on(b)
    out: list[tuple[str, Any, Any]] = []
    for (what, x), y in zip(da.items(), db.values()):  # both list the entries in one order
        if x is None or y is None or x == y:
            continue
        if what == "versions" and isinstance(x, dict) and isinstance(y, dict):
            out.extend((f"version of {name}", x.get(name), y.get(name)) for name in sorted(set(x) | set(y))
                       if x.get(name) != y.get(name))
        else:
            out.append((what, x, y))
    return out
