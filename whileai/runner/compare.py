"""``python -m whileai diff RUN_A RUN_B`` and ``python -m whileai wait SWEEP``.

``diff`` prints the spec keys whose values differ in what each run ran (its own
resolved config: a stage compares as the stage it trained, not as its recipe's
root), then their held-out result and cost side by side, and, where both measured the same held-out prompts
(their ``holdout_digest``), the two runs head to head: the prompts one passes and the other fails, with an
exact McNemar test (a method against its control, two settings of one recipe). ``wait``
follows every run of a sweep (its id, ``sweep_...``, or its multirun folder)
to its end and prints one table: the swept knobs, held-out before -> after with
its count, interval and paired p, n, delta verdict, alarms, cost, the expect verdict
and the status ("done · expect failed" for a run whose expect failed); it exits 1
when a run did not finish done, 3 when one failed its expect (as ``run`` does).
A run the runner only submitted (a sweep on Modal) has its expect checked here
once it is done, and the verdict is kept on it. ``diff`` shows the same results for
both runs, then each run's expect lines.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict, cast

from whileai.core.stats import judged_text, status_text
from whileai.core.spec import BOOKKEEPING

from whileai.runner import defaults
from whileai.runner.depends import depends_differences
from whileai.runner.trainer_diff import trainer_differences
from whileai.runner.provenance import record_of

__all__ = ["flatten", "spec_differences", "ran", "after_side", "head_to_head", "diff_main", "wait_main", "sweep_runs", "table", "SweepJob"]

_MISSING = "<absent>"


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (lists stay values)."""
    if not isinstance(tree, dict) or (prefix and not tree):
        return {prefix: tree}
    out: dict[str, Any] = {}
    for key, value in tree.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def spec_differences(a: dict[str, Any], b: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    fa, fb = flatten(a), flatten(b)
    return {k: (fa.get(k, _MISSING), fb.get(k, _MISSING)) for k in sorted(set(fa) | set(fb))
            if fa.get(k, _MISSING) != fb.get(k, _MISSING)}


#: the run config's bookkeeping: which run, dataset and folder, not what it ran
_NOT_RAN = (*BOOKKEEPING, "provenance", "runner", "holdout", "init_from", "extra", "target")
#: the runner spec's groups that shape every stage (the knobs themselves come from the run's own config)
_GROUPS = ("dataset", "export", "target", "serve")


def ran(record: dict[str, Any]) -> dict[str, Any] | None:
    """What a run ran: its own resolved config (the stage's knobs, as trained), with the runner spec's dataset,
    export, target and serve groups, and its monitor for GRPO. None for a run the runner did not make."""
    kept = record_of(record)
    config = record.get("config")
    if kept is None or not isinstance(config, dict):
        return None
    found = kept.get("spec")
    spec: dict[str, Any] = found if isinstance(found, dict) else {}
    out: dict[str, Any] = {k: v for k, v in config.items() if k not in _NOT_RAN}
    for group in _GROUPS:
        if isinstance(spec.get(group), dict):
            out[group] = spec[group]
    if config.get("method") == "grpo" and isinstance(spec.get("monitor"), dict):
        out["monitor"] = spec["monitor"]
    return out


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    limit = defaults.TABLE_CELL_CHARS
    return text if len(text) <= limit else text[: limit - 1] + "…"


def table(header: list[str], rows: list[list[Any]]) -> str:
    cells = [header, *[[_cell(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


#: A run's result as ``diff``, ``wait`` and ``show`` print it, one text per cell: held-out before -> after with its
#: paired test, the prompt count (``-`` where none was recorded), the delta verdict, how many alarms fired, the cost
#: with its GPU, the expect verdict and the status. The key ``held-out`` is no Python name, hence this form.
ResultCells = TypedDict("ResultCells", {
    "held-out": str,
    "n": int | str,
    "verdict": str,
    "alarms": int,
    "cost": str,
    "expect": str,
    "status": str,
})


def _result(record: dict[str, Any]) -> ResultCells:
    summary = record.get("summary") or {}
    monitor = summary.get("monitor")
    if not isinstance(monitor, dict):
        monitor = {}
    delta = summary.get("delta")
    if not isinstance(delta, dict):
        delta = {}
    cost = record.get("cost_usd")
    basis = record.get("cost_basis")
    kept: dict[str, Any] = summary["training"] if isinstance(summary.get("training"), dict) else {}
    stats = kept.get("stats") if isinstance(kept.get("stats"), dict) else None
    expect = summary.get("expect") if isinstance(summary.get("expect"), dict) else None
    return {
        "held-out": judged_text(kept.get("before"), kept.get("after"), stats),
        "n": (stats or {}).get("n") or kept.get("holdout_prompts") or "-",
        "verdict": delta.get("verdict") or "-",
        "alarms": len(monitor.get("alarms") or []),
        "cost": (f"${cost:.2f}" if cost is not None else "-")
                + (f" ({basis.get('gpu')})" if isinstance(basis, dict) and basis.get("gpu") else ""),
        "expect": _expect_cell(expect),
        "status": status_text(record.get("status"), expect),
    }


def after_side(record: dict[str, Any]) -> tuple[list[Any] | None, Any, Any]:
    """A run's per-prompt held-out outcomes after training, its rate, and the digest of the prompts measured."""
    training = (record.get("summary") or {}).get("training")
    training = training if isinstance(training, dict) else {}
    outcomes = training.get("outcomes")
    after = outcomes.get("after") if isinstance(outcomes, dict) else None
    return (list(after) if isinstance(after, list) else None), training.get("after"), training.get("holdout_digest")


def head_to_head(names: list[str], records: list[dict[str, Any]]) -> str:
    """The two runs' held-out results after training, prompt by prompt: which passes what the other fails, and
    the exact McNemar p of that split; or why they cannot be paired (not the same prompts, no outcomes)."""
    from whileai.core.stats import change_text, holdout_result, p_text

    (a, rate_a, digest_a), (b, rate_b, digest_b) = (after_side(r) for r in records)
    if a is None or b is None:
        return "not paired: a run without per-prompt held-out outcomes (no held-out set, or a loss metric)"
    if digest_a is None or digest_b is None or digest_a != digest_b or len(a) != len(b):
        why = "one run does not record which" if digest_a is None or digest_b is None else "they measured different"
        return (f"not paired: {why} held-out prompts ({len(a)} and {len(b)} prompts, {change_text(rate_a, rate_b)}); "
                "runs of one dataset, cut and holdout_rows (and seed, where holdout_rows samples) pair")
    result = holdout_result(a, b)
    paired: Mapping[str, Any] = (result["paired"] if result is not None else None) or {}
    return (f"on the same {len(a)} held-out prompts, {change_text(rate_a, rate_b)}: {names[1]} passes "
            f"{paired.get('improved')} that {names[0]} fails, {names[0]} passes {paired.get('worsened')} that "
            f"{names[1]} fails (exact McNemar {p_text(float(paired.get('p', 1.0)))})")


def _expect_cell(expect: dict[str, Any] | None) -> str:
    """``passed (3 lines)``, ``failed (2 of 3 lines)``, or ``-`` (none asked); ``diff`` prints each line."""
    if not expect or not expect.get("lines"):
        return "-"
    lines = [line for line in expect["lines"] if isinstance(line, dict)]
    failed = sum(not line.get("passed") for line in lines)
    return f"failed ({failed} of {len(lines)} lines)" if failed else f"passed ({len(lines)} lines)"


def _expect_lines(record: dict[str, Any]) -> list[str]:
    """The run's expect lines as the runner printed them (passed and failed), [] when none was checked."""
    from whileai.runner.expect import ExpectLine, line_text

    expect = (record.get("summary") or {}).get("expect")
    if not isinstance(expect, dict):
        return []
    # a stored line with every key of an ExpectLine is read as one
    return [f"{'passed' if line.get('passed') else 'FAILED'} {line_text(cast(ExpectLine, line))}"
            for line in expect.get("lines") or []
            if isinstance(line, dict) and {"key", "want", "seen", "passed", "where"} <= set(line)]


def _records(command: str, ids: list[str]) -> list[dict[str, Any]] | None:
    """The runs' records, or None after saying (in the command line's words) which one could not be read."""
    import whileai.simulations as wai
    from whileai.core.errors import NotFoundError, PlatformError

    from whileai.runner._said import said as _said

    out = []
    for run_id in ids:
        try:
            out.append(wai.get_run(run_id))
        except NotFoundError:
            print(f"python -m whileai {command}: no run {run_id!r} on this platform; `python -m whileai runs` "
                  "lists the runs there", file=sys.stderr)
            return None
        except PlatformError as exc:
            print(f"python -m whileai {command}: could not read {run_id}: {_said(exc)}", file=sys.stderr)
            return None
    return out


def diff_main(argv: list[str] | None = None) -> int:
    """``python -m whileai diff RUN_A RUN_B``."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m whileai diff",
                                description="The spec keys two runs differ in, then their held-out result and cost.")
    p.add_argument("runs", nargs=2, metavar="RUN", help="a run id, e.g. run_0123abcd... (python -m whileai runs lists them)")
    args = list(p.parse_args(list(sys.argv[1:] if argv is None else argv)).runs)
    records = _records("diff", args)
    if records is None:
        return 2
    kept = [record_of(r) or {} for r in records]
    spec_a, spec_b = (ran(r) for r in records)
    if spec_a is None or spec_b is None:
        print("both runs must be made by the runner (their config carries the spec)", file=sys.stderr)
        return 2
    # what each run ran (a stage's own resolved knobs), not the recipe's root values: an SFT stage of a GRPO recipe
    # compares as the SFT it trained
    differing = spec_differences(spec_a, spec_b)
    print(f"spec keys that differ ({len(differing)}):")
    print(table(["key", args[0], args[1]], [[k, a, b] for k, (a, b) in differing.items()]) if differing
          else "  (none: the same spec)")
    other = [("recipe", kept[0].get("recipe"), kept[1].get("recipe"))] if kept[0].get("recipe") != kept[1].get("recipe") else []
    other += depends_differences(records[0], records[1])  # base bytes, data, CPU kernel path, packages, commit
    if other:
        print("\nwhat the results depend on that differs:")
        print(table(["what", args[0], args[1]], [list(row) for row in other]))
        if any(what.startswith("base weights") for what, _, _ in other):
            print("  (the two runs started from different base weights: their results are not of the same model)")
    trainer = trainer_differences(records[0], records[1])
    if trainer:
        print(f"\ntrainer settings that differ ({len(trainer)}):")
        print(table(["field", args[0], args[1], "why"], trainer))
    results = [_result(r) for r in records]
    print("\nresults:")
    print(table(["", args[0], args[1]], [[k, a, b] for (k, a), b in zip(results[0].items(), results[1].values())]))
    print(f"\nhead to head: {head_to_head(args, records)}")
    for run_id, record, result in zip(args, records, results):
        lines = _expect_lines(record)
        if lines:
            print(f"\nexpect of {run_id} ({result['status']}):")
            print("\n".join(f"  {line}" for line in lines))
    return 0


# ---------------------------------------------------------------------------
# wait
# ---------------------------------------------------------------------------


def sweep_folder(sweep: str) -> Path:
    """The multirun folder of a sweep id (``sweep_<token>``), or the folder itself."""
    from whileai.runner._locate import data_root

    path = Path(sweep).expanduser()
    if path.is_dir():
        return path
    token = sweep.removeprefix("sweep_")
    return data_root() / defaults.RUNNER_DIR / "multirun" / token


class SweepJob(TypedDict):
    """One job of a sweep, as its runs file says: the job's folder name, its last stage's run and its overrides."""

    job: str
    run: str
    overrides: list[str]


def sweep_runs(sweep: str) -> list[SweepJob]:
    """Per job of the sweep, in job order: ``{"job", "run", "overrides"}`` (the job's last stage's run)."""
    folder = sweep_folder(sweep)
    if not folder.is_dir():
        raise FileNotFoundError(f"no sweep {sweep!r}: {folder} does not exist; pass the sweep id the run printed "
                                "(sweep_...) or its multirun folder")
    found: list[SweepJob] = []
    for path in sorted(folder.glob(f"*/{defaults.RUN_FILE}"), key=lambda p: (len(p.parent.name), p.parent.name)):
        written = json.loads(path.read_text())
        if written.get("runs"):
            found.append({"job": path.parent.name, "run": written["runs"][-1]["id"],
                          "overrides": written.get("overrides") or []})
    return found


def _settle_expect(record: dict[str, Any]) -> dict[str, Any]:
    """The record, with its expect verdict checked and kept on it when the runner could not do so.

    A sweep on Modal only submits its runs (the runner returns before they end), so no one has
    checked their spec's expect block yet: ``wait`` does it once they are done, the same way
    the runner does (``expect.settle``), and notes it on the run.
    """
    import whileai.simulations as wai

    from whileai.runner.expect import settle

    summary = record.get("summary") or {}
    kept = record_of(record) or {}
    expect = (kept.get("spec") or {}).get("expect") or {}
    if record.get("status") != "done" or isinstance(summary.get("expect"), dict) or not expect:
        return record
    run = wai.TrainingRun(record)
    previous = wai.TrainingRun(wai.get_run(kept["previous_run"])) if kept.get("previous_run") else None
    _, checked = settle(run, previous, expect, kept.get("expect_lines") or {}, kept.get("recipe"))
    return wai.get_run(record["id"]) if checked["lines"] else record


def wait_main(argv: list[str] | None = None) -> int:
    """``python -m whileai wait SWEEP [--timeout S]``: follow every run to its end, then one table."""
    import whileai.simulations as wai

    import argparse

    p = argparse.ArgumentParser(prog="python -m whileai wait",
                                description="Follow every run of a sweep to its end, then print one table.")
    p.add_argument("sweep", metavar="SWEEP", help="the sweep id the run printed (sweep_...), or its multirun folder")
    p.add_argument("--timeout", type=float, default=defaults.WAIT_TIMEOUT_S,
                   help=f"seconds to wait for each run (default {defaults.WAIT_TIMEOUT_S:g}, WAIT_TIMEOUT_S)")
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    timeout = args.timeout
    try:
        jobs = sweep_runs(args.sweep)
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 2
    if not jobs:
        print(f"sweep {args.sweep} has no runs yet", file=sys.stderr)
        return 1
    records = []
    for job in jobs:
        run = wai.TrainingRun(wai.get_run(job["run"]))
        if run.status == "running":
            print(f"waiting for {run.id} (job {job['job']}) ...", file=sys.stderr)
            run.wait(timeout=timeout)
        records.append(_settle_expect(wai.get_run(job["run"])))
    specs = [(record_of(r) or {}).get("spec") or {} for r in records]
    swept = sorted({k for s in specs[1:] for k in spec_differences(specs[0], s)}) if len(specs) > 1 else []
    header = ["job", "run", *swept, "held-out", "n", "verdict", "alarms", "cost", "expect", "status"]
    rows = []
    for job, record, spec in zip(jobs, records, specs):
        flat = flatten(spec)
        result = _result(record)
        rows.append([job["job"], record["id"], *[flat.get(k) for k in swept],
                     result["held-out"], result["n"], result["verdict"], result["alarms"], result["cost"],
                     result["expect"], result["status"]])
    print(table(header, rows))
    if not all(r.get("status") == "done" for r in records):
        return 1
    from whileai.runner.pipeline import EXIT_EXPECT

    expects = [(r.get("summary") or {}).get("expect") for r in records]
    return EXIT_EXPECT if any(isinstance(e, dict) and e.get("lines") and not e.get("passed") for e in expects) else 0
