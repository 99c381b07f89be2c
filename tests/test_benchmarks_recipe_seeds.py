"""benchmarks/recipe_seeds.py: a recipe run at seeds through ``python -m whileai run``, its table and pooled tests.

The end-to-end test runs sft_tooluse on the tiny random base at CI size (tests/_runner_helpers.TINY) at two
seeds; what the full-size recipes show at ten seeds is the tool's output in recipes/MEASUREMENTS.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shlex
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from _runner_helpers import TINY, tiny_base

from whileai.core.stats import mcnemar_exact

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("recipe_seeds", ROOT / "benchmarks" / "recipe_seeds.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def _stage(name, before_k, after_k, n, gained, lost, **more):
    return {"stage": name, "method": name, "run": f"run_{name}", "status": "done", "metric": "pass_rate",
            "before": before_k / n, "after": after_k / n, "before_k": before_k, "after_k": after_k, "n": n,
            "gained": gained, "lost": lost, "p": mcnemar_exact(lost, gained), "alarms": {}, "base": "f3f35500abcd",
            "cpu": "avx2", **more}


def _seed(seed, *stages, failed=()):
    expect = {"verdict": "failed" if failed else "passed", "failed": list(failed),
              "lines": [f"expect.{k}: 0.05 failed at recipes/x.yaml:3: the run shows ..." for k in failed]}
    return {"seed": seed, "exit_code": 3 if failed else 0, "seconds": 200, "log": "/x.log", "command": "...",
            "stages": list(stages), "expect": expect}


def test_pooling_sums_each_seeds_discordant_prompts_and_counts_seeds(bench):
    # grpo_tooluse's seeds 0-4 as recipes/MEASUREMENTS.md records them (gained, lost)
    both = bench.pooled([(6, 0), (19, 2), (22, 4), (17, 0), (20, 2)])
    assert (both["gained"], both["lost"], both["seeds"]) == (84, 8, 5)
    assert both["p"] == mcnemar_exact(8, 84) and both["p"] < 1e-13
    assert (both["seeds_gained"], both["seeds_lost"], both["seeds_even"]) == (5, 0, 0)
    assert both["seed_p"] == 0.0625  # 5 of 5 seeds: 2 / 2^5, not significant on its own
    # one large gain outweighs two small losses in the pool, not over seeds
    mixed = bench.pooled([(10, 0), (0, 3), (0, 3)])
    assert (mixed["gained"], mixed["lost"]) == (10, 6) and mixed["p"] == pytest.approx(0.454498291015625)
    assert (mixed["seeds_gained"], mixed["seeds_lost"], mixed["seed_p"]) == (1, 2, 1.0)
    even = bench.pooled([(2, 2), (5, 1)])  # an even seed is left out of the sign test, as McNemar leaves out ties
    assert (even["seeds_even"], even["seed_p"]) == (1, 1.0)
    assert bench.pooled([]) is None


def test_closing_lines_give_the_pass_count_crashes_and_both_tests(bench):
    results = [_seed(0, _stage("sft", 0, 9, 73, 9, 0), _stage("grpo", 9, 15, 73, 6, 0)),
               _seed(1, _stage("sft", 0, 19, 73, 19, 0), _stage("grpo", 19, 21, 73, 5, 3), failed=["stage_gain_min"]),
               {"seed": 2, "exit_code": 1, "seconds": 9, "log": "/s2.log", "command": "-m whileai run ...",
                "crashed": {"error": "the job ended: out of memory", "tail": ["Traceback ...", "MemoryError"]}}]
    lines = bench.closing_lines(results, interrupted=False)
    assert lines[0] == "expect passed at 1/3 seeds (1 crashed)"
    assert lines[1].startswith("pooled, last stage (grpo) over 2 seeds, 73 held-out prompts each: 11 gained, 3 lost")
    assert lines[1].endswith(f"p = {mcnemar_exact(3, 11):.3f}")
    assert lines[2] == "over seeds: 2 gained, 0 lost, 0 even; exact sign test p = 0.500"
    table = bench.text_table(results)
    assert re.match(r"seed +sft +grpo +alarms +expect +base +cpu +took$", table[0])
    assert re.match(r"1 +0 -> 19/73 \(19/0, p < 0\.001\) +19 -> 21/73 \(5/3, p = 0\.727\) +none +"
                    r"failed: stage_gain_min +f3f35500abcd +avx2 +200 s$", table[2]), table[2]
    assert re.match(r"2 +- +- +- +crashed \(exit 1\) +- +- +9 s$", table[3]), table[3]
    details = "\n".join(bench.detail_lines(results))
    assert "seed 1: expect.stage_gain_min: 0.05 failed at recipes/x.yaml:3" in details
    assert "seed 2: ended without a verdict, exit 1" in details and "the job ended: out of memory" in details
    assert "    | MemoryError" in details
    markdown = bench.markdown_table(results)
    assert markdown[0] == "| seed | stage starts | before -> after (gained/lost, p) | alarms | expect | base |"
    assert markdown[2] == "| 0 | sft 0 -> 9/73 | 9 -> 15/73 (6/0, p = 0.031) | none | passed | f3f35500abcd |"
    assert markdown[4] == "| 2 | - | - | - | crashed (exit 1) | - |"
    assert bench.exit_code(results, interrupted=False) == 1


def test_a_stage_record_gives_counts_alarms_base_and_cpu_path(bench):
    record = {"status": "done", "summary": {
        "training": {"metric": "pass_rate", "before": 38 / 73, "after": 4 / 73,
                     "stats": {"n": 73, "before": {"passed": 38, "n": 73}, "after": {"passed": 4, "n": 73},
                               "paired": {"improved": 1, "worsened": 35, "p": 1e-9}},
                     "base_weights": {"sha256": "4841d6bd" + "0" * 56},
                     "compute": {"cpu_capability": "avx2", "cpu": "AMD EPYC (family 25 model 17 stepping 1; avx2 fma)",
                                 "blas": {"branch": "AVX2", "processor": "AVX2", "set_by": "whileai"}}},
        "monitor": {"alarms": [{"kind": "feature", "evaluation": 3}, {"kind": "feature", "evaluation": 2},
                               {"kind": "divergence", "evaluation": 5}]}}}
    row = bench.stage_row({"id": "run_1", "stage": "grpo", "method": "grpo"}, record)
    assert bench.figure(row) == "38 -> 4/73 (1/35, p < 0.001)"
    assert bench.alarms_text(row["alarms"]) == "feature@look2, divergence@look5"
    assert (row["base"], row["cpu"], row["blas"]) == ("4841d6bd0000", "avx2", "AVX2")
    # the processor without its flags: two machines on one kernel path can train to different weights
    assert row["processor"] == "AMD EPYC (family 25 model 17 stepping 1)"
    assert bench.processor_name("Some CPU (family 6; no avx2)") == "Some CPU (family 6)"
    assert bench.processor_name("plain name") == "plain name" and bench.processor_name(None) is None
    bare = bench.stage_row({"id": "run_2", "stage": "proxy", "method": "rm"}, {"summary": {"training": {
        "metric": "pair_accuracy", "before": 0.623, "after": 0.812}}})  # before the digest and path were recorded
    assert (bench.figure(bare), bare["base"], bare["cpu"], bare["processor"], bare["blas"]) == (
        "0.623 -> 0.812", None, None, None, None)
    assert bench.expect_of({"quick": {"steps": 4}})["verdict"] == "not checked"


def test_the_heading_names_the_kernel_path_the_mkl_branch_and_the_processor_each_once(bench):
    import argparse

    stage = {"cpu": "AVX512", "blas": "AVX512", "processor": "Intel(R) Xeon(R) Processor (family 6 model 207)"}
    results = [{"stages": [stage, dict(stage)]}, {"stages": [dict(stage, blas="auto")]}, {"crashed": 1}]
    args = argparse.Namespace(recipe="grpo_tooluse", seeds=[0, 1, 2], cpu_path=None, overrides=[], markdown=True)
    assert bench.heading(args, {}, results).endswith(
        ", CPU kernel path AVX512, MKL branch AVX512/auto on Intel(R) Xeon(R) Processor (family 6 model 207)):")
    assert "MKL branch" not in bench.heading(args, {}, [{"stages": [dict(stage, blas=None)]}]), "not recorded"


def test_seeds_and_overrides_are_checked(bench):
    assert bench.parse_seeds("0-9") == list(range(10)) and bench.parse_seeds("0-2,7,1") == [0, 1, 2, 7]
    assert bench.seeds_text([0, 1, 2, 3, 7, 9, 10]) == "0-3,7,9-10"
    for bad in ("3-1", "a", "0-", "-1"):
        with pytest.raises(argparse.ArgumentTypeError, match="pass seeds >= 0"):
            bench.parse_seeds(bad)
    with pytest.raises(SystemExit):
        bench._args(["grpo_tooluse", "--", "seed=3"])
    assert "pass the seeds as --seeds" in bench._refused(["beta=0.04", "seed=3"])
    assert bench._refused(["-m"]) and bench._refused(["beta=0.04"]) is None
    args = bench._args(["grpo_tooluse", "--seeds", "0-4", "--cpu-path", "avx2", "--", "beta=0.04"])
    assert (args.seeds, args.cpu_path, args.overrides) == ([0, 1, 2, 3, 4], "avx2", ["beta=0.04"])


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_ctrl_c_stops_the_running_seed_and_prints_what_finished(bench, monkeypatch, capsys, tmp_path, stop):
    def fake(recipe, seed, overrides, env, folder):
        if seed == 1 and stop == "ctrl-c":
            raise KeyboardInterrupt
        if seed == 1:  # kill PID: the same as Ctrl-C, not an end without a report
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(10)
        return _seed(seed, _stage("train", 0, 36, 40, 36, 0))

    monkeypatch.setattr(bench, "run_seed", fake)
    assert bench.main(["sft_tooluse", "--seeds", "0-3", "--home", str(tmp_path)]) == 130
    out = capsys.readouterr().out
    assert re.search(r"^0 +0 -> 36/40 \(36/0, p < 0\.001\) +none +passed", out, re.M), out
    assert "expect passed at 1/1 seeds before the sweep was stopped" in out
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # put back as it was


def test_ctrl_c_reaches_the_run_once_and_waits_for_it_to_stop(bench, tmp_path):
    # the run stands in for the runner: on SIGINT it stops its hosted run (here: says so) and exits 130
    child = ("import signal, sys, time\n"
             "print('ready', file=sys.stderr, flush=True)\n"
             "try:\n    time.sleep(60)\n"
             "except KeyboardInterrupt:\n    print('stopped its run', file=sys.stderr, flush=True); sys.exit(130)\n")
    log = tmp_path / "run.log"
    timer = threading.Timer(3.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            bench._call([sys.executable, "-c", child], dict(os.environ), log)
    finally:
        timer.cancel()
    assert log.read_text().splitlines() == ["ready", "stopped its run"]


def test_the_tool_runs_a_recipe_at_two_seeds_and_reports_a_crash(bench, capsys, tmp_path):
    """sft_tooluse at CI size through the real runner: the table, the pass count and the pooled lines; a seed
    whose run ends without a verdict is reported with its exit code and log, and the sweep goes on."""
    figures = tmp_path / "seeds.json"
    asks = ["expect.holdout_after_min=null", "expect.holdout_gain_min=null", "expect.holdout_gain_significant=null"]
    code = bench.main(["sft_tooluse", "--seeds", "0-1", "--home", str(tmp_path / "home"), "--json", str(figures),
                       "--", *TINY, f"base_model={tiny_base()}", *asks])
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"^seed +train +alarms +expect +base +cpu +took$", out, re.M), out
    for seed in (0, 1):
        assert re.search(rf"^{seed} +\d -> \d/4 \(\d/\d, p = [\d.]+\) +none +passed +\S+ +\S+ +\d+ s$", out, re.M), out
    assert "expect passed at 2/2 seeds" in out
    assert re.search(r"^pooled, last stage \(train\) over 2 seeds, 4 held-out prompts each: \d+ gained", out, re.M)
    assert re.search(r"^over seeds: \d gained, \d lost, \d even; exact sign test p ", out, re.M)
    results = json.loads(figures.read_text())
    assert [r["seed"] for r in results] == [0, 1] and all(r["stages"][0]["run"].startswith("run_") for r in results)
    assert bench.main(["sft_tooluse", "--from-json", str(figures), "--markdown"]) == 0  # the table again, as markdown
    markdown = capsys.readouterr().out
    typed = " ".join(shlex.quote(word) for word in [*TINY, f"base_model={tiny_base()}", *asks])
    assert f"`python benchmarks/recipe_seeds.py sft_tooluse --seeds 0-1 -- {typed}`" in markdown, "with its overrides"
    assert "data root" not in markdown.splitlines()[0], "the table's heading names no folder of this machine"
    processor = results[0]["stages"][0]["processor"]
    blas = results[0]["stages"][0]["blas"]
    branch = f", MKL branch {blas}" if blas else ""
    if processor:  # where /proc/cpuinfo reads: the heading names the processor beside the kernel path
        assert f"CPU kernel path {results[0]['stages'][0]['cpu']}{branch} on {processor}):" in markdown.splitlines()[0]
    assert re.search(r"^\| 1 \| - \| \d -> \d/4 \(\d/\d, p = [\d.]+\) \| none \| passed \| \S+ \|$", markdown, re.M)
    assert "expect passed at 2/2 seeds" in markdown
    parts = [tmp_path / "part1.json", tmp_path / "part0.json"]  # one sweep run as two, given out of order
    for part, seed in zip(parts, (1, 0)):
        part.write_text(json.dumps([r for r in results if r["seed"] == seed]))
    assert bench.main(["sft_tooluse", "--from-json", *map(str, parts), "--markdown"]) == 0
    assert capsys.readouterr().out == markdown, "the parts make the one sweep's table"
    with pytest.raises(SystemExit, match="seed 0, 1 is in more than one result"):
        bench.main(["sft_tooluse", "--from-json", str(figures), str(figures)])
    other = dict(results[0], command=results[0]["command"].replace(" --json", " steps=9 --json"))
    parts[1].write_text(json.dumps([other]))
    with pytest.raises(SystemExit, match="ran with different overrides"):
        bench.main(["sft_tooluse", "--from-json", *map(str, parts)])

    code = bench.main(["sft_tooluse", "--seeds", "0", "--home", str(tmp_path / "home"), "--", "steps=-1"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert re.search(r"^0 +- +- +crashed \(exit 2\) +- +- +\d+ s$", out, re.M), out
    assert "seed 0: ended without a verdict, exit 2" in out and "steps=-1 is outside" in out
    assert "expect passed at 0/1 seeds (1 crashed)" in out
