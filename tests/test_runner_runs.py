"""``python -m whileai runs`` and ``show`` as a person types them, against a real embedded store.

The runs are made through the SDK (``wai.training_run``, ``note``, ``finish``): the same calls a job
makes to leave its held-out result and the runner makes to leave its expect verdict, so the store,
the page's readers and the command line are all the real ones. The held-out numbers are the ones
the pages must print with the same digits (``0.250 -> 0.750``).
"""

from __future__ import annotations

import json

import pytest

from _runner_helpers import whileai


def _made(name: str, recipe: str, method: str, before: list[int], after: list[int], *, passed: bool | None,
          status: str = "done", sweep: str | None = None) -> str:
    import whileai.simulations as wai
    from whileai.core.stats import holdout_result

    spec = {"method": method, "steps": 2, "dataset": {"holdout": 0.2}}
    runner = {"recipe": recipe, "spec": spec, "overrides": ["steps=2"], "sweep_id": sweep}
    run = wai.training_run(config={"method": method, "runner": runner}, name=name)
    stats = holdout_result(before, after)
    run.note(training={"method": method, "metric": "pass_rate", "before": sum(before) / len(before),
                       "after": sum(after) / len(after), "stats": stats, "holdout_prompts": len(after)},
             adapter=f"/adapters/{name}")
    if method == "grpo":  # the monitor's alarms, as a GRPO job notes them
        run.note(monitor={"alarms": [{"kind": "length", "step": 20}, {"kind": "feature", "step": 40}]})
    if passed is not None:
        line = {"key": "holdout_after_min", "want": 0.5, "seen": sum(after) / len(after), "passed": passed,
                "where": f"recipes/{recipe}.yaml:40"}
        run.note(expect={"passed": passed, "lines": [line], "recipe": recipe})
    run.finish(status)
    return run.id


@pytest.fixture
def three_runs(home):
    ids = {
        "good": _made("good-run", "sft_tooluse", "sft", [0, 0, 1, 0], [1, 1, 1, 0], passed=True),
        "bad": _made("bad-run", "grpo_tooluse", "grpo", [0, 0, 0, 0], [0, 0, 0, 1], passed=False, sweep="sweep_x1"),
        "stopped": _made("stopped-run", "sft_tooluse", "sft", [0, 1], [1, 1], passed=None, status="stopped"),
    }
    return ids


def test_runs_lists_the_page_columns_newest_first(three_runs):
    done = whileai("runs")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["run", "name", "status", "method", "held-out", "before", "->", "after", "alarms",
                                "took"]
    assert [line.split()[0] for line in lines[1:]] == [three_runs["stopped"], three_runs["bad"], three_runs["good"]]
    good = next(line for line in lines if three_runs["good"] in line)
    assert "done · expect passed" in good and " sft " in good
    # the pages' digits (one formatter, core.stats.rate_text) and the paired test's verdict in words
    assert "pass_rate 0.250 -> 0.750, no significant change (n=4)" in good
    bad = next(line for line in lines if three_runs["bad"] in line)
    assert "done · expect failed" in bad and "grpo" in bad and "0.000 -> 0.250, no significant change (n=4)" in bad
    assert bad.split()[-3] == "2", "the alarms column counts the monitor's alarms"
    assert good.split()[-3] == "-", "no monitor, no alarms"
    stopped = next(line for line in lines if three_runs["stopped"] in line)
    assert "stopped" in stopped and "expect" not in stopped
    assert all(line.split()[-1] == "s" for line in lines[1:]), "took: seconds it ran"


def test_runs_filters_by_status_recipe_and_sweep(three_runs):
    by_recipe = whileai("runs", "--recipe", "sft_tooluse", "--json")
    assert by_recipe.returncode == 0, by_recipe.stderr
    found = json.loads(by_recipe.stdout)
    assert [r["id"] for r in found["runs"]] == [three_runs["stopped"], three_runs["good"]] and found["total"] == 2
    assert found["runs"][1]["expect"] == {"passed": True, "failed": 0}
    assert found["runs"][1]["holdout"]["before_text"] == "0.250"
    by_sweep = json.loads(whileai("runs", "--sweep", "sweep_x1", "--json").stdout)
    assert [r["id"] for r in by_sweep["runs"]] == [three_runs["bad"]]
    by_status = whileai("runs", "--status", "stopped")
    assert [line.split()[0] for line in by_status.stdout.splitlines()[1:]] == [three_runs["stopped"]]
    limited = whileai("runs", "--limit", "1")
    assert len(limited.stdout.splitlines()) == 3 and "(1 of 3 runs shown" in limited.stdout
    none = whileai("runs", "--recipe", "dpo_tooluse")
    assert none.returncode == 0 and "no runs match --recipe dpo_tooluse" in none.stdout


def test_runs_refuses_a_bad_status_naming_the_accepted_ones(three_runs):
    done = whileai("runs", "--status", "finished")
    assert done.returncode == 2 and done.stdout == ""
    assert "status='finished' is not a run status" in done.stderr and "done" in done.stderr
    assert "Traceback" not in done.stderr


def test_show_prints_one_run_with_its_result_verdict_adapter_page_and_spec(three_runs):
    done = whileai("show", three_runs["bad"])
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"run        {three_runs['bad']}  bad-run" in out
    assert "status     done · expect failed" in out
    assert "method     grpo (recipe grpo_tooluse)" in out
    assert "held-out   pass_rate 0.000 -> 0.250, no significant change (1/4; 95% CI 0.05-0.70; paired p = 1.000)" in out
    assert "n          4 held-out prompt(s); 1 improved, 0 worsened" in out
    assert "adapter    /adapters/bad-run" in out
    assert "alarms     2: length, feature" in out and "cost       -" in out
    assert f"/runs/{three_runs['bad']}" in out and f"python -m whileai open {three_runs['bad']}" in out
    assert "FAILED expect.holdout_after_min" in out and "recipes/grpo_tooluse.yaml:40" in out
    assert "spec:\n  method: grpo\n  steps: 2" in out


def test_show_names_an_unknown_run(home):
    done = whileai("show", "run_00000000deadbeef")
    assert done.returncode == 2 and "no run 'run_00000000deadbeef'" in done.stderr
    assert "python -m whileai runs" in done.stderr


@pytest.mark.postgres
def test_runs_reads_a_platform_server_on_postgresql_scoped_to_its_key(home, pg_database, monkeypatch):
    """WHILEAI_BASE_URL names a real server on PostgreSQL: the list comes over HTTP, only the key's account."""
    from whileai.platform.server import serve_in_thread
    from whileai.domain.client import get_client

    handle = serve_in_thread(store_url=pg_database())
    try:
        _, alice = handle.store.create_account("alice")
        _, bob = handle.store.create_account("bob")
        monkeypatch.setenv("WHILEAI_BASE_URL", handle.base_url)
        monkeypatch.setenv("WHILEAI_API_KEY", bob)
        theirs = _made("bobs-run", "sft_tooluse", "sft", [0, 0], [1, 1], passed=True)
        monkeypatch.setenv("WHILEAI_API_KEY", alice)
        assert get_client().base_url == handle.base_url
        mine = _made("alices-run", "sft_tooluse", "sft", [0, 1, 0, 0], [1, 1, 1, 0], passed=False, sweep="sweep_pg")
        done = whileai("runs", "--recipe", "sft_tooluse")
        assert done.returncode == 0, done.stderr
        assert mine in done.stdout and theirs not in done.stdout
        assert "done · expect failed" in done.stdout and "pass_rate 0.250 -> 0.750, no significant change (n=4)" in done.stdout
        by_sweep = json.loads(whileai("runs", "--sweep", "sweep_pg", "--json").stdout)
        assert [r["id"] for r in by_sweep["runs"]] == [mine]
        shown = whileai("show", theirs)
        assert shown.returncode == 2 and "no run" in shown.stderr, "another account's run reads as missing"
        shown = whileai("show", mine)
        assert shown.returncode == 0 and f"page       {handle.base_url}/runs/{mine}" in shown.stdout
    finally:
        handle.stop()


def test_show_prints_the_values_a_run_used_in_place_of_its_specs_nulls():
    from whileai.runner.runs import _used_spec

    spec = {"method": "grpo", "lora_rank": None, "beta": 0.04, "learning_rate": None,
            "stages": {"sft": {"method": "sft", "lora_rank": None, "steps": 60}}}
    last = {"lora_rank": 16, "learning_rate": 5e-4, "beta": 0.04, "runner": {"spec": spec}}
    filled, notes = _used_spec(spec, last, {"stage": "grpo", "stages": ["sft", "grpo"]})
    assert filled["lora_rank"] == 16 and filled["learning_rate"] == 5e-4 and filled["stages"]["sft"]["lora_rank"] is None
    assert notes == {"lora_rank": "the value this run used", "learning_rate": "the value this run used"}
    assert spec["lora_rank"] is None, "the stored spec is left as stored"
    filled, notes = _used_spec(spec, {"lora_rank": 8}, {"stage": "sft", "stages": ["sft", "grpo"]})
    assert filled["stages"]["sft"]["lora_rank"] == 8 and filled["lora_rank"] is None
    assert list(notes) == ["stages.sft.lora_rank"]
