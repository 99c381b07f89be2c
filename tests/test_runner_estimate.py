"""A stage's time estimate from this data root's earlier stages (whileai/runner/_estimate.py).

The quick-run test in test_runner_quick.py checks that a real run leaves its times; these check the arithmetic,
which stages an estimate is made from, what it says, and that a bad timings file costs only the estimate.
"""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest

from whileai.runner import _estimate, defaults


def _spec(**over):
    values = {"method": "grpo", "base_model": "whileai-kit/base", "target": "local", "steps": 100,
              "batch_size": 8, "generations": 4, "max_completion_length": 96}
    return SimpleNamespace(**{**values, **over})


def _training(steps=100, seconds=260.0, train_seconds=200.0, **more):
    return {"steps": steps, "seconds": seconds, "train_seconds": train_seconds, **more}


def test_no_earlier_stage_gives_no_estimate(home):
    assert _estimate.estimate(_spec(), 50) is None


def test_an_estimate_is_the_median_rates_times_this_stages_steps_and_prompts(home):
    for train_s in (200.0, 400.0, 300.0):  # 2, 4 and 3 s a step; 60 s over 30 prompts each: 2 s a prompt
        _estimate.record(_spec(), _training(train_seconds=train_s, seconds=train_s + 60), 30)
    got = _estimate.estimate(_spec(steps=50), 10)
    assert got is not None and got.runs == 3 and got.same_size
    assert got.step_s == pytest.approx(3.0) and got.prompt_s == pytest.approx(2.0)
    assert got.seconds == pytest.approx(50 * 3.0 + 10 * 2.0)
    line = got.line("grpo")
    assert line.startswith("- grpo: about 2m50s on this machine (3.00 s a step x 50 steps, 2.00 s a held-out prompt x 10")
    assert "from 3 earlier stages of this method on this base here)" in line


def test_only_the_latest_runs_of_the_same_method_base_and_target_count(home):
    for _ in range(defaults.ESTIMATE_RUNS):
        _estimate.record(_spec(), _training(train_seconds=1000.0, seconds=1000.0), 10)  # 10 s a step, older
    for _ in range(defaults.ESTIMATE_RUNS):
        _estimate.record(_spec(), _training(train_seconds=100.0, seconds=100.0), 10)  # 1 s a step, newer
    _estimate.record(_spec(method="dpo"), _training(train_seconds=9000.0), 10)
    _estimate.record(_spec(base_model="other"), _training(train_seconds=9000.0), 10)
    _estimate.record(_spec(target="modal"), _training(train_seconds=9000.0), 10)
    got = _estimate.estimate(_spec(), 10)
    assert got is not None and got.runs == defaults.ESTIMATE_RUNS and got.step_s == pytest.approx(1.0)


def test_stages_of_the_same_step_size_are_preferred_and_others_are_said_to_be_rougher(home):
    _estimate.record(_spec(generations=16), _training(train_seconds=800.0), 10)
    rough = _estimate.estimate(_spec(), 10)
    assert rough is not None and not rough.same_size and rough.step_s == pytest.approx(8.0)
    assert "of other step sizes, so rougher" in rough.line("grpo")
    _estimate.record(_spec(), _training(train_seconds=200.0), 10)
    alike = _estimate.estimate(_spec(), 10)
    assert alike is not None and alike.same_size and alike.runs == 1 and alike.step_s == pytest.approx(2.0)


def test_a_resumed_or_stepless_stage_leaves_no_times(home):
    _estimate.record(_spec(), _training(job_seconds=10.0), 10)  # its seconds span two processes
    _estimate.record(_spec(), _training(steps=0), 10)
    _estimate.record(_spec(), {"steps": 10}, 10)  # no seconds: nothing to learn from
    assert not _estimate.timings_path().exists() or _estimate.timings_path().read_text() == ""
    assert _estimate.estimate(_spec(), 10) is None


def test_a_damaged_timings_file_costs_only_its_bad_lines(home):
    _estimate.record(_spec(), _training(), 10)
    path = _estimate.timings_path()
    with path.open("a") as out:
        out.write('{"where": {"method": "grpo"\n[1, 2]\n')  # a line cut short by a crash, and a stranger's line
    _estimate.record(_spec(), _training(), 10)
    got = _estimate.estimate(_spec(), 10)
    assert got is not None and got.runs == 2
    assert [json.loads(line)["steps"] for line in path.read_text().splitlines()[::3]] == [100, 100]


def test_an_unwritable_timings_file_is_no_error(home):
    _estimate.timings_path().parent.mkdir(parents=True, exist_ok=True)
    _estimate.timings_path().mkdir()  # a folder where the file goes: reading and writing both fail
    _estimate.record(_spec(), _training(), 10)
    assert _estimate.estimate(_spec(), 10) is None


def test_over_the_estimate_is_said_once_past_its_factor(home):
    _estimate.record(_spec(), _training(train_seconds=100.0, seconds=100.0), 10)  # 1 s a step
    expected = _estimate.estimate(_spec(steps=100), 0)
    assert expected is not None and expected.seconds == pytest.approx(100.0)
    now = time.monotonic()
    assert _estimate.say_over("grpo", expected, now - 150, said=False) is None  # 1.5x: not yet
    over = _estimate.say_over("grpo", expected, now - 201, said=False)
    assert over is not None and over.startswith("  grpo: 3m21s so far, over 2x the 1m40s estimated")
    assert _estimate.say_over("grpo", expected, now - 500, said=True) is None  # said once
    assert _estimate.say_over("grpo", None, now - 500, said=False) is None  # no estimate: nothing to be over
