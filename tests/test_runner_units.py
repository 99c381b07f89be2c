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
