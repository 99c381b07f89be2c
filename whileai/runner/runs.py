"""``python -m whileai runs`` (the runs list) and ``python -m whileai show RUN_ID`` (one run) in a terminal.

``runs`` asks the platform for the same rows the runs page draws (``/page-data/runs``: filtered
and paged in SQL, each row's facts read by the pages' own readers), so the columns agree with the
page: name, status with the expect verdict, method, held-out before -> after with n, and how long
it took. It reads whichever platform the SDK would use: the embedded one under the data root (the
local account, as ``python -m whileai open`` does) unless WHILEAI_BASE_URL names a server.

``show`` prints one run: its status and expect lines, the held-out result with n, interval and
paired p (and per category where the rows name one), the delta verdict, the adapter folder, its page, and the
spec it ran.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, cast

from whileai.core.stats import change_text, group_lines, judged_text, status_text

from whileai.runner import defaults
from whileai.runner._parts import json_object
from whileai.runner._mirrored import mirror_text, mirrors_line  # the mirrored line, shared with the closing summary
from whileai.runner._said import said as _said  # a platform error in the command line's words

__all__ = ["runs_main", "show_main", "list_rows", "row_cells", "duration_text", "mirror_text", "mirrors_line"]

_HEADER = ["run", "name", "status", "method", "held-out before -> after", "alarms", "took"]


def duration_text(seconds: Any) -> str:
    """``42 s``, ``3 min 5 s``, ``2 h 10 min`` (the pages' WAI.duration), ``-`` when unknown."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
        return "-"
    if seconds < 60:
        return f"{round(seconds)} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {round(seconds % 60)} s"
    return f"{int(seconds // 3600)} h {round((seconds % 3600) / 60)} min"


def _client() -> Any:
    from whileai.domain.client import get_client

    return get_client()


def list_rows(filters: dict[str, str | None], limit: int) -> tuple[list[dict[str, Any]], int]:
    """(the page's rows, newest first, at most ``limit``; how many runs match) for these filters."""
    client = _client()
    wanted = {k: v for k, v in filters.items() if v}
    rows: list[dict[str, Any]] = []
    page, total = 1, 0
    while len(rows) < limit:
        per_page = min(defaults.RUNS_PER_REQUEST, limit - len(rows))
        found = client.request("GET", client.base_url + "/page-data/runs",
                               params={**wanted, "page": page, "per_page": per_page})
        total = int(found.get("total") or 0)
        rows += found.get("runs") or []
        if page >= int(found.get("pages") or 1) or not found.get("runs"):
            break
        page += 1
    return rows[:limit], total


def row_cells(row: dict[str, Any]) -> list[str]:
    """One row of ``runs``: the page's columns as text."""
    held = row.get("holdout")
    if isinstance(held, dict):
        metric = held.get("metric") or "pass_rate"
        cell = f"{metric} {change_text(held.get('before'), held.get('after'))}"
        if held.get("significance"):  # the paired test's verdict beside the figure (the runs page shows it too)
            cell += f", {held['significance']}"
        if held.get("n"):
            cell += f" (n={held['n']})"
    else:
        cell = "-"
    expect = row.get("expect")
    status = status_text(row.get("status"), {"passed": expect["passed"], "lines": [None]}
                         if isinstance(expect, dict) else None)
    alarms = row.get("alarms")  # the HackMonitor's alarm count (the web list's column); "-" where none watched
    return [str(row.get("id")), str(row.get("name") or "-"), status, str(row.get("method") or "-"), cell,
            str(alarms) if alarms else "-", duration_text(row.get("duration_s"))]


def _table(rows: list[list[str]]) -> str:
    cells = [_HEADER, *rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(_HEADER))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


def _parser(prog: str, description: str) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog=prog, description=description)


def runs_main(argv: list[str] | None = None) -> int:
    """``python -m whileai runs [--status S] [--recipe R] [--sweep S] [--method M] [--json] [--limit N]``."""
    from whileai.core.errors import PlatformError

    p = _parser("python -m whileai runs", "The runs, newest first, with the runs page's columns.")
    p.add_argument("--status", help="only runs with this status (running, done, failed, stopped)")
    p.add_argument("--recipe", help="only runs of this recipe (e.g. sft_tooluse)")
    p.add_argument("--sweep", help="only runs of this sweep (its id, sweep_...)")
    p.add_argument("--method", help="only runs of this method (sft, grpo, dpo, rm)")
    p.add_argument("--limit", type=int, default=defaults.RUNS_LIST_LIMIT,
                   help=f"show at most this many runs (default {defaults.RUNS_LIST_LIMIT}, RUNS_LIST_LIMIT)")
    p.add_argument("--json", action="store_true", help="print one JSON object: {\"runs\": [...], \"total\": N}")
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.limit < 1:
        print(f"--limit {args.limit} is not accepted; pass a count of runs >= 1, e.g. --limit 20", file=sys.stderr)
        return 2
    filters = {"status": args.status, "recipe": args.recipe, "sweep": args.sweep, "method": args.method}
    try:
        rows, total = list_rows(filters, args.limit)
    except PlatformError as exc:
        print(f"python -m whileai runs: {_said(exc)}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"runs": rows, "total": total, "filters": {k: v for k, v in filters.items() if v}},
                         default=str))
        return 0
    if not rows:
        chosen = " ".join(f"--{k} {v}" for k, v in filters.items() if v)
        print(f"no runs match {chosen}" if chosen else
              "no runs yet: train one (python -m whileai run recipe=sft_tooluse) and it is listed here")
        return 0
    print(_table([row_cells(r) for r in rows]))
    if total > len(rows):
        print(f"({len(rows)} of {total} runs shown, newest first; --limit N shows more)")
    return 0


def _status(status: Any, expect: Any, quick: Any) -> str:
    """The status with its expect verdict, or that a quick run's expect was not checked."""
    if isinstance(quick, dict) and not (isinstance(expect, dict) and expect.get("lines")):
        from whileai.core.runnerrecord import QuickNote
        from whileai.runner.quick import status_line

        return status_line(status, cast(QuickNote, quick))  # the note the run's record keeps, as JSON
    return status_text(status, expect)


def show_lines(record: dict[str, Any]) -> list[str]:
    """``show``'s lines for one run record (``GET /runs/{id}``, without its series)."""
    from whileai.runner._closing import page_of
    from whileai.runner.compare import _expect_lines, _result
    from whileai.runner.provenance import record_of

    summary: dict[str, Any] = json_object(record.get("summary"))
    training: dict[str, Any] = json_object(summary.get("training"))
    stats = training.get("stats") if isinstance(training.get("stats"), dict) else None
    delta: dict[str, Any] = json_object(summary.get("delta"))
    kept = record_of(record) or {}
    config: dict[str, Any] = json_object(record.get("config"))
    method = config.get("method") or training.get("method") or (kept.get("spec") or {}).get("method")
    paired = (stats or {}).get("paired") if isinstance((stats or {}).get("paired"), dict) else None
    lines = [
        f"run        {record.get('id')}  {record.get('name') or ''}".rstrip(),
        f"status     {_status(record.get('status'), summary.get('expect'), kept.get('quick'))}",
        f"method     {method or '-'}" + (f" (recipe {kept['recipe']})" if kept.get("recipe") else ""),
    ]
    if record.get("error"):
        lines.append(f"error      {str(record['error']).splitlines()[0]}")
    if "before" in training or "after" in training:
        lines.append(f"held-out   {training.get('metric') or 'pass_rate'} "
                     f"{judged_text(training.get('before'), training.get('after'), stats)}")
        n = (stats or {}).get("n") or training.get("holdout_prompts")
        if n:
            lines.append(f"n          {n} held-out prompt(s)" + (
                f"; {paired['improved']} improved, {paired['worsened']} worsened" if paired else ""))
        lines += [f"           {line}" for line in group_lines(training.get("by_group"))]  # per category
    else:
        lines.append("held-out   - (not measured yet)")
    power = json_object(kept.get("held_out"))  # what the run said before training (whileai/runner/_power.py)
    if power.get("warning"):
        lines.append(f"warning    {power['warning']}")
    if delta.get("verdict"):
        lines.append(f"delta      {delta['verdict']}")
    monitor = json_object(summary.get("monitor"))
    alarms = [a for a in monitor.get("alarms") or [] if isinstance(a, dict)]
    lines.append(f"alarms     {len(alarms)}" + (": " + ", ".join(str(a.get("kind") or "alarm") for a in alarms)
                                                if alarms else ""))
    lines.append(f"cost       {_result(record)['cost']}")
    adapter = summary.get("adapter")
    lines.append(f"adapter    {adapter if isinstance(adapter, str) and adapter else '- (none saved)'}")
    url = record.get("url")
    if isinstance(url, str) and url:
        opened = page_of(str(record.get("id")), url)
        lines.append(f"page       {url}" + (f"   ({opened})" if opened != url else ""))
    mirrors = json_object(summary.get("mirrors"))
    if mirrors:  # report_to: where copies of the run went (whileai/simulations/mirror)
        lines.append(mirrors_line(mirrors))
    expect = _expect_lines(record)
    if expect:
        lines += ["", "expect:", *[f"  {line}" for line in expect]]
    spec = kept.get("spec")
    if isinstance(spec, dict):
        from whileai.runner._effective import annotated_yaml

        shown = annotated_yaml(*_used_spec(spec, config, kept)).rstrip().splitlines()
        lines += ["", "spec:", *["  " + s for s in shown]]  # a null this run filled: its value, "# the value this run used"
    elif config:
        lines += ["", "config:", *[f"  {k}: {json.dumps(v, default=str)}" for k, v in config.items()]]
    return lines


def _used_spec(spec: dict[str, Any], config: dict[str, Any], kept: dict[str, Any]) -> tuple[dict[str, Any],
                                                                                             dict[str, str]]:
    """The stored spec with each null of this run's stage (the root for the last stage, ``stages.NAME`` for an
    earlier one) set to the value the run used (its config, what ``wai.train`` resolved), and a note per key."""
    import copy

    filled = copy.deepcopy(spec)
    stage = kept.get("stage")
    stages = kept.get("stages") or []
    earlier = isinstance(stage, str) and stages and stage != stages[-1]
    node = (filled.get("stages") or {}).get(stage) if earlier else filled
    prefix = f"stages.{stage}." if earlier else ""
    notes: dict[str, str] = {}
    if isinstance(node, dict):
        for key, value in node.items():
            if value is None and config.get(key) is not None and not isinstance(config[key], dict):
                node[key] = config[key]
                notes[f"{prefix}{key}"] = "the value this run used"
    return filled, notes


def show_main(argv: list[str] | None = None) -> int:
    """``python -m whileai show RUN_ID [--json]``: one run's result, verdict, adapter, page and spec."""
    from urllib.parse import quote

    from whileai.core.errors import NotFoundError, PlatformError

    p = _parser("python -m whileai show", "One run: result with n/CI/p, expect verdict, adapter, page, spec.")
    p.add_argument("run_id", help="a run id, e.g. run_0123abcd... (python -m whileai runs lists them)")
    p.add_argument("--json", action="store_true", help="print the run's record (without its series) as JSON")
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    client = _client()
    try:
        record = client.request("GET", f"/runs/{quote(args.run_id, safe='')}", params={"series": "false"})
    except NotFoundError:
        print(f"no run {args.run_id!r} on {client.base_url}; `python -m whileai runs` lists the runs there",
              file=sys.stderr)
        return 2
    except PlatformError as exc:
        print(f"python -m whileai show: {_said(exc)}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(record, default=str))
        return 0
    print("\n".join(show_lines(record)))
    return 0
