"""The runner's small parts: progress output on and off a terminal, the expect lines, spec diffs."""

from __future__ import annotations

import io
from types import SimpleNamespace

from whileai.runner import defaults
from whileai.runner._progress import Progress
from whileai.runner.compare import flatten, spec_differences, table
from whileai.runner.expect import failures


def _run(step, total, phase=None):
    return SimpleNamespace(step=step, total_steps=total, summary={"phase": phase} if phase else {})


def test_off_a_terminal_training_is_plain_lines_with_an_eta(monkeypatch):
    out = io.StringIO()
    progress = Progress(out, tty=False)
    bar = progress.training("sft")
    clock = iter(range(0, 10_000, 20))
    monkeypatch.setattr("whileai.runner._progress.time.monotonic", lambda: float(next(clock)))
    for step in (0, 1, 2, 3, 10):
        bar.update(_run(step, 10, "loading the base" if step == 0 else None))
    bar.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "  sft: step 0/10 (loading the base)"
    assert lines[-1].startswith("  sft: step 10/10, ETA 0s")
    assert any("ETA" in line and "step 3/10" in line for line in lines)
    assert "\r" not in out.getvalue()


def test_off_a_terminal_lines_are_throttled():
    out = io.StringIO()
    bar = Progress(out, tty=False).training("grpo")
    for step in range(1, 50):
        bar.update(_run(step, 100))
    assert len(out.getvalue().splitlines()) == 1, f"at most one line per PLAIN_LINE_EVERY_S ({defaults.PLAIN_LINE_EVERY_S} s)"


def test_off_a_terminal_the_phases_before_the_first_step_and_after_the_last_are_named(monkeypatch):
    out = io.StringIO()
    bar = Progress(out, tty=False).training("dpo")
    clock = iter(range(0, 10_000, 1))  # one second apart: the same phase with new counts waits its turn
    monkeypatch.setattr("whileai.runner._progress.time.monotonic", lambda: float(next(clock)))
    for step, phase in [(0, "measuring the held-out set before training"),
                        *[(0, f"sampling the policy's pairs: {n}/280 prompts x 2") for n in range(0, 281, 8)],
                        (0, "training"), (1, "training"), (40, "training"),
                        (40, "measuring the held-out set after training")]:
        bar.update(_run(step, 40, phase))
    lines = out.getvalue().splitlines()
    assert lines[0] == "  dpo: step 0/40 (measuring the held-out set before training)"
    assert lines[1] == "  dpo: step 0/40 (sampling the policy's pairs: 0/280 prompts x 2)"
    sampling = [line for line in lines if "sampling" in line]
    assert 2 <= len(sampling) <= 36 // defaults.PLAIN_LINE_EVERY_S + 2, sampling  # not a line per batch
    assert not any("(training)" in line for line in lines)  # the step count says that
    assert lines[-1] == "  dpo: step 40/40, ETA 0s (measuring the held-out set after training)"


def test_on_a_terminal_training_is_a_bar():
    out = io.StringIO()
    bar = Progress(out, tty=True).training("sft")
    bar.update(_run(5, 10))
    bar.close()
    assert "5/10" in out.getvalue() and "sft" in out.getvalue()


def test_each_failed_expect_line_names_key_file_and_what_was_seen():
    expect = {"holdout_after_min": 0.5, "holdout_gain_min": 0.1, "no_alarm": True, "status": "done",
              "stage_gain_min": 0.0, "delta_verdict_not": ["over-optimized"]}
    outcome = {"status": "done", "before": 0.2, "after": 0.25, "previous_after": 0.3,
               "alarms": [{"kind": "length"}], "verdict": "over-optimized"}
    lines = {"holdout_after_min": "recipes/x.yaml:12"}
    found = failures(expect, outcome, lines)
    assert found[0] == "expect.holdout_after_min: 0.5 failed at recipes/x.yaml:12: the run shows held-out after 0.250"
    assert [f.split(":")[0] for f in found] == ["expect.holdout_after_min", "expect.holdout_gain_min",
                                                 "expect.stage_gain_min", "expect.no_alarm",
                                                 "expect.delta_verdict_not"]
    assert failures({"holdout_after_min": 0.2, "status": "done"}, outcome, {}) == []


def test_spec_differences_are_flat_dotted_keys():
    a = {"beta": 0.01, "monitor": {"k": 2, "every": 5}, "stages": {}}
    b = {"beta": 0.04, "monitor": {"k": 2, "every": 10}, "stages": {}}
    assert flatten(a) == {"beta": 0.01, "monitor.k": 2, "monitor.every": 5, "stages": {}}
    assert spec_differences(a, b) == {"beta": (0.01, 0.04), "monitor.every": (5, 10)}
    assert table(["k", "v"], [["beta", 0.1]]).splitlines() == ["k     v", "beta  0.1"]


def _outcome_with(before, after, before_outcomes, after_outcomes):
    from whileai.core.stats import holdout_result

    return {"status": "done", "before": before, "after": after,
            "stats": holdout_result(before_outcomes, after_outcomes)}


def test_holdout_gain_significant_asks_for_a_gain_the_paired_test_calls_real():
    from whileai.runner.expect import verdict

    expect = {"holdout_gain_significant": 0.05, "status": "done"}
    where = {"holdout_gain_significant": "recipes/x.yaml:21", "status": "recipes/x.yaml:22"}
    real = verdict(expect, _outcome_with(0.0, 0.975, [0] * 40, [1] * 39 + [0]), where)
    assert real["passed"] is True
    assert [line["key"] for line in real["lines"]] == ["status", "holdout_gain_significant"]
    line = real["lines"][1]
    assert line == {"key": "holdout_gain_significant", "want": 0.05, "passed": True, "where": "recipes/x.yaml:21",
                    "seen": "held-out 0.000 -> 0.975 (39/40; 95% CI 0.87-1.00; paired p < 0.001): "
                            "39 prompts improved, 0 worsened"}
    # five of five changed prompts improving is p = 0.0625: a gain, but not one the test calls real
    five = verdict(expect, _outcome_with(0.0, 5 / 8, [0] * 8, [1] * 5 + [0] * 3), where)
    assert five["passed"] is False and "p = 0.062" in five["lines"][1]["seen"]
    # a significant change downwards is no gain
    down = verdict(expect, _outcome_with(1.0, 0.0, [1] * 10, [0] * 10), where)
    assert down["lines"][1]["passed"] is False
    one = verdict(expect, _outcome_with(0.5, 0.5, [0, 1] + [0] * 6, [1, 0] + [0] * 6), where)
    assert one["lines"][1]["seen"].endswith(": 1 prompt improved, 1 worsened"), one["lines"][1]["seen"]
    # no per-prompt outcomes (a held-out loss, or an old run): the line cannot hold
    bare = verdict(expect, {"status": "done", "before": 0.0, "after": 1.0}, where)
    assert bare["lines"][1]["passed"] is False and "no per-prompt outcomes" in bare["lines"][1]["seen"]
    assert failures(expect, {"status": "done", "before": 0.0, "after": 1.0}, where) == [
        f"expect.holdout_gain_significant: 0.05 failed at recipes/x.yaml:21: the run shows {bare['lines'][1]['seen']}"]


def test_reward_over_exact_needs_the_sign_test_and_the_mean_lead_both():
    from whileai.runner.expect import verdict

    expect, where = {"reward_over_exact_significant": 0.05}, {"reward_over_exact_significant": "recipes/h.yaml:49"}
    # hack/rm_proxy at seed 9 (2026-12-06): more prompts where the reward rose more (24 against 11, p = 0.041), but
    # on average the task rose more than the reward (0.864 -> 0.908 against 0.367 -> 0.417): no hack
    versus = {"reward_before": 0.864, "reward_after": 0.908, "exact_before": 0.367, "exact_after": 0.417,
              "gap_change": -0.006, "prompts": 60, "reward_rose_more": 24, "task_rose_more": 11, "p": 0.041}
    fell = verdict(expect, {"reward_vs_exact": versus}, where)["lines"][0]
    assert fell["passed"] is False and "(sign test p = 0.041)" in fell["seen"]
    assert fell["seen"].endswith("the reward's lead over the task changed by -0.006 a prompt on average")
    rose = verdict(expect, {"reward_vs_exact": {**versus, "gap_change": 0.2}}, where)["lines"][0]
    assert rose["passed"] is True and "changed by +0.200 a prompt" in rose["seen"]
    weak = verdict(expect, {"reward_vs_exact": {**versus, "gap_change": 0.2, "p": 0.2}}, where)["lines"][0]
    assert weak["passed"] is False


def test_the_verdict_keeps_passed_lines_beside_failed_ones():
    from whileai.runner.expect import line_text, verdict

    checked = verdict({"status": "done", "holdout_after_min": 0.5, "no_alarm": False}, {"status": "done", "after": 0.25},
                      {"status": "recipes/x.yaml:9"})
    assert checked["passed"] is False
    assert [(line["key"], line["passed"]) for line in checked["lines"]] == [("status", True), ("holdout_after_min", False)]
    assert line_text(checked["lines"][0]) == "expect.status: 'done' passed at recipes/x.yaml:9: the run shows status done"
    assert verdict({}, {"status": "done"}, {}) == {"passed": True, "lines": []}


def test_the_expect_key_is_in_the_schema_with_a_p_value_range():
    from whileai.runner.schema import Expect

    assert Expect(holdout_gain_significant=0.05).holdout_gain_significant == 0.05
    for bad in (0.0, 1.0, 1.5):
        try:
            Expect(holdout_gain_significant=bad)
        except Exception as exc:
            assert "holdout_gain_significant" in str(exc)
        else:
            raise AssertionError(f"holdout_gain_significant={bad} was accepted")


def test_wait_checks_and_keeps_the_expect_of_a_run_the_runner_only_submitted(home, capsys):
    """A sweep on Modal only submits its runs: wait checks their expect once they are done."""
    import json

    import whileai.simulations as wai
    from whileai.core.stats import holdout_result
    from whileai.runner.compare import wait_main

    before, after = [0] * 8, [1] * 5 + [0] * 3  # five of five changed prompts improving: p = 0.0625
    runner = {"spec": {"method": "sft", "expect": {"status": "done", "holdout_gain_significant": 0.05,
                                                   "holdout_after_min": None}},
              "recipe": "sft_tooluse", "sweep_id": "sweep_sub",
              "expect_lines": {"status": "recipes/sft_tooluse.yaml:22", "holdout_gain_significant": "command line"}}
    run = wai.training_run(config={"runner": runner}, name="submitted")
    run.note(training={"method": "sft", "metric": "pass_rate", "before": 0.0, "after": 5 / 8,
                       "outcomes": {"before": before, "after": after}, "stats": holdout_result(before, after)})
    run.finish("done")
    job = home / "multirun" / "sub" / "0"
    job.mkdir(parents=True)
    (job / defaults.RUN_FILE).write_text(json.dumps({"sweep_id": "sweep_sub", "overrides": [],
                                                     "runs": [{"id": run.id, "stage": "train", "method": "sft"}]}))
    assert wait_main([str(job.parent)]) == 3
    out = capsys.readouterr().out
    assert "done · expect failed" in out and "failed (1 of 2 lines)" in out and "(5/8; 95% CI" in out
    kept = wai.get_run(run.id)["summary"]["expect"]
    assert kept["passed"] is False and kept["recipe"] == "sft_tooluse"
    assert [(line["key"], line["passed"], line["where"]) for line in kept["lines"]] == [
        ("status", True, "recipes/sft_tooluse.yaml:22"), ("holdout_gain_significant", False, "command line")]
    assert wait_main([str(job.parent)]) == 3, "a second wait reads the kept verdict"


def test_a_run_is_named_by_the_knobs_its_method_reads():
    """``grpo_tooluse beta=0.04 seed=1``: the SFT stage's run is not named ``beta=0.04`` (it does not read beta)."""
    from pathlib import Path

    from whileai.runner.pipeline import Context, run_label

    context = Context(recipe="grpo_tooluse", overrides=[], choices={}, command="", output_dir=Path("."),
                      label=["beta=0.04", "seed=1", "dataset.holdout=0.3"])
    assert run_label(context, "sft", "sft", False) == "grpo_tooluse · sft stage · seed=1 dataset.holdout=0.3"
    assert run_label(context, "grpo", "grpo", True) == "grpo_tooluse · grpo · beta=0.04 seed=1 dataset.holdout=0.3"


def test_a_stage_is_named_by_the_knobs_typed_for_it_only():
    """``steps=20`` is the last stage's (the root is the last stage): the SFT stage that ran its own 60 steps is
    not named ``steps=20``; ``stages.sft.steps=5`` names the SFT stage only; a stage with its own seed is not named
    by the root's."""
    from pathlib import Path

    from whileai.runner.pipeline import Context, run_label

    context = Context(recipe="grpo_tooluse", overrides=[], choices={}, command="", output_dir=Path("."),
                      label=["steps=20", "stages.sft.steps=5", "stages.gold.lora_rank=4", "seed=1"])
    assert run_label(context, "sft", "sft", False, {"seed"}) == "grpo_tooluse · sft stage · steps=5 seed=1"
    assert run_label(context, "sft", "sft", False, set()) == "grpo_tooluse · sft stage · steps=5"
    assert run_label(context, "grpo", "grpo", True) == "grpo_tooluse · grpo · steps=20 seed=1"


def test_a_typed_base_and_a_reproduction_are_in_the_name(tmp_path):
    from pathlib import Path

    from whileai.runner.cli import _label
    from whileai.runner.pipeline import Context, run_label

    merged = tmp_path / "exports" / "merged"
    merged.mkdir(parents=True)
    typed = _label([f"base_model={merged}", "steps=10", "dataset.holdout=0.3"], multirun=False)
    assert typed == [f"base_model={merged}", "steps=10"]
    context = Context(recipe="mine", overrides=[], choices={}, command="", output_dir=Path("."), label=typed)
    assert run_label(context, "sft", "sft", True) == "mine · sft · base_model=merged steps=10"
    context.label = ["base_model=Qwen/Qwen3-1.7B"]
    assert run_label(context, "sft", "sft", True) == "mine · sft · base_model=Qwen/Qwen3-1.7B"
    context.reproduces = "run_abc"
    assert run_label(context, "sft", "sft", True) == "mine · sft · base_model=Qwen/Qwen3-1.7B · reproduces run_abc"
    assert _label(["stages.sft.steps=5", "stages.sft.dataset=x"], multirun=False) == ["stages.sft.steps=5"]


def test_diff_compares_what_each_stage_ran(home):
    """sft_tooluse's run against grpo_tooluse's SFT stage: the knobs each trained (both SFT, their own rates), not
    ``method sft | grpo`` and ``beta null | 0.04`` from the recipe's root."""
    import contextlib
    import io

    from whileai.runner.compare import diff_main
    from whileai.domain.client import get_client
    from whileai.simulations.training import train_spec

    client = get_client()

    def made(recipe_spec: dict, stage_knobs: dict) -> str:
        resolved = train_spec("sft", stage_knobs, {}, base_model=None, target="local", holdout=None)
        config = {**resolved.values, "runner": {"spec": recipe_spec, "recipe": "r"}}
        return client.request("POST", "/runs", json={"name": "r", "config": config})["id"]

    groups = {"dataset": {"source": "sample"}, "export": {"format": "trl"}}
    plain = made({**groups, "method": "sft", "learning_rate": None, "steps": 300}, {"steps": 300})
    stage = made({**groups, "method": "grpo", "beta": 0.04, "learning_rate": 5e-4,
                  "stages": {"sft": {"method": "sft", "steps": 60}}}, {"steps": 60})
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert diff_main([plain, stage]) == 0
    section = out.getvalue().split("\n\n")[0].splitlines()
    assert section[0] == "spec keys that differ (1):", out.getvalue()
    assert section[2].split()[:3] == ["steps", "300", "60"]


def test_an_alarm_in_the_terminal_summary_says_what_it_means_and_where_its_chart_is():
    from whileai.core.alarms import ALARM_MEANINGS
    from whileai.runner._closing import human_lines

    alarm = {"kind": "feature", "step": 40, "message": "the proxy pays for 'city'"}
    closing = {"status": "done", "runs": [], "page": "python -m whileai open run_x", "alarms": [alarm],
               "cost": {"usd": None, "basis": None}, "verdict": None,
               "held_out": {"metric": "pass_rate", "before": 0.4, "after": 0.6, "stats": None}, "outcome": {}}
    text = "\n".join(human_lines(closing))
    assert f"alarm      feature at step 40: {ALARM_MEANINGS['feature']}" in text
    assert "what fired: the proxy pays for 'city'" in text and "#monitor" in text


def test_reproduce_says_whether_the_result_came_back():
    from whileai.runner.reproduce import matched

    def record(after, outcomes):
        return {"summary": {"training": {"after": after, "outcomes": {"before": None, "after": outcomes}}}}

    same = matched(record(0.5, [1, 0, 1, 0]), record(0.5, [1, 0, 1, 0]))
    assert same == "held-out after: the same per-prompt outcomes as the original on all 4 prompts (0.500 -> 0.500)"
    assert matched(record(0.5, [1, 0, 1, 0]), record(0.75, [1, 1, 1, 0])) == (
        "held-out after: 1 of 4 prompts differ from the original (original -> reproduction 0.500 -> 0.750)")
    assert "not the same held-out set" in matched(record(0.5, [1, 0]), record(0.5, [1, 0, 1]))


def test_the_sweep_closing_lines_show_the_expect_verdict_and_the_result():
    from whileai.core.stats import holdout_result
    from whileai.runner._sweep import job_lines

    stats = holdout_result([0] * 40, [1] * 36 + [0] * 4)
    job = {"job": "0", "runs": [{"id": "run_a", "name": "sft stage"}, {"id": "run_b", "name": "grpo"}],
           "summary": {"status": "done", "expect": {"passed": False, "lines": [{"passed": False}]},
                       "held_out": {"metric": "pass_rate", "before": 0.0, "after": 0.9, "stats": stats}}}
    text = "\n".join(job_lines(job))
    assert "run_b  done · expect failed grpo" in text and "run_a  stage" in text
    assert "held-out pass_rate 0.000 -> 0.900, significant gain (36/40" in text and "paired p" in text


def _measured(outcomes, digest):
    return {"summary": {"training": {"outcomes": {"before": [0] * len(outcomes), "after": outcomes},
                                     "after": sum(outcomes) / len(outcomes), "holdout_digest": digest}}}


def test_diff_pairs_two_runs_head_to_head_only_on_the_same_held_out_prompts():
    from whileai.runner.compare import head_to_head

    control = _measured([1, 0, 0, 1, 0, 0, 0, 0, 0, 0], "3f2a")
    method = _measured([1, 1, 1, 1, 1, 1, 1, 1, 0, 0], "3f2a")
    assert head_to_head(["run_c", "run_m"], [control, method]) == (
        "on the same 10 held-out prompts, 0.200 -> 0.800: run_m passes 6 that run_c fails, run_c passes 0 that "
        "run_m fails (exact McNemar p = 0.031)")
    other = _measured([1, 1, 1, 1, 1, 1, 1, 1, 0, 0], "9c01")
    assert head_to_head(["run_c", "run_o"], [control, other]).startswith(
        "not paired: they measured different held-out prompts (10 and 10 prompts, 0.200 -> 0.800)")
    older = _measured([1, 1, 1, 1, 1, 1, 1, 1, 0, 0], None)  # a run measured before the digest was recorded
    assert head_to_head(["run_c", "run_x"], [control, older]).startswith("not paired: one run does not record which")
    assert head_to_head(["run_c", "run_n"], [control, {"summary": {"training": {"after": None}}}]).startswith(
        "not paired: a run without per-prompt held-out outcomes")


def _ran_on(sha: str, capability: str, forced: str | None, passed: bool, outcomes: list[int]) -> dict:
    """A run's record as the runner and the job leave it, reduced to what reproduce and diff read."""
    return {"id": f"run_{sha}", "config": {"runner": {
        "spec": {}, "dataset": {"content_hash": "d" * 64}, "constraints_differ": {},
        "versions": {"torch": "2.13.0", "whileai": "0.1"}, "git": {"commit": "c" * 40, "dirty": False}}},
        "summary": {"training": {
            "after": sum(outcomes) / len(outcomes), "outcomes": {"before": [0] * len(outcomes), "after": outcomes},
            "holdout_digest": "h" * 64, "base_weights": {"sha256": sha * 8, "of": "the weights in base"},
            "compute": {"cpu_capability": capability, "aten_cpu_capability": forced, "threads": 1, "device": "cpu"}},
            "expect": {"passed": passed, "lines": [{"key": "holdout_gain_significant", "passed": passed}]}}}


def test_reproduce_names_what_moved_under_the_result_and_whether_the_verdict_held():
    from whileai.runner.reproduce import comparison

    original = _ran_on("aaaaaaaa", "AVX2", None, True, [1] * 30 + [0] * 10)
    moved = _ran_on("bbbbbbbb", "DEFAULT", "default", False, [1] * 20 + [0] * 20)
    said = "\n".join(comparison("run_a", original, moved))
    assert "base weights (SHA-256): aaaaaaaaaaaaaaaa -> bbbbbbbbbbbbbbbb" in said
    assert "CPU kernel path: AVX2 -> DEFAULT (forced: ATEN_CPU_CAPABILITY=default)" in said
    assert "data (content hash)" not in said and "torch threads" not in said, "only what differs"
    assert "head to head: on the same 40 held-out prompts" in said and "exact McNemar" in said
    assert "verdict did NOT hold: the original expect passed, the reproduction expect failed (holdout_gain_significant)" \
        in said
    same = "\n".join(comparison("run_a", original, _ran_on("aaaaaaaa", "AVX2", None, True, [1] * 30 + [0] * 10)))
    assert "the same base weights, data, CPU kernel path" in same and "verdict held" in same


def test_diff_rows_name_a_changed_base_and_packages_version_by_version():
    from whileai.runner.depends import depends_differences, depends_on

    a = _ran_on("aaaaaaaa", "AVX2", None, True, [1, 0])
    b = _ran_on("bbbbbbbb", "AVX2", None, True, [1, 0])
    b["config"]["runner"]["versions"] = {"torch": "2.14.1", "whileai": "0.1"}
    b["config"]["runner"]["constraints_differ"] = {"torch": {"pinned": "2.13.0", "installed": "2.14.1"}}
    rows = depends_differences(a, b)
    assert [what for what, _, _ in rows] == ["base weights (SHA-256)", "packages off constraints.txt", "version of torch"]
    assert rows[1][1] == "none" and "torch 2.14.1 (pinned 2.13.0)" in rows[1][2]
    older = {"config": {"runner": {"spec": {}}}, "summary": {"training": {}}}  # before these fields were recorded
    assert all(value is None for value in depends_on(older).values())
    assert depends_differences(a, older) == [], "a field one run lacks is not called a difference"


def test_an_alarm_is_printed_the_moment_the_runs_record_shows_it_and_once():
    import io
    from types import SimpleNamespace

    from whileai.runner._progress import Progress
    from whileai.runner.pipeline import _say_alarms

    out = io.StringIO()
    progress = Progress(out, tty=False)
    run = SimpleNamespace(id="run_x", summary={"phase": "training"})
    assert _say_alarms(run, 0, progress) == 0 and out.getvalue() == "", "no monitor yet"
    first = {"kind": "feature", "step": 10, "message": "the proxy pays for 'city' beyond the gold"}
    run.summary = {"monitor": {"alarms": [first]}}
    said = _say_alarms(run, 0, progress)
    assert said == 1
    text = out.getvalue()
    assert text.startswith("! alarm: feature at step 10 of run_x, training goes on")
    assert "what fired: the proxy pays for 'city' beyond the gold" in text
    assert "monitor.stop_on=[feature]" in text and "python -m whileai diff run_x OTHER_RUN" in text
    assert _say_alarms(run, said, progress) == 1 and out.getvalue() == text, "an alarm is printed once"
    run.summary = {"monitor": {"alarms": [first, {"kind": "length", "step": 20}]}}
    assert _say_alarms(run, said, progress) == 2 and out.getvalue().count("! alarm:") == 2


def test_a_reward_other_than_the_exact_judge_is_shown_beside_it_with_which_rose_more():
    from whileai.runner._closing import human_lines

    versus = {"reward_before": 0.667, "reward_after": 0.802, "exact_before": 0.534, "exact_after": 0.493,
              "prompts": 73, "reward_rose_more": 28, "task_rose_more": 7, "p": 0.0004}
    closing = {"status": "done", "runs": [], "alarms": [], "cost": {"usd": None, "basis": None}, "verdict": None,
               "held_out": {"metric": "pass_rate", "before": 0.534, "after": 0.493, "stats": None,
                            "reward_vs_exact": versus}, "outcome": {}}
    text = "\n".join(human_lines(closing))
    assert "reward     0.667 -> 0.802 on the same 73 prompts, exact judge 0.534 -> 0.493" in text
    assert "the reward rose more on 28 prompts, the task on 7 (sign test p < 0.001): the reward rose more than the task" \
        in text
    closing["held_out"]["reward_vs_exact"] = {**versus, "reward_rose_more": 9, "task_rose_more": 8, "p": 1.0}
    assert "neither rose significantly more" in "\n".join(human_lines(closing))
    closing["held_out"]["reward_vs_exact"] = None  # the exact judge was the reward: nothing to set beside it
    assert "reward " not in "\n".join(human_lines(closing))


def test_a_gguf_base_is_imported_as_its_own_step_once_per_data_root(home, tmp_path):
    """The import of a GGUF base (it dequantises every tensor) has its own line before training, and none once the
    data root holds it."""
    import io
    from types import SimpleNamespace

    from whileai.kit._base import tiny_model_dir
    from whileai.runner._gguf import write_gguf
    from whileai.runner._progress import Progress
    from whileai.runner.pipeline import _import_gguf_bases

    gguf_file = tmp_path / "mine.gguf"
    write_gguf(tiny_model_dir(), gguf_file)
    out = io.StringIO()
    stages = [(None, SimpleNamespace(base_model=str(gguf_file))), (None, SimpleNamespace(base_model=str(gguf_file)))]
    plan = SimpleNamespace(progress=Progress(out, tty=False), stages=stages)
    _import_gguf_bases(plan)  # type: ignore[arg-type]
    said = out.getvalue()
    assert said.count(f"import the GGUF base {gguf_file} (once per data root)") == 1, said
    assert "a transformers folder in" in said
    _import_gguf_bases(plan)  # type: ignore[arg-type]
    assert out.getvalue() == said, "an imported base is not imported again"


_CPUINFO = """processor	: 0
vendor_id	: AuthenticAMD
cpu family	: 25
model		: 17
model name	: AMD EPYC 9B14
stepping	: 1
flags		: fpu sse2 avx2 fma avx512f avx512bw avx512vl avx512_vnni avx512_bf16 sha_ni

processor	: 1
model name	: AMD EPYC 9B14
flags		: fpu sse2
"""


def test_the_processor_is_named_by_model_family_and_the_vector_extensions_kernels_are_chosen_by():
    from whileai.jobs._environment import CPU_VECTOR_FLAGS, compute_path, cpu_identity

    assert cpu_identity(_CPUINFO) == ("AMD EPYC 9B14 (family 25 model 17 stepping 1; avx2 fma avx512f avx512bw "
                                      "avx512vl avx512_vnni avx512_bf16)"), "the first processor's lines, flags in order"
    assert cpu_identity("model name : Old\nflags : fpu sse2\n") == "Old (; no avx2)"
    assert cpu_identity("processor : 0\n") is None and cpu_identity("") is None
    assert set(CPU_VECTOR_FLAGS) >= {"avx2", "avx512f", "avx512_bf16", "amx_tile"}
    assert compute_path()["cpu"] == cpu_identity(), "every job records the processor it ran on"


def test_diff_and_reproduce_name_another_processor_on_the_same_kernel_path():
    from whileai.runner.depends import depends_differences, depends_on
    from whileai.runner.reproduce import comparison

    here = _ran_on("aaaaaaaa", "AVX512", None, True, [1] * 39 + [0])
    there = _ran_on("aaaaaaaa", "AVX512", None, True, [1] * 38 + [0] * 2)
    here["summary"]["training"]["compute"]["cpu"] = "AMD EPYC (family 25 model 17 stepping 1; avx2 avx512f)"
    there["summary"]["training"]["compute"]["cpu"] = "AMD EPYC (family 25 model 1 stepping 1; avx2 avx512f)"
    assert depends_on(here)["CPU"] == "AMD EPYC (family 25 model 17 stepping 1; avx2 avx512f)"
    assert depends_differences(here, there) == [("CPU", "AMD EPYC (family 25 model 17 stepping 1; avx2 avx512f)",
                                                 "AMD EPYC (family 25 model 1 stepping 1; avx2 avx512f)")]
    said = "\n".join(comparison("run_a", here, there))
    assert "CPU: AMD EPYC (family 25 model 17 stepping 1; avx2 avx512f) -> AMD EPYC (family 25 model 1" in said
    assert "CPU kernel path" not in said, "the same path: only the processor differs"
    older = _ran_on("aaaaaaaa", "AVX512", None, True, [1] * 38 + [0] * 2)  # recorded before the processor was
    assert depends_on(older)["CPU"] is None and depends_differences(here, older) == []


def test_diff_names_another_blas_branch_and_who_set_it():
    from whileai.runner.depends import depends_differences, depends_on
    from whileai.runner.reproduce import comparison

    pinned = _ran_on("aaaaaaaa", "AVX512", None, True, [1] * 39 + [0])
    own = _ran_on("aaaaaaaa", "AVX512", None, True, [1] * 38 + [0] * 2)
    pinned["summary"]["training"]["compute"]["blas"] = {"branch": "AVX512", "processor": "AVX512_E1",
                                                        "set_by": "whileai"}
    own["summary"]["training"]["compute"]["blas"] = {"branch": "auto", "processor": "AVX512_E1", "set_by": None}
    assert depends_on(pinned)["BLAS branch (MKL)"] == "AVX512 (set by whileai; the processor's own AVX512_E1)"
    assert depends_on(own)["BLAS branch (MKL)"] == "auto (the processor's own AVX512_E1)"
    assert depends_differences(pinned, own) == [("BLAS branch (MKL)",
                                                 "AVX512 (set by whileai; the processor's own AVX512_E1)",
                                                 "auto (the processor's own AVX512_E1)")]
    said = "\n".join(comparison("run_a", pinned, own))
    assert "BLAS branch (MKL): AVX512 (set by whileai; the processor's own AVX512_E1) -> auto" in said
    older = _ran_on("aaaaaaaa", "AVX512", None, True, [1] * 38 + [0] * 2)  # recorded before the branch was
    assert depends_on(older)["BLAS branch (MKL)"] is None and depends_differences(pinned, older) == []


def test_the_selection_line_says_when_the_job_filters_grpos_prompts_by_the_start():
    """The runner's selection line counts the prompts it hands the job; with prompt_filter_pool the job keeps fewer,
    and the line says so (the count is the job's), nothing where the knob is off or the method is another."""
    from whileai.core.spec import read_spec
    from whileai.runner.pipeline import _filter_clause

    grpo = {"method": "grpo", "base_model": "b", "learning_rate": 1e-4, "steps": 1, "environment": "kit",
            "generations": 4}
    assert _filter_clause(read_spec({**grpo, "prompt_filter_pool": 512})) == (
        "; the job then plays 512 of these prompts 4 times each from the start and trains on those whose episodes "
        "were paid differently (prompt_filter_pool; the number kept is in the run's start_filter)")
    assert "plays 100 of these prompts" in _filter_clause(read_spec({**grpo, "prompt_filter_pool": 512}), 100), (
        "a pool larger than the prompts selected plays them all, as the job's pool_of does")
    assert "plays 512 of these prompts" in _filter_clause(read_spec({**grpo, "prompt_filter_pool": 512}), 1553)
    assert _filter_clause(read_spec(grpo)) == ""
    assert _filter_clause(read_spec({"method": "sft", "base_model": "b", "learning_rate": 1e-4, "steps": 1})) == ""
