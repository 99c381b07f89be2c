"""delta_report: verdicts on synthetic before/after sets whose truth is known, the task bootstrap, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

import whileai.simulations as wai
from whileai.domain import defaults


def rollouts(tasks, per_task, p_pass, seed, proxy_shift=0.0, proxy_name="proxy_reward", task_prefix="t"):
    """Rows whose pass probability is ``p_pass`` (a number, or a function of the task index)."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(tasks):
        p = p_pass(t) if callable(p_pass) else p_pass
        for i in range(per_task):
            passed = bool(rng.random() < p)
            rows.append({
                "messages": [{"role": "user", "content": f"ask {t}"}, {"role": "assistant", "content": "answer"}],
                "task_id": f"{task_prefix}{t}",
                "rollout_index": i,
                "passed": passed,
                "difficulty": "hard" if t % 3 == 0 else "easy",
                "markers": {proxy_name: float(passed) * 0.5 + proxy_shift + 0.1 * rng.random(),
                            "tier": t % 2},
            })
    return rows


def test_real_improvement_is_improved():
    rep = wai.delta_report(rollouts(200, 4, 0.40, seed=1), rollouts(200, 4, 0.65, seed=2), proxy="proxy_reward")
    assert rep["verdict"] == "improved", rep["reason"]
    assert rep["paired"] is True
    t = rep["target"]
    assert t["before"]["tasks"] == t["after"]["tasks"] == 200 and t["before"]["rows"] == 800
    assert t["delta"]["ci"][0] > 0.15 and t["delta"]["value"] == pytest.approx(t["after"]["value"] - t["before"]["value"])
    assert rep["decided_by"]["target_ci"] == t["delta"]["ci"]
    assert "above zero" in rep["reason"]


def test_regression_is_regressed():
    rep = wai.delta_report(rollouts(150, 4, 0.6, seed=3), rollouts(150, 4, 0.35, seed=4))
    assert rep["verdict"] == "regressed", rep["reason"]
    assert rep["target"]["delta"]["ci"][1] < 0 and rep["proxy"] is None


def test_no_change_is_inconclusive():
    same = rollouts(100, 4, 0.5, seed=5)
    rep = wai.delta_report(same, same, proxy="proxy_reward")
    assert rep["verdict"] == "inconclusive" and rep["target"]["delta"]["ci"] == [0.0, 0.0]
    redrawn = wai.delta_report(rollouts(100, 4, 0.5, seed=5), rollouts(100, 4, 0.5, seed=6), proxy="proxy_reward")
    assert redrawn["verdict"] == "inconclusive", redrawn["reason"]
    lo, hi = redrawn["target"]["delta"]["ci"]
    assert lo < 0 < hi


def test_proxy_only_gain_is_over_optimized():
    before = rollouts(500, 4, 0.5, seed=7)
    after = rollouts(500, 4, 0.5, seed=8, proxy_shift=0.3)
    rep = wai.delta_report(before, after, proxy="proxy_reward")
    assert rep["verdict"] == "over-optimized", rep["reason"]
    assert rep["proxy"]["marker"] == "proxy_reward" and rep["proxy"]["delta"]["ci"][0] > 0
    assert rep["target"]["delta"]["upper_one_sided"] < defaults.DELTA_EQUIVALENCE_MARGIN
    assert rep["decided_by"]["margin"] == defaults.DELTA_EQUIVALENCE_MARGIN
    assert "margin" in rep["reason"] and "proxy" in rep["reason"]


def test_proxy_gain_with_a_target_not_shown_flat_is_not_over_optimized():
    # Same truth as above on 40 tasks: the target's gain is not significant, but it is not
    # shown to be below the margin either, so the call is inconclusive, never over-optimized.
    before = rollouts(40, 2, 0.5, seed=9)
    after = rollouts(40, 2, 0.5, seed=10, proxy_shift=0.3)
    rep = wai.delta_report(before, after, proxy="proxy_reward")
    assert rep["proxy"]["delta"]["ci"][0] > 0
    assert rep["target"]["delta"]["upper_one_sided"] >= defaults.DELTA_EQUIVALENCE_MARGIN
    assert rep["verdict"] == "inconclusive", rep["reason"]
    assert "not shown below" in rep["reason"]


def test_proxy_and_target_both_up_is_improved():
    rep = wai.delta_report(rollouts(200, 4, 0.3, seed=11), rollouts(200, 4, 0.7, seed=12, proxy_shift=0.2),
                           proxy="proxy_reward")
    assert rep["verdict"] == "improved", rep["reason"]


def test_small_samples_are_inconclusive():
    # a large true gain, but too few tasks to call
    few = wai.delta_report(rollouts(8, 4, 0.3, seed=13), rollouts(8, 4, 0.7, seed=14))
    assert few["verdict"] == "inconclusive" and "DELTA_MIN_TASKS" in few["reason"]
    assert few["decided_by"]["tasks"] == 8
    # enough tasks to call, but a small true gain the interval cannot separate from zero
    modest = wai.delta_report(rollouts(30, 2, 0.50, seed=15), rollouts(30, 2, 0.56, seed=16))
    assert modest["verdict"] == "inconclusive", modest["reason"]


def test_bootstrap_resamples_tasks_not_rows():
    # 30 tasks of 20 rows, each task all-pass or all-fail: the rows of a task carry one
    # observation, so the interval must be as wide as 30 coin flips, not 600.
    def lumpy(seed):
        rng = np.random.default_rng(seed)
        outcome = rng.random(30) < 0.5
        return [{"messages": [{"role": "user", "content": str(t)}], "task_id": f"t{t}", "passed": bool(outcome[t])}
                for t in range(30) for _ in range(20)]
    rep = wai.delta_report(lumpy(1), lumpy(2))
    lo, hi = rep["target"]["before"]["ci"]
    assert hi - lo > 0.25          # rows as units would give about 0.08
    assert rep["paired"] is True


def test_unpaired_sets_resample_each_side():
    rep = wai.delta_report(rollouts(60, 3, 0.3, seed=17, task_prefix="a"), rollouts(60, 3, 0.7, seed=18, task_prefix="b"))
    assert rep["paired"] is False and rep["verdict"] == "improved"


def test_by_marker_and_row_key_tables():
    before = rollouts(120, 3, lambda t: 0.3, seed=1)
    after = rollouts(120, 3, lambda t: 0.8 if t % 3 == 0 else 0.3, seed=2)   # only the hard third improves
    rep = wai.delta_report(before, after, by="difficulty")
    assert rep["by"]["source"] == "row" and rep["by"]["key"] == "difficulty"
    groups = {g["group"]: g for g in rep["by"]["groups"]}
    assert set(groups) == {"easy", "hard"}
    assert groups["hard"]["verdict"] == "improved" and groups["easy"]["verdict"] == "inconclusive"
    assert groups["hard"]["target"]["before"]["tasks"] == 40
    tier = wai.delta_report(before, after, by="tier")
    assert tier["by"]["source"] == "marker" and [g["group"] for g in tier["by"]["groups"]] == ["0", "1"]


def test_group_only_on_one_side():
    before = rollouts(30, 2, 0.5, seed=21)
    after = [dict(r, difficulty="new") for r in rollouts(30, 2, 0.5, seed=22)]
    groups = {g["group"]: g for g in wai.delta_report(before, after, by="difficulty")["by"]["groups"]}
    assert groups["new"]["verdict"] is None and "no before rows" in groups["new"]["reason"]


def test_deterministic_and_json():
    before, after = rollouts(80, 3, 0.4, seed=23), rollouts(80, 3, 0.5, seed=24)
    a = wai.delta_report(before, after, by="difficulty", proxy="proxy_reward")
    b = wai.delta_report(before, after, by="difficulty", proxy="proxy_reward")
    assert a == b
    text = json.dumps(a, allow_nan=False)
    assert json.loads(text) == a
    c = wai.delta_report(before, after, seed=1)
    assert c["target"]["delta"]["ci"] != a["target"]["delta"]["ci"]
    assert c["settings"]["seed"] == 1 and a["settings"]["n_boot"] == defaults.DELTA_BOOTSTRAP


def test_accepts_scored_data_and_files(tmp_path):
    before = rollouts(25, 2, 0.5, seed=25)
    path = tmp_path / "after.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rollouts(25, 2, 0.5, seed=26)))
    scored = wai.evaluate(before, lambda row: float(row["passed"]))
    rep = wai.delta_report(scored, path)
    assert rep["after_source"] == str(path) and rep["target"]["before"]["rows"] == 50


def test_bad_input_names_the_problem():
    good = rollouts(25, 2, 0.5, seed=27)
    with pytest.raises(ValueError, match="before has no rows"):
        wai.delta_report([], good)
    with pytest.raises(ValueError, match="after has no rows"):
        wai.delta_report(good, [])
    with pytest.raises(ValueError, match=r"by='colour' is neither a row key nor a marker.*markers: \['proxy_reward', 'tier'\]"):
        wai.delta_report(good, good, by="colour")
    unlabelled = [dict(r) for r in good]
    del unlabelled[3]["passed"]
    with pytest.raises(ValueError, match=r"after: 1 of 50 rows have no passed label.*rows 3.*evaluate"):
        wai.delta_report(good, unlabelled)
    with pytest.raises(ValueError, match="no marker 'reward_x'"):
        wai.delta_report(good, good, proxy="reward_x")
    with pytest.raises(ValueError, match="n_boot"):
        wai.delta_report(good, good, n_boot=10)
    with pytest.raises(ValueError, match="level"):
        wai.delta_report(good, good, level=95)
    with pytest.raises(ValueError, match="margin"):
        wai.delta_report(good, good, margin=-0.1)
