"""The closing summary of a run: the result a person or a script reads, on stdout.

Progress and logs go to stderr (``_progress``); what a run *found* goes to stdout,
so ``python -m whileai run ... > out.txt`` keeps the result and a terminal still
shows the steps. ``--json`` prints the same summary as one JSON object instead
of lines, for scripts and CI:

    {"status", "exit_code", "recipe", "sweep_id", "run", "runs": [{"id", "stage", "method", "name"}],
     "datasets": {...}, "held_out": {"metric", "before", "after", "stats", "by_group", ...}, "verdict", "alarms",
     "cost": {"usd", "basis"}, "expect": {"passed", "failed"}, "page", "mirrors": {name: {"to", "status", ...}},
     "endpoint", "outcome": {...}}

``outcome`` carries every field the run's outcome has (whatever the held-out
report adds), so a script never needs the lines.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from whileai.core.runnerrecord import QuickNote
from whileai.core.stats import group_lines, judged_text, status_text

from whileai.runner._facts import RunFacts
from whileai.runner._summary import ClosingSummary, ExpectSummary, Served
from whileai.runner.expect import ExpectVerdict, Outcome, line_text

__all__ = ["summary", "human_lines", "emit", "page_of", "reader_left"]


def _status_text(status: Any, checked: ExpectSummary | None, quick: QuickNote | None = None) -> str:
    """``done · expect failed (2 of 3 lines failed)``; the status alone when the spec expects nothing."""
    if quick is not None:
        from whileai.runner.quick import status_line

        return status_line(status, quick)
    lines = checked["lines"] if checked is not None else []
    if not lines:
        return f"{status} (the spec's expect block asks nothing)"
    failed = sum(not line["passed"] for line in lines)
    counts = f"{failed} of {len(lines)} lines failed" if failed else f"all {len(lines)} lines held"
    return f"{status_text(status, checked)} ({counts})"


def page_of(run_id: str, url: str) -> str:
    """Where the run's page is: its URL on a running platform, else the ``open`` command that serves it."""
    if os.environ.get("WHILEAI_BASE_URL"):
        return url
    return f"python -m whileai open {run_id}"


def summary(known: RunFacts, run: Any = None, outcome: Outcome | None = None,
            served: Served | None = None, checked: ExpectVerdict | None = None) -> ClosingSummary:
    """The closing summary as a plain JSON-able dict (``known``: what the pipeline gathered on its way)."""
    out: ClosingSummary = {
        "status": known.status,
        "exit_code": known.exit_code,
        "recipe": known.recipe,
        "sweep_id": known.sweep_id,
        "run": run.id if run is not None else None,
        "runs": [entry.to_json() for entry in known.runs],
        "datasets": dict(known.datasets),
    }
    if known.error:
        out["error"] = known.error
    from whileai.runner.quick import note as quick_note

    quick = quick_note()
    if quick is not None:  # quick=true: expect was set aside, and the summary says so instead of a verdict
        out["quick"] = quick
    if run is not None:
        out["page"] = page_of(run.id, run.url)
        found = (run.summary or {}).get("mirrors") if isinstance(run.summary, dict) else None
        if isinstance(found, dict) and found:  # report_to: where each copy of the run went
            out["mirrors"] = {str(k): dict(v) for k, v in found.items() if isinstance(v, dict)}
    if outcome is not None:
        basis = outcome.get("cost_basis")
        out.update({
            "status": outcome.get("status") or out["status"],
            "held_out": {"metric": outcome.get("metric") or "pass_rate", "before": outcome.get("before"),
                         "after": outcome.get("after"), "previous_after": outcome.get("previous_after"),
                         "stats": outcome.get("stats"), "by_group": outcome.get("by_group"),
                         # a reward other than the exact judge: its own before -> after beside the exact judge's
                         "reward_vs_exact": outcome.get("reward_vs_exact")},
            "verdict": outcome.get("verdict"),
            "alarms": outcome.get("alarms") or [],
            "cost": {"usd": outcome.get("cost_usd"), "basis": basis},
            "outcome": outcome,
        })
    if checked is not None:
        out["expect"] = {"passed": checked["passed"], "lines": checked["lines"],
                         "failed": [line_text(line) for line in checked["lines"] if not line["passed"]]}
    if served:
        out["endpoint"] = {"url": served.get("endpoint"), "model": served.get("name"), "version": served.get("version"),
                           "reply": served.get("chat")}
    return out


def human_lines(closing: ClosingSummary, run: Any = None) -> list[str]:
    """The closing summary as the lines a person reads."""
    lines = [""]
    outcome = closing.get("outcome")
    if outcome is not None:
        alarms = closing["alarms"]
        basis = closing["cost"]["basis"]
        if closing["cost"]["usd"] is not None:
            cost = f"about ${closing['cost']['usd']:.2f} ({basis.get('gpu') if isinstance(basis, dict) else basis}, estimate)"
        else:
            cost = str(((run.training or {}).get("cost_basis") if run is not None else None) or basis or "not priced")
        held = closing["held_out"]
        if held["before"] is None and held["after"] is None:  # rows that gave nothing to judge, not "- -> -"
            figure = "not measured: no held-out prompt was judged (the warning before training names why)"
        else:
            figure = judged_text(held["before"], held["after"], held.get("stats"))
        lines += [
            f"held-out   {held['metric']} {figure}",
            *(f"           {line}" for line in group_lines(held.get("by_group"))),  # per category, when rows name one
            *reward_lines(held.get("reward_vs_exact")),
            *([f"delta      {closing['verdict']}"] if closing.get("verdict") else []),  # only when dataset.after asked
            f"alarms     {len(alarms)}" + (": " + ", ".join(str(a.get('kind') or a) for a in alarms) if alarms else ""),
            *_armed_lines(outcome.get("armed")),
            f"cost       {cost}",
            f"status     {_status_text(closing['status'], closing.get('expect'), closing.get('quick'))}",
        ]
    elif closing.get("error"):
        lines.append(f"status     {closing['status']}: {closing['error']}")
    else:
        lines.append(f"status     {closing['status']}")
    for entry in closing["runs"]:
        lines.append(f"run        {entry['id']}  {entry.get('name') or ''}".rstrip())
    datasets = closing.get("datasets") or {}
    if datasets:
        lines.append("datasets   " + ", ".join(f"{k} {v}" for k, v in datasets.items()))
    endpoint = closing.get("endpoint")
    if endpoint:
        lines.append(f"endpoint   {endpoint['url']} (model {endpoint['model']})")
    if closing.get("page"):
        if os.environ.get("WHILEAI_BASE_URL"):
            lines.append(f"page       {closing['page']}")
        else:  # the embedded platform: `open` reuses a server that answers, else starts one on this data root
            lines.append(f"page       {closing['page']}   ({_open_note()})")
    if closing.get("mirrors"):
        from whileai.runner._mirrored import mirrors_line

        lines.append(mirrors_line(closing["mirrors"]))
    for alarm in (closing.get("alarms") or []) if outcome is not None else []:
        lines += _alarm_lines(alarm, closing.get("page"))
    expect = closing.get("expect")
    if expect is not None:
        lines += [f"{'passed' if line['passed'] else 'FAILED'} {line_text(line)}" for line in expect["lines"]]
    if closing.get("sweep_id"):
        lines.append(f"sweep      {closing['sweep_id']}: python -m whileai wait {closing['sweep_id']}")
    return lines


def _armed_lines(armed: Any) -> list[str]:
    """Which HackMonitor alarms were armed, and why the others were off (grouped by reason): nothing without a
    monitor, or for a record that kept no such words."""
    if not isinstance(armed, dict) or not all(isinstance(v, str) for v in armed.values()):
        return []
    on = [kind for kind, state in armed.items() if state == "armed"]
    off: dict[str, list[str]] = {}
    for kind, state in armed.items():
        if state != "armed":
            off.setdefault(state.removeprefix("off: "), []).append(kind)
    lines = [f"monitor    armed: {', '.join(on) if on else 'none'}"]
    lines += [f"           off: {', '.join(kinds)}: {why}" for why, kinds in off.items()]
    return lines


def _alarm_lines(alarm: Any, page: Any) -> list[str]:
    """An alarm as the summary shows it: what fired, what that means, and where its chart is."""
    from whileai.core.alarms import alarm_meaning

    if not isinstance(alarm, dict):
        return [f"alarm      {alarm}"]
    where = f" at step {alarm['step']}" if alarm.get("step") is not None else ""
    out = [f"alarm      {alarm.get('kind')}{where}: {alarm_meaning(alarm.get('kind'))}"]
    if alarm.get("message"):
        out.append(f"           what fired: {alarm['message']}")
    if page:
        out.append(f"           chart: the HackMonitor section of the run page ({page}, #monitor)")
    return out


def reward_lines(versus: Any) -> list[str]:
    """The run's reward on the held-out prompts beside the exact judge's, and which rose more (the sign test the job
    kept, ``training["reward_vs_exact"]``); nothing for a run trained on the exact judge itself."""
    from whileai.core.stats import change_text, p_text

    if not isinstance(versus, dict) or versus.get("p") is None:
        return []
    rose, fell, p = versus.get("reward_rose_more"), versus.get("task_rose_more"), float(versus["p"])
    if p < 0.05 and (rose or 0) > (fell or 0):
        said = "the reward rose more than the task: it may be paying for something else"
    elif p < 0.05:
        said = "the task rose more than the reward"
    else:
        said = "neither rose significantly more"
    return [f"reward     {change_text(versus.get('reward_before'), versus.get('reward_after'))} on the same "
            f"{versus.get('prompts')} prompts, exact judge {change_text(versus.get('exact_before'), versus.get('exact_after'))}",
            f"           the reward rose more on {rose} prompts, the task on {fell} (sign test {p_text(p)}): {said}"]


def fired_lines(alarm: dict[str, Any], run_id: str) -> list[str]:
    """What the runner prints the moment an alarm fires, while training goes on: the step and the alarm, what the
    reward pays for, and what to do (stop such runs with ``monitor.stop_on``; compare with the honest twin)."""
    kind = str(alarm.get("kind"))
    out = [f"! alarm: {kind} at step {alarm.get('step')} of {run_id}, training goes on"]
    out += [f"  {line.strip()}" for line in _alarm_lines(alarm, None)[1:]]
    out.append(f"  what to do: read the HackMonitor section of the run page; to stop a run at this alarm, run it with "
               f"monitor.stop_on=[{kind}]; `python -m whileai diff {run_id} OTHER_RUN` against a run of the same recipe "
               "with a reward you trust (its honest twin) shows what the reward bought")
    return out


def _open_note() -> str:
    """What ``open`` will do: reuse the platform that answers at its address, or start one on this data root."""
    from whileai.platform.server import platform_answers
    from whileai.domain.client import embedded_base_url

    address = embedded_base_url()
    if platform_answers(address):
        return f"reuses the platform answering at {address} and signs you in"
    return "starts the platform on this data root and signs you in"


def emit(closing: ClosingSummary, *, as_json: bool, run: Any = None, stream: Any = None) -> None:
    """Print the closing summary on stdout: lines, or one JSON object (``--json``); a closed pipe ends it quietly."""
    stream = stream or sys.stdout
    try:
        if as_json:
            print(json.dumps(closing, default=str), file=stream, flush=True)
            return
        for line in human_lines(closing, run):
            print(line, file=stream)
        stream.flush()
    except BrokenPipeError:  # `python -m whileai run ... | head`: the reader has what it wanted
        reader_left(stream)


def reader_left(stream: Any = None) -> None:
    """The reader closed the pipe: point the stream's descriptor at /dev/null so no later flush raises."""
    stream = stream or sys.stdout
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
    except (OSError, ValueError, AttributeError):  # a stream with no descriptor (a test's StringIO) has no pipe
        pass
