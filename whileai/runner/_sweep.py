"""A sweep's opening and closing lines: its id, its jobs' runs, and the ``wait`` command that follows it.

``python -m whileai run -m ...`` says its sweep id on stderr when it starts (so a
person can follow it from another shell at once) and, when the launcher returns,
prints the sweep's closing lines on stdout: each job's runs and the ``wait``
command. With ``--json`` the closing is one JSON object holding every job's
closing summary (each job left its own in its runs file).
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, TypedDict

from whileai.core.stats import judged_text, status_text

from whileai.runner import defaults

if TYPE_CHECKING:
    from whileai.runner._summary import ClosingSummary

__all__ = ["announce", "close", "wait_command"]


def wait_command(sweep_id: str) -> str:
    return f"python -m whileai wait {sweep_id}"


def announce(sweep_id: str) -> None:
    print(f"sweep {sweep_id}: its jobs run now; follow it from another shell with `{wait_command(sweep_id)}`",
          file=sys.stderr, flush=True)


class SweepJobClosing(TypedDict):
    """One job of a sweep as its runs file left it: the job's folder name, the command line's overrides, the runs
    it started (``RunFact.to_json`` of each) and its closing summary (None where the job wrote none yet)."""

    job: str
    overrides: list[str]
    runs: list[dict[str, str | None]]
    summary: ClosingSummary | None


def _jobs(sweep_id: str) -> list[SweepJobClosing]:
    from whileai.runner.compare import sweep_folder

    folder = sweep_folder(sweep_id)
    found: list[SweepJobClosing] = []
    for path in sorted(folder.glob(f"*/{defaults.RUN_FILE}"), key=lambda p: (len(p.parent.name), p.parent.name)):
        written = json.loads(path.read_text())
        found.append({"job": path.parent.name, "overrides": written.get("overrides") or [],
                      "runs": written.get("runs") or [], "summary": written.get("summary")})
    return found


def _status(summary: ClosingSummary | None) -> str:
    """A job's status with its expect verdict (a quick run's: not checked); ``-`` for a job with no summary yet."""
    if not summary:
        return status_text("-", None)
    status = status_text(summary.get("status") or "-", summary.get("expect"))
    return status + " · quick run: expect not checked" if isinstance(summary.get("quick"), dict) else status


def job_lines(job: SweepJobClosing) -> list[str]:
    """One sweep job's closing lines: each run, and on the last its status with the expect verdict (a run that failed
    its expect never reads plain "done") and its held-out result with n, interval and paired p."""
    summary = job["summary"]
    status = _status(summary)
    held = summary.get("held_out") if summary and isinstance(summary.get("held_out"), dict) else None
    out = []
    for index, run in enumerate(job["runs"]):
        last = index == len(job["runs"]) - 1
        line = f"  job {job['job']:<4} {run['id']}  {status if last else 'stage':<8} {run.get('name') or ''}".rstrip()
        if last and held is not None:
            line += f"\n             held-out {held.get('metric') or 'pass_rate'} " \
                    f"{judged_text(held.get('before'), held.get('after'), held.get('stats'))}"
        out.append(line)
    return out


def close(sweep_id: str, *, as_json: bool) -> None:
    """The sweep's closing lines on stdout (or one JSON object)."""
    jobs = _jobs(sweep_id)
    if as_json:
        print(json.dumps({"sweep_id": sweep_id, "wait": wait_command(sweep_id), "jobs": jobs}, default=str), flush=True)
        return
    runs = sum(len(j["runs"]) for j in jobs)
    lines = ["", f"sweep      {sweep_id}: {len(jobs)} job(s), {runs} run(s)"]
    for job in jobs:
        lines += job_lines(job)
    lines.append(f"follow it  {wait_command(sweep_id)}")
    print("\n".join(lines), flush=True)
