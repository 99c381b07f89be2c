"""A committed recipe at many seeds, run as a user runs it: per seed each stage's held-out result, then a pooled test.

    python benchmarks/recipe_seeds.py grpo_tooluse --seeds 0-9
    python benchmarks/recipe_seeds.py grpo_tooluse --seeds 0-4 --cpu-path avx2 -- beta=0.04
    python benchmarks/recipe_seeds.py hack/rm_proxy --seeds 0,3,5 --markdown     # the table for MEASUREMENTS.md
    python benchmarks/recipe_seeds.py grpo_tooluse --from-json sweep.json --markdown  # a kept sweep (--json) again
    python benchmarks/recipe_seeds.py grpo_tooluse --from-json a.json b.json --markdown  # its parts, as one table

Each seed is one ``python -m whileai run recipe=RECIPE seed=S [overrides] --json`` in its own process, exactly
what a user types (``--cpu-path X`` runs it under ``ATEN_CPU_CAPABILITY=X``). Every seed shares one data root
(``--home``, else a new folder kept after the sweep), so the kit base is built once and every run stays
readable there (``WHILEAI_HOME=DIR python -m whileai show RUN``). The closing summary (``--json``) names the
runs and the expect verdict; each stage's record (``python -m whileai show RUN --json``) gives its held-out
counts, paired test, alarms, base weights' digest and CPU kernel path.

Per seed it prints each stage's held-out ``before -> after/n (gained/lost, p)`` (exact McNemar), the alarms with
the look each first fired at, the expect verdict with the lines that failed, the base digest and the CPU path;
a seed whose run ends without a verdict is reported with its exit code and the end of its log, and the sweep
goes on. Then the pass count and two tests over the last stage:

- pooled: the discordant prompts of every seed added up, one exact McNemar on the totals. Each seed is a
  stratum; summing the strata's discordant counts is what Mantel-Haenszel pooling of McNemar tests reduces
  to, so this is the stratified test too. It asks whether training gains on these seeds' runs as a whole.
- over seeds: an exact sign test on how many seeds gained against how many lost. It treats the seed as the
  unit, so it asks whether another seed would gain; with few seeds it has little power (10 of 10 gives
  p = 0.002, 5 of 5 only 0.063).

Ctrl-C (or SIGTERM) stops the running seed (the runner stops its hosted run) and prints what the finished seeds
showed.
Exit code: 0 when every seed passed its expect, 3 when one failed it, 1 when one ended without a verdict, 130
on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: the kernel paths torch reads from ATEN_CPU_CAPABILITY (torch/csrc docs: default, avx2, avx512)
CPU_PATHS = ("default", "avx2", "avx512")
CPU_ENV = "ATEN_CPU_CAPABILITY"
#: the runner's exit codes that carry a verdict (whileai/runner/pipeline.py: 0 passed, EXIT_EXPECT failed)
VERDICT_CODES = (0, 3)
#: lines of a crashed seed's log shown: enough for a traceback's last frames and its message
LOG_TAIL_LINES = 15
#: seconds a run gets to stop its hosted run after Ctrl-C before it is killed
STOP_GRACE_S = 60.0
#: characters of the base weights' SHA-256 shown (as git shows a commit)
DIGEST_CHARS = 12


# ---------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------


def parse_seeds(text: str) -> list[int]:
    """``0-9``, ``0,3,5`` or ``0-4,7`` as the seeds in order, each once.

        >>> parse_seeds("0-3,7,2")
        [0, 1, 2, 3, 7]
    """
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        low, dash, high = part.partition("-")
        if not (low.isdigit() and (not dash or high.isdigit())) or (dash and int(high) < int(low)):
            raise argparse.ArgumentTypeError(
                f"--seeds {text!r}: {part!r} is not a seed or a range; pass seeds >= 0 as 0-9, 0,3,5 or 0-4,7")
        for seed in range(int(low), int(high if dash else low) + 1):
            if seed not in seeds:
                seeds.append(seed)
    return seeds


def _refused(overrides: Sequence[str]) -> str | None:
    """Why an override cannot ride along (the tool sets the seed and reads one run per seed), or None."""
    for word in overrides:
        key = word.lstrip("+~").split("=", 1)[0]
        if key == "seed":
            return f"{word!r}: the tool sets seed= itself; pass the seeds as --seeds (e.g. --seeds 0-9)"
        if word in ("-m", "--multirun", "--json") or key in ("recipe", "hydra.mode"):
            return (f"{word!r}: each seed runs recipe=RECIPE once as a single run (--json added by the tool); "
                    "pass the recipe as the first argument and other knobs as key=value")
    return None


def _args(argv: Sequence[str]) -> argparse.Namespace:
    argv = list(argv)
    overrides = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                usage="recipe_seeds.py RECIPE [--seeds 0-9] [options] [-- key=value ...]")
    p.add_argument("recipe", help="a committed recipe's name, as recipe= takes it (grpo_tooluse, hack/rm_proxy)")
    p.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-9"), help="0-9 (default), 0,3,5 or 0-4,7")
    p.add_argument("--cpu-path", choices=CPU_PATHS, default=None,
                   help=f"run each seed under {CPU_ENV}=PATH (default: the machine's own path)")
    p.add_argument("--home", type=Path, default=None,
                   help="the data root every seed shares (default: a new folder, kept after the sweep)")
    p.add_argument("--markdown", action="store_true", help="print the table for recipes/MEASUREMENTS.md")
    p.add_argument("--json", type=Path, default=None, help="also write every seed's figures to this file")
    p.add_argument("--from-json", type=Path, nargs="+", default=None, metavar="FILE",
                   help="run nothing: print the table of a sweep --json wrote (e.g. again with --markdown); several "
                        "files (one sweep's seeds run in parallel) make one table, in seed order")
    args = p.parse_args(own)
    problem = _refused(overrides)
    if problem:
        p.error(problem)
    args.overrides = overrides
    return args


# ---------------------------------------------------------------------------
# Running one seed and reading what it left
# ---------------------------------------------------------------------------


def _call(command: list[str], env: dict[str, str], log: Path) -> tuple[int, str]:
    """(exit code, stdout) of ``command``, its stderr into ``log``; Ctrl-C stops it, then re-raises."""
    with log.open("a", encoding="utf-8") as err:
        # its own session: a terminal's Ctrl-C reaches this process only, which forwards exactly one SIGINT
        # (a second one would cut short the runner's stopping of its hosted run)
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=ROOT,
                                start_new_session=True)
        try:
            out, _ = proc.communicate()
        except KeyboardInterrupt:
            _stop(proc)
            raise
    return proc.returncode, out


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGINT (what a terminal's Ctrl-C sends; the runner stops its hosted run), then kill after STOP_GRACE_S."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.communicate(timeout=STOP_GRACE_S)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):  # it did not stop in time, or Ctrl-C again
        proc.kill()
        proc.communicate()


def _closing(stdout: str, runs_file: Path) -> dict[str, Any] | None:
    """The run's closing summary: the ``--json`` line on stdout, else the summary its runs file keeps."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict):
            return found
    try:
        kept = json.loads(runs_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    summary = kept.get("summary") if isinstance(kept, dict) else None
    return summary if isinstance(summary, dict) else None


def _record(run_id: str, env: dict[str, str], log: Path) -> dict[str, Any]:
    """A run's stored record, as ``python -m whileai show RUN --json`` prints it ({} when it cannot be read)."""
    code, out = _call([sys.executable, "-m", "whileai", "show", run_id, "--json"], env, log)
    try:
        found = json.loads(out) if code == 0 else {}
    except ValueError:
        found = {}
    return found if isinstance(found, dict) else {}


def run_seed(recipe: str, seed: int, overrides: Sequence[str], env: dict[str, str], folder: Path) -> dict[str, Any]:
    """One seed: the run as a user types it, its closing summary, and each stage's record read back."""
    token = f"seeds-{recipe.replace('/', '-')}-{seed}-{secrets.token_hex(3)}"
    log = folder / f"{token}.log"
    command = [sys.executable, "-m", "whileai", "run", f"recipe={recipe}", f"seed={seed}", *overrides, "--json"]
    typed = " ".join(["python", *(shlex.quote(c) for c in command[1:])])
    print(f"seed {seed}: {typed} (log {log})", file=sys.stderr, flush=True)
    started = time.time()
    code, out = _call(command, {**env, "WHILEAI_RUNNER_TOKEN": token}, log)
    closing = _closing(out, Path(env["WHILEAI_HOME"]) / "runner" / "runs" / token / "whileai_runs.json")
    result: dict[str, Any] = {"seed": seed, "exit_code": code, "seconds": round(time.time() - started),
                              "log": str(log), "home": env["WHILEAI_HOME"],
                              "command": typed}
    if code not in VERDICT_CODES or closing is None:
        result["crashed"] = {"error": (closing or {}).get("error"), "tail": _tail(log)}
        return result
    result["stages"] = [stage_row(entry, _record(str(entry["id"]), env, log)) for entry in closing.get("runs") or []]
    result["expect"] = expect_of(closing)
    return result


def _tail(log: Path) -> list[str]:
    try:
        return log.read_text(encoding="utf-8", errors="replace").splitlines()[-LOG_TAIL_LINES:]
    except OSError:
        return []


# ---------------------------------------------------------------------------
# What a run's record and closing summary say
# ---------------------------------------------------------------------------


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def first_looks(alarms: Any) -> dict[str, int]:
    """Each alarm kind and the monitor's look it first fired at (look 0 is the policy before training)."""
    looks: dict[str, int] = {}
    for alarm in alarms if isinstance(alarms, list) else []:
        if isinstance(alarm, dict):
            kind, look = str(alarm.get("kind") or "alarm"), int(alarm.get("evaluation") or 0)
            looks[kind] = min(look, looks.get(kind, look))
    return looks


def alarms_text(looks: dict[str, int]) -> str:
    """``feature@look2, divergence@look4``, or ``none``."""
    return ", ".join(f"{kind}@look{look}" for kind, look in looks.items()) or "none"


def stage_row(entry: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """One stage's figures from its closing-summary entry and its stored record."""
    summary = _dict(record.get("summary"))
    training = _dict(summary.get("training"))
    stats = _dict(training.get("stats"))
    paired = _dict(stats.get("paired"))
    compute = _dict(training.get("compute"))
    base = _dict(training.get("base_weights")).get("sha256")
    return {"stage": entry.get("stage") or entry.get("method"), "method": entry.get("method"), "run": entry.get("id"),
            "status": record.get("status"), "metric": training.get("metric") or "pass_rate",
            "before": training.get("before"), "after": training.get("after"),
            "before_k": _dict(stats.get("before")).get("passed"), "after_k": _dict(stats.get("after")).get("passed"),
            "n": stats.get("n"), "gained": paired.get("improved"), "lost": paired.get("worsened"), "p": paired.get("p"),
            "alarms": first_looks(_dict(summary.get("monitor")).get("alarms")),
            "base": base[:DIGEST_CHARS] if isinstance(base, str) and base else None,
            "cpu": compute.get("cpu_capability"), "processor": processor_name(compute.get("cpu")),
            "blas": _dict(compute.get("blas")).get("branch")}


def processor_name(identity: Any) -> str | None:
    """The recorded processor without its vector flags, ``"AMD EPYC (family 25 model 17 stepping 1)"``: two machines
    on one kernel path can still train to different weights (another CPU's kernels order a sum differently), so a
    seed table names the processor as well as the path; None where the run did not record one."""
    if not isinstance(identity, str) or not identity:
        return None
    name, _, flags = identity.partition(";")
    return name + ")" if flags and "(" in name and not name.endswith(")") else identity


def expect_of(closing: dict[str, Any]) -> dict[str, Any]:
    """``{"verdict": passed|failed|not checked, "failed": [keys], "lines": [failed lines' text]}``."""
    expect = _dict(closing.get("expect"))
    lines = [line for line in expect.get("lines") or [] if isinstance(line, dict)]
    if not lines:
        why = "quick=true" if closing.get("quick") else "the spec's expect block asks nothing"
        return {"verdict": "not checked", "why": why, "failed": [], "lines": []}
    return {"verdict": "passed" if expect.get("passed") else "failed",
            "failed": [str(line.get("key")) for line in lines if not line.get("passed")],
            "lines": [str(t) for t in expect.get("failed") or []]}


# ---------------------------------------------------------------------------
# Pooling the seeds
# ---------------------------------------------------------------------------


def pooled(pairs: Sequence[tuple[int, int]]) -> dict[str, Any] | None:
    """Two paired tests over seeds' ``(gained, lost)`` counts on the same held-out prompts (the module docstring).

    ``gained``/``lost``/``p``: the discordant prompts summed over seeds and one exact McNemar on the sums;
    ``seeds_gained``/``seeds_lost``/``seeds_even``/``seed_p``: the exact sign test over seeds (an even seed is
    left out, as McNemar leaves out a prompt that did not change). None without a seed.

        >>> pooled([(6, 0), (2, 1)])["gained"], pooled([(6, 0), (2, 1)])["lost"]
        (8, 1)
    """
    from whileai.core.stats import mcnemar_exact

    if not pairs:
        return None
    gained, lost = sum(g for g, _ in pairs), sum(w for _, w in pairs)
    up, down = sum(g > w for g, w in pairs), sum(g < w for g, w in pairs)
    return {"seeds": len(pairs), "gained": gained, "lost": lost, "p": mcnemar_exact(lost, gained),
            "seeds_gained": up, "seeds_lost": down, "seeds_even": len(pairs) - up - down,
            "seed_p": mcnemar_exact(down, up)}


def _last_pairs(results: Sequence[dict[str, Any]]) -> tuple[list[tuple[int, int]], list[int]]:
    """The last stage's (gained, lost) of every seed that has them, and the n of each."""
    pairs, ns = [], []
    for result in results:
        last = (result.get("stages") or [{}])[-1]
        if isinstance(last.get("gained"), int) and isinstance(last.get("lost"), int):
            pairs.append((last["gained"], last["lost"]))
            ns.append(int(last.get("n") or 0))
    return pairs, ns


# ---------------------------------------------------------------------------
# Words and tables
# ---------------------------------------------------------------------------


def seeds_text(seeds: Sequence[int]) -> str:
    """The seeds as ranges: ``0-4,7``."""
    parts: list[str] = []
    for seed in seeds:
        if parts and parts[-1].split("-")[-1] == str(seed - 1):
            parts[-1] = f"{parts[-1].split('-')[0]}-{seed}"
        else:
            parts.append(str(seed))
    return ",".join(parts)


def figure(stage: dict[str, Any], test: bool = True) -> str:
    """``9 -> 15/73 (6/0, p = 0.031)`` from the counts; the rates (``0.623 -> 0.812``) where there are none."""
    from whileai.core.stats import change_text, p_text

    if not isinstance(stage.get("after_k"), int) or not stage.get("n"):
        return change_text(stage.get("before"), stage.get("after"))
    before = stage["before_k"] if isinstance(stage.get("before_k"), int) else "-"
    text = f"{before} -> {stage['after_k']}/{stage['n']}"
    if test and isinstance(stage.get("p"), (int, float)):
        text += f" ({stage['gained']}/{stage['lost']}, {p_text(stage['p'])})"
    return text


def _distinct(result: dict[str, Any], key: str) -> str:
    found = list(dict.fromkeys(str(s[key]) for s in result.get("stages") or [] if s.get(key)))
    return "/".join(found) or "-"


def _alarms(result: dict[str, Any]) -> str:
    if "crashed" in result:
        return "-"
    looks: dict[str, int] = {}
    for stage in result.get("stages") or []:
        looks.update(stage.get("alarms") or {})
    return alarms_text(looks)


def verdict_cell(result: dict[str, Any]) -> str:
    """``passed``, ``failed: stage_gain_min``, ``not checked`` or ``crashed (exit 1)``."""
    if "crashed" in result:
        return f"crashed (exit {result['exit_code']})"
    expect = result["expect"]
    return f"failed: {', '.join(expect['failed'])}" if expect["failed"] else str(expect["verdict"])


def stage_names(results: Sequence[dict[str, Any]]) -> list[str]:
    """The recipe's stages in order, from the first seed that ran them."""
    for result in results:
        if result.get("stages"):
            return [str(s["stage"]) for s in result["stages"]]
    return []


def text_table(results: Sequence[dict[str, Any]]) -> list[str]:
    """One row per seed: each stage's figure, alarms, expect, base digest, CPU path, time; aligned columns."""
    names = stage_names(results) or ["stages"]  # every seed crashed: one column says so
    rows = [["seed", *names, "alarms", "expect", "base", "cpu", "took"]]
    for r in results:
        stages = {str(s["stage"]): figure(s) for s in r.get("stages") or []}
        cells = [stages.get(name, "-") for name in names]
        rows.append([str(r["seed"]), *cells, _alarms(r), verdict_cell(r), _distinct(r, "base"), _distinct(r, "cpu"),
                     f"{r['seconds']} s"])
    width = max(len(row) for row in rows)
    rows = [row + [""] * (width - len(row)) for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(width)]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]


def markdown_table(results: Sequence[dict[str, Any]]) -> list[str]:
    """The table as recipes/MEASUREMENTS.md keeps it: seed | stage starts | before -> after | alarms | expect | base."""
    lines = ["| seed | stage starts | before -> after (gained/lost, p) | alarms | expect | base |",
             "|---|---|---|---|---|---|"]
    for r in results:
        stages = r.get("stages") or []
        starts = "; ".join(f"{s['stage']} {figure(s, test=False)}" for s in stages[:-1]) or "-"
        last = figure(stages[-1]) if stages else "-"
        lines.append(f"| {r['seed']} | {starts} | {last} | {_alarms(r)} | {verdict_cell(r)} | {_distinct(r, 'base')} |")
    return lines


def closing_lines(results: Sequence[dict[str, Any]], interrupted: bool) -> list[str]:
    """The pass count, each failed expect line and crash, and the pooled tests over the last stage."""
    from whileai.core.stats import p_text

    passed = sum(1 for r in results if r.get("expect", {}).get("verdict") == "passed")
    crashed = [r for r in results if "crashed" in r]
    unchecked = [r for r in results if r.get("expect", {}).get("verdict") == "not checked"]
    count = f"expect passed at {passed}/{len(results)} seeds"
    notes = []
    if crashed:
        notes.append(f"{len(crashed)} crashed")
    if unchecked:
        notes.append(f"{len(unchecked)} not checked: {unchecked[0]['expect']['why']}")
    if notes:
        count += f" ({'; '.join(notes)})"
    lines = [count + (" before the sweep was stopped" if interrupted else "")]
    pairs, ns = _last_pairs(results)
    both = pooled(pairs)
    if both is not None:
        last = stage_names(results)[-1]
        prompts = f"{ns[0]} held-out prompts each" if len(set(ns)) == 1 else f"{sum(ns)} held-out prompts in all"
        lines += [f"pooled, last stage ({last}) over {both['seeds']} seeds, {prompts}: {both['gained']} gained, "
                  f"{both['lost']} lost, exact McNemar on the summed discordant prompts (Mantel-Haenszel-style) "
                  f"{p_text(both['p'])}",
                  f"over seeds: {both['seeds_gained']} gained, {both['seeds_lost']} lost, {both['seeds_even']} even; "
                  f"exact sign test {p_text(both['seed_p'])}"]
    return lines


def detail_lines(results: Sequence[dict[str, Any]]) -> list[str]:
    """Under the table: each failed expect line, and each crash's command, error and last log lines."""
    lines: list[str] = []
    for r in results:
        for text in r.get("expect", {}).get("lines") or []:
            lines.append(f"seed {r['seed']}: {text}")
        if "crashed" in r:
            crash = r["crashed"]
            lines.append(f"seed {r['seed']}: ended without a verdict, exit {r['exit_code']}: {r['command']}"
                         + (f"\n    {crash['error']}" if crash.get("error") else "") + f"\n    log {r['log']}, last lines:")
            lines += [f"    | {line}" for line in crash["tail"]]
    return lines


# ---------------------------------------------------------------------------
# The sweep
# ---------------------------------------------------------------------------


def _environment(args: argparse.Namespace) -> dict[str, str]:
    home = args.home or Path(tempfile.mkdtemp(prefix="whileai-seeds-"))
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "WHILEAI_HOME": str(home.resolve())}
    if args.cpu_path:
        env[CPU_ENV] = args.cpu_path
    return env


def sweep(args: argparse.Namespace, env: dict[str, str]) -> tuple[list[dict[str, Any]], bool]:
    """(each seed's result, whether Ctrl-C stopped the sweep); a seed that crashes does not stop it."""
    folder = Path(env["WHILEAI_HOME"]) / "recipe_seeds"
    folder.mkdir(exist_ok=True)
    results: list[dict[str, Any]] = []
    print(f"data root {env['WHILEAI_HOME']} (kept: WHILEAI_HOME=... python -m whileai show RUN reads a run again)",
          file=sys.stderr, flush=True)
    try:
        for seed in args.seeds:
            result = run_seed(args.recipe, seed, args.overrides, env, folder)
            results.append(result)
            print(f"seed {seed}: {verdict_cell(result)} in {result['seconds']} s", file=sys.stderr, flush=True)
            if args.json:
                args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    except KeyboardInterrupt:
        print("\ninterrupted: the running seed was stopped; the seeds that finished:", file=sys.stderr, flush=True)
        return results, True
    return results, False


def _recorded(results: Sequence[dict[str, Any]], key: str) -> list[str]:
    """Each distinct value the sweep's stage rows recorded under ``key``, in the order first met."""
    return list(dict.fromkeys(s[key] for r in results for s in r.get("stages") or [] if s.get(key)))


def heading(args: argparse.Namespace, env: dict[str, str], results: Sequence[dict[str, Any]]) -> str:
    """What was run, where, on which CPU kernel path and MKL branch (the markdown heading, for a shared file, leaves
    out the data root, a folder on this machine)."""
    typed = " ".join(["python benchmarks/recipe_seeds.py", args.recipe, "--seeds", seeds_text(args.seeds),
                      *(["--cpu-path", args.cpu_path] if args.cpu_path else []),
                      *(["--", *map(shlex.quote, args.overrides)] if args.overrides else [])])
    path = "/".join(_recorded(results, "cpu")) or env.get(CPU_ENV) or "the machine's default"
    on, blas = _recorded(results, "processor"), _recorded(results, "blas")
    where = (f"CPU kernel path {path}" + (f", MKL branch {'/'.join(blas)}" if blas else "")
             + (f" on {' / '.join(on)}" if on else ""))
    return (f"`{typed}` ({time.strftime('%Y-%m-%d')}, {where}):"
            if args.markdown else f"{typed}\n{where}; data root {env['WHILEAI_HOME']}")


def report(args: argparse.Namespace, env: dict[str, str], results: list[dict[str, Any]], interrupted: bool) -> None:
    table = markdown_table(results) if args.markdown else text_table(results)
    details = detail_lines(results)
    print("\n".join([heading(args, env, results), "", *table, "", *(details + [""] if details else []),
                     *closing_lines(results, interrupted)]), flush=True)


def exit_code(results: Sequence[dict[str, Any]], interrupted: bool) -> int:
    if interrupted:
        return 130
    if any("crashed" in r for r in results):
        return 1
    return 0 if all(r["expect"]["verdict"] == "passed" for r in results) else 3


def _read(args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """A sweep's results as ``--json`` wrote them (one file or the parts of one sweep, in seed order), and the
    environment they ran in (for the heading)."""
    results = sorted((r for path in args.from_json for r in json.loads(path.read_text(encoding="utf-8"))),
                     key=lambda r: r["seed"])
    args.seeds = [r["seed"] for r in results]
    twice = sorted({seed for seed in args.seeds if args.seeds.count(seed) > 1})
    if twice:
        raise SystemExit(f"--from-json: seed {', '.join(map(str, twice))} is in more than one result of "
                         f"{' '.join(map(str, args.from_json))}; give each seed's run once (one file per part of a sweep)")
    ran = sorted({" ".join(overrides_of(r)) for r in results})
    if len(ran) > 1:
        raise SystemExit(f"--from-json: the results ran with different overrides ({' | '.join(ran)}); a table is one "
                         "setting: give the parts of one sweep")
    args.overrides = overrides_of(results[0]) if results else []
    env = {"WHILEAI_HOME": str(results[0].get("home") or "-") if results else "-"}
    return results, {**env, **({CPU_ENV: args.cpu_path} if args.cpu_path else {})}


def overrides_of(result: dict[str, Any]) -> list[str]:
    """The overrides a seed's run was typed with (its ``command`` between ``seed=S`` and ``--json``)."""
    words = shlex.split(str(result.get("command") or ""))
    start = words.index(f"seed={result['seed']}") + 1 if f"seed={result['seed']}" in words else len(words)
    return words[start:words.index("--json")] if "--json" in words[start:] else words[start:]


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = _args(sys.argv[1:] if argv is None else argv)
    if args.from_json:
        results, env = _read(args)
        report(args, env, results, False)
        return exit_code(results, False)
    env = _environment(args)
    # SIGTERM (kill PID) is a Ctrl-C too: the running seed's run is in its own session, so it would be left
    # running, its hosted job with it, and the finished seeds unreported
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        results, interrupted = sweep(args, env)
    finally:
        signal.signal(signal.SIGTERM, previous)
    report(args, env, results, interrupted)
    return exit_code(results, interrupted)


if __name__ == "__main__":
    sys.exit(main())
