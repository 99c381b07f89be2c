"""A 2x2 sweep of the main job's recipe, then ``wait``, ``reproduce`` and ``diff`` over its runs.

One module-scoped sweep (Hydra's basic launcher, the four jobs one after the other) feeds every
test here: four runs with four distinct specs sharing one sweep id; its table; a reproduction
whose spec equals the original's; and a diff that names exactly the swept keys. The tiny random
model does not learn the task in two steps, so each job's ``expect`` fails, which also proves a
failed expect exits non-zero naming its line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from _runner_helpers import TINY, record, runner_record, runs_file, tiny_base, whileai

pytestmark = pytest.mark.slow

SWEPT = {"learning_rate": [0.001, 0.003], "seed": [0, 1]}


@pytest.fixture(scope="module")
def sweep():
    args = ["-m", "recipe=sft_tooluse", *TINY, f"base_model={tiny_base()}", "learning_rate=0.001,0.003", "seed=0,1"]
    done = whileai("run", *args, token="sweep2x2")
    jobs = [runs_file("sweep2x2", str(i)) for i in range(4)]
    return {"done": done, "jobs": jobs, "runs": [j["runs"][-1]["id"] for j in jobs]}


def test_a_2x2_sweep_makes_four_runs_with_four_specs_and_one_sweep_id(sweep):
    specs = [runner_record(r)["spec"] for r in sweep["runs"]]
    assert len({(s["learning_rate"], s["seed"]) for s in specs}) == 4
    assert sorted((s["learning_rate"], s["seed"]) for s in specs) == [(a, b) for a in SWEPT["learning_rate"]
                                                                      for b in SWEPT["seed"]]
    sweep_ids = {runner_record(r)["sweep_id"] for r in sweep["runs"]}
    assert sweep_ids == {"sweep_sweep2x2"}
    assert all(record(r)["status"] == "done" for r in sweep["runs"])


def test_a_failed_expect_exits_non_zero_naming_its_line(sweep):
    done = sweep["done"]
    assert done.returncode == 3, done.stderr
    assert "FAILED expect.holdout_after_min: 0.5 failed at recipes/sft_tooluse.yaml:" in done.stderr
    assert "the run shows held-out after" in done.stderr


def test_wait_prints_one_table_of_the_sweep(sweep):
    done = whileai("wait", "sweep_sweep2x2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].split()[:4] == ["job", "run", "learning_rate", "seed"]
    assert "held-out" in lines[0] and "status" in lines[0]
    assert len(lines) == 5
    for run_id in sweep["runs"]:
        assert run_id in done.stdout
    folder = Path(runner_record(sweep["runs"][0])["hydra_dir"]).parent
    by_folder = whileai("wait", str(folder))
    assert by_folder.stdout == done.stdout


def test_reproduce_makes_a_run_whose_spec_equals_the_original(sweep):
    original = sweep["runs"][2]
    done = whileai("reproduce", original, token="repro")
    assert done.returncode in (0, 3), done.stderr
    assert "same versions and commit" in done.stderr or "differs:" in done.stderr
    new_id = runs_file("repro")["runs"][-1]["id"]
    assert new_id != original
    kept = runner_record(new_id)
    assert kept["spec"] == runner_record(original)["spec"]
    assert kept["reproduces"] == original


def test_diff_of_two_sweep_runs_names_exactly_the_swept_keys(sweep):
    by_spec = {(runner_record(r)["spec"]["learning_rate"], runner_record(r)["spec"]["seed"]): r for r in sweep["runs"]}
    a, b = by_spec[(0.001, 0)], by_spec[(0.003, 1)]
    done = whileai("diff", a, b)
    assert done.returncode == 0, done.stderr
    section = done.stdout.split("\n\n")[0].splitlines()
    assert section[0] == "spec keys that differ (2):"
    assert sorted(line.split()[0] for line in section[2:]) == ["learning_rate", "seed"]
    assert "results:" in done.stdout and "held-out" in done.stdout and "cost" in done.stdout
    one = whileai("diff", by_spec[(0.001, 0)], by_spec[(0.001, 1)])
    assert one.stdout.splitlines()[0] == "spec keys that differ (1):"
