"""A 2x2 sweep of the main job's recipe, then ``wait``, ``reproduce`` and ``diff`` over its runs.

One module-scoped sweep (Hydra's basic launcher, the four jobs one after the other) feeds every
test here: four runs with four distinct specs sharing one sweep id; its table; a reproduction
whose spec equals the original's; and a diff that names exactly the swept keys. The tiny random
model does not learn the task in two steps, so each job's ``expect`` fails, which also proves a
failed expect exits non-zero naming its line, and that the verdict lives on the run: its record,
``wait``, ``diff``, the runs list and the run's page (Chromium) all read "done · expect failed".
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from _chromium import FLAGS, require_chromium
from _runner_helpers import TINY, assert_counts, record, runner_record, runs_file, tiny_base, whileai

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
    assert "FAILED expect.holdout_after_min: 0.5 failed at recipes/sft_tooluse.yaml:" in done.stdout
    assert "the run shows held-out after" in done.stdout
    # four prompts can never give p < 0.05 (four of four improving is p = 0.125): the line cannot hold
    assert "FAILED expect.holdout_gain_significant: 0.05 failed at recipes/sft_tooluse.yaml:" in done.stdout
    assert "passed expect.status: 'done' passed at recipes/sft_tooluse.yaml:" in done.stdout, "passed lines show too"
    assert re.search(r"held-out   pass_rate \d\.\d{3} -> \d\.\d{3}, no significant change \(\d/4; 95% CI \d\.\d\d-\d\.\d\d; paired p = "
                     r"\d\.\d{3}\)", done.stdout), done.stdout
    assert "status     done · expect failed (3 of 4 lines failed)" in done.stdout


def test_the_run_record_keeps_the_verdict_and_the_outcomes_the_test_is_recomputed_from(sweep):
    from whileai.core.stats import holdout_result

    summary = record(sweep["runs"][0])["summary"]
    expect = summary["expect"]
    assert expect["passed"] is False and expect["recipe"] == "sft_tooluse"
    lines = {line["key"]: line for line in expect["lines"]}
    assert sorted(lines) == ["holdout_after_min", "holdout_gain_min", "holdout_gain_significant", "status"]
    assert lines["status"]["passed"] is True and lines["status"]["seen"] == "status done"
    assert lines["holdout_after_min"] == {**lines["holdout_after_min"], "want": 0.5, "passed": False}
    recipe = (Path(__file__).resolve().parents[1] / "recipes" / "sft_tooluse.yaml").read_text().splitlines()
    for key, line in lines.items():
        path, number = line["where"].rsplit(":", 1)
        assert path == "recipes/sft_tooluse.yaml" and recipe[int(number) - 1].lstrip().startswith(f"{key}:")
    training = summary["training"]
    outcomes = training["outcomes"]
    assert len(outcomes["before"]) == len(outcomes["after"]) == training["holdout_prompts"] == 4
    assert training["stats"] == holdout_result(outcomes["before"], outcomes["after"])
    assert training["after"] == sum(outcomes["after"]) / 4


def test_the_sweep_says_its_id_at_the_start_and_at_the_close_with_the_wait_command(sweep):
    done = sweep["done"]
    said = "sweep sweep_sweep2x2: its jobs run now; follow it from another shell with " \
           "`python -m whileai wait sweep_sweep2x2`"
    err = done.stderr.splitlines()
    assert said in err and err.index(said) < min(i for i, x in enumerate(err) if x.startswith("whileai run ")), err
    out = done.stdout.strip().splitlines()
    assert "sweep      sweep_sweep2x2: 4 job(s), 4 run(s)" in out
    assert out[-1] == "follow it  python -m whileai wait sweep_sweep2x2"
    for run_id in sweep["runs"]:
        assert any(line.startswith("  job ") and run_id in line for line in out), out


def test_results_go_to_stdout_and_progress_to_stderr(sweep):
    done = sweep["done"]
    assert "- push: ds_" in done.stderr and "- push: " not in done.stdout
    assert "[HYDRA] Launching 4 jobs locally" in done.stderr and "HYDRA" not in done.stdout
    assert done.stdout.count("\nheld-out   pass_rate ") == 4 and "held-out   " not in done.stderr
    assert done.stdout.count("\ncost       ") == 4 and done.stdout.count("\npage       python -m whileai open run_") == 4


def test_sweep_runs_are_named_by_recipe_method_and_swept_knobs_and_the_counts_add_up(sweep):
    names = [record(r)["name"] for r in sweep["runs"]]
    assert len(set(names)) == 4, names
    specs = [runner_record(r)["spec"] for r in sweep["runs"]]
    for name, spec in zip(names, specs):
        assert name == f"sft_tooluse · sft · learning_rate={spec['learning_rate']:g} seed={spec['seed']}", name
    assert_counts(sweep["runs"][0])


def test_wait_prints_one_table_of_the_sweep(sweep):
    done = whileai("wait", "sweep_sweep2x2")
    assert done.returncode == 3, "every run failed its expect, so wait exits as run did"
    lines = done.stdout.strip().splitlines()
    assert lines[0].split()[:4] == ["job", "run", "learning_rate", "seed"]
    assert "held-out" in lines[0] and "status" in lines[0] and " n " in lines[0] and "expect" in lines[0]
    assert len(lines) == 5
    for run_id in sweep["runs"]:
        assert run_id in done.stdout
    for line in lines[1:]:
        assert line.endswith("done · expect failed") and "95% CI" in line and "paired p" in line
        assert "failed (3 of 4 lines)" in line
    folder = Path(runner_record(sweep["runs"][0])["hydra_dir"]).parent
    by_folder = whileai("wait", str(folder))
    assert by_folder.stdout == done.stdout


def test_reproduce_makes_a_run_whose_spec_equals_the_original(sweep):
    original = sweep["runs"][2]
    done = whileai("reproduce", original, token="repro")
    assert done.returncode in (0, 3), done.stderr
    assert "same versions and commit" in done.stderr or "differs:" in done.stderr
    assert "reproduce: held-out after: " in done.stderr  # whether the result came back, prompt by prompt
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
    # both jobs recorded which held-out prompts they measured: the two runs are paired, or said to differ in them
    versus = next(line for line in done.stdout.splitlines() if line.startswith("head to head: "))
    assert versus.startswith(("head to head: on the same ", "head to head: not paired: they measured different")), versus
    results = done.stdout.split("results:")[1]
    status = next(line for line in results.splitlines() if line.startswith("status"))
    assert status.split(None, 1)[1].split("  ")[0] == "done · expect failed", status
    assert f"expect of {a} (done · expect failed):" in done.stdout
    assert "FAILED expect.holdout_gain_significant: 0.05 failed at recipes/sft_tooluse.yaml:" in done.stdout
    assert "passed expect.status: 'done' passed at recipes/sft_tooluse.yaml:" in done.stdout
    one = whileai("diff", by_spec[(0.001, 0)], by_spec[(0.001, 1)])
    assert one.stdout.splitlines()[0] == "spec keys that differ (1):"


def test_the_runs_list_and_the_run_page_show_the_failed_expect_in_chromium(sweep):
    chromium = require_chromium()
    from playwright.sync_api import expect, sync_playwright

    from whileai.platform.server import serve_in_thread
    from whileai.platform.store import ensure_local_account, store_url

    handle = serve_in_thread(store_url=store_url())  # the platform on the data root the sweep ran on
    run_id = sweep["runs"][0]
    try:
        _, key = ensure_local_account(handle.store)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=FLAGS)
            page = browser.new_context().new_page()
            page.set_default_timeout(15_000)
            page.goto(handle.base_url + "/signin")
            page.fill("#key", key)
            page.click("button[type=submit]")
            page.wait_for_url("**/runs")
            page.goto(handle.base_url + "/runs?sweep=sweep_sweep2x2")
            rows = page.locator("#runs tbody tr")
            expect(rows).to_have_count(4)
            for i in range(4):
                expect(rows.nth(i)).to_contain_text("done · expect failed")
                expect(rows.nth(i)).to_contain_text("(n=4)")
            page.goto(handle.base_url + f"/runs/{run_id}")
            expect(page.locator("#progress")).to_contain_text("done · expect failed")
            expect(page.locator("#progress [data-expect=failed]")).to_have_count(1)
            section = page.locator("#expect")
            expect(section.locator("h2")).to_have_text("Expect: 3 of 4 lines failed")
            expect(section.locator('tr[data-key="status"][data-passed="true"]')).to_contain_text(
                "recipes/sft_tooluse.yaml:")
            expect(section.locator('tr[data-key="holdout_gain_significant"][data-passed="false"]')).to_contain_text(
                "FAILED")
            expect(page.locator(".headline .certainty")).to_contain_text("/4; 95% CI")
            browser.close()
    finally:
        handle.stop()
