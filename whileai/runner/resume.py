"""python -m whileai resume RUN_ID [--json]: continue an interrupted run from its last checkpoint.

A run stopped (Ctrl-C, ``run.stop()``), failed or crashed (its worker killed, a preempted GPU) keeps the
checkpoints its job saved every ``save_steps`` under the run's folder. ``resume`` asks the platform for a
new job of the same run (``POST /runs/{id}/resume``), follows it like ``run`` does, and prints the same
closing summary (lines, or one JSON object with ``--json``). Exit codes are ``run``'s; 2 when there is
nothing to resume (unknown run, done, still running, no checkpoint), with the reason and the fix.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["resume_main"]


def _previous(client: Any, run: Any) -> Any:
    """The run a stage started from (``init_from``), as ``settle`` compares against; None for a first stage."""
    from whileai.domain.tracking import TrainingRun

    config = run.config if isinstance(run.config, dict) else {}
    source = config.get("init_from")
    if not source:
        return None
    try:
        return TrainingRun(client.request("GET", f"/runs/{source}", params={"series": "false"}), client)
    except Exception:  # noqa: BLE001 - the summary then reads without the start run's numbers
        return None


def resume_main(argv: list[str] | None = None) -> int:
    """``python -m whileai resume RUN_ID [--json]``: a new job of the run, from its newest checkpoint."""
    import argparse
    from urllib.parse import quote

    from whileai.core.errors import PlatformError
    from whileai.domain.tracking import TrainingRun

    from whileai.runner._closing import emit, summary
    from whileai.runner._facts import RunFact, RunFacts
    from whileai.runner._progress import Progress
    from whileai.runner.expect import settle
    from whileai.runner.pipeline import EXIT_EXPECT, EXIT_FAILED, EXIT_INTERRUPTED, _follow
    from whileai.runner.provenance import record_of
    from whileai.runner._said import said as _said
    from whileai.runner.runs import _client

    p = argparse.ArgumentParser(prog="python -m whileai resume",
                                description="Continue a stopped, failed or crashed run from its last checkpoint.")
    p.add_argument("run_id", help="a run id, e.g. run_0123abcd... (python -m whileai runs lists them)")
    p.add_argument("--json", action="store_true", help="print the closing summary as one JSON object")
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    client = _client()
    try:
        answer = client.request("POST", f"/runs/{quote(args.run_id, safe='')}/resume")
    except PlatformError as exc:
        if exc.status == 404:
            print(f"python -m whileai resume: no run {args.run_id!r} on this platform; `python -m whileai runs` "
                  "lists the runs there", file=sys.stderr)
        else:
            print(f"python -m whileai resume: {_said(exc)}", file=sys.stderr)
        return 2
    run = TrainingRun(answer["run"], client)
    progress = Progress()
    found = run.summary.get("resumed")
    note: dict[str, Any] = found if isinstance(found, dict) else {}
    progress.line(f"- resuming {run.id} from its checkpoint at step {note.get('from_step')} "
                  f"(job {(answer.get('job') or {}).get('id')})")
    record = record_of(answer["run"]) or {}
    method = (run.config or {}).get("method") if isinstance(run.config, dict) else None
    facts = RunFacts(recipe=record.get("recipe"),
                     runs=[RunFact(id=run.id, stage=record.get("stage"), method=method, name=run.name)])
    try:
        status = _follow(run, f"resume {run.id}", progress)
    except KeyboardInterrupt:
        facts.status, facts.exit_code = run.status, EXIT_INTERRUPTED
        emit(summary(facts, run), as_json=args.json, run=run)
        return EXIT_INTERRUPTED
    if status != "done":
        error = (run.error or "").splitlines()[0] if run.error else None
        facts.status, facts.error, facts.exit_code = status, error, EXIT_FAILED
        emit(summary(facts, run), as_json=args.json, run=run)
        return EXIT_FAILED
    stored = record.get("spec")
    spec: dict[str, Any] = stored if isinstance(stored, dict) else {}
    outcome, checked = settle(run, _previous(client, run), spec.get("expect") or {}, {}, record.get("recipe"))
    code = 0 if checked["passed"] else EXIT_EXPECT
    facts.status, facts.exit_code = run.status, code
    emit(summary(facts, run, outcome, None, checked), as_json=args.json, run=run)
    return code
