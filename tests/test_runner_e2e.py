"""The CPU recipes end to end through ``python -m whileai run``, on the kit with small step counts.

grpo_tooluse runs as the design card writes it (``recipe=grpo_tooluse beta=0.04``): a reward-model
stage that becomes the HackMonitor's gold judge, then SFT and GRPO linked by init_from; dpo_tooluse likewise; rm_tooluse through Hydra's joblib launcher as a
two-job sweep of its seed on one dataset, two parallel runs (the sft recipe runs in
test_runner_sweep.py). Every run's record carries the resolved spec, equal to what ``validate`` prints for the same command line.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import yaml

from _job_helpers import job_of, wait_for
from _runner_helpers import (ROOT, TINY, assert_counts, ctrl_c, record, runner_in_training, runner_record, runs_file,
                             tiny_base, whileai)

pytestmark = pytest.mark.slow


def _validated(*args: str) -> dict:
    done = whileai("validate", *args)
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)


def _same_spec(kept: dict, validated: dict, run_id: str, prefix: str) -> None:
    """The run carries the resolved spec ``validate`` printed; each null it filled is the value the job used."""
    from whileai.runner.compare import flatten

    mine, shown = flatten(kept), flatten(validated)
    assert {k for k, v in mine.items() if v is not None} <= set(shown)
    config = record(run_id)["config"]
    for key, value in shown.items():
        if mine.get(key) is not None:
            assert mine[key] == value, key
        elif value is not None and key.startswith(prefix) and "." not in key[len(prefix):]:
            assert config[key[len(prefix):]] == value, (key, config.get(key[len(prefix):]), value)


def _check_stages(token: str, args: list[str], methods: list[str]) -> list[dict]:
    written = runs_file(token)
    assert [r["method"] for r in written["runs"]] == methods
    spec = _validated(*args)
    records = [runner_record(r["id"]) for r in written["runs"]]
    policy = None  # the last policy stage: what the next stage continues (an rm stage is no policy)
    for index, (run, kept) in enumerate(zip(written["runs"], records)):
        assert record(run["id"])["status"] == "done"
        _same_spec(kept["spec"], spec, run["id"], "" if index == len(written["runs"]) - 1 else f"stages.{kept['stage']}.")
        assert kept["stage_index"] == index
        assert kept["previous_run"] == (policy if run["method"] != "rm" else None)
        policy = run["id"] if run["method"] != "rm" else policy
        assert kept["recipe"] and kept["command"].startswith("python -m whileai run ")
        assert kept["overrides"] == [a for a in args if "=" in a]
        assert kept["dataset"]["content_hash"] and kept["versions"]["python"] and kept["versions"]["torch"]
        hydra_dir = Path(kept["hydra_dir"])
        assert hydra_dir.is_dir() and (hydra_dir / ".hydra" / "config.yaml").is_file()
        assert hydra_dir.is_relative_to(Path(os.environ["WHILEAI_HOME"])), "Hydra's folder is under the data root"
        if (ROOT / ".git").exists():
            assert len(kept["git"]["commit"]) == 40 and isinstance(kept["git"]["dirty"], bool)
            assert (kept["git"]["diff_hash"] is not None) == kept["git"]["dirty"]
        assert Path(kept["export"]["output"]).is_file(), "the exported file sits beside the run"
    return records


def test_the_design_card_line_runs_sft_then_grpo_with_the_monitor():
    base = tiny_base()
    args = ["recipe=grpo_tooluse", "beta=0.04", *TINY, f"base_model={base}", "stages.sft.steps=2",
            "stages.sft.holdout_rows=4", "max_completion_length=16", "generations=2", "monitor.n_prompts=4",
            "monitor.every=1", "expect.stage_gain_min=null", "expect.holdout_gain_significant=null",
            "expect.no_alarm=null"]
    done = whileai("run", *args, token="card")
    assert done.returncode == 0, done.stdout + done.stderr
    records = _check_stages("card", args, ["sft", "grpo"])
    assert records[1]["spec"]["beta"] == 0.04 and records[1]["spec"]["monitor"]["enabled"] is True
    _, grpo_run = runs_file("card")["runs"]
    grpo = record(grpo_run["id"])
    assert grpo["config"]["monitor"] not in (False, None), "the HackMonitor settings reach the GRPO job"
    # the reward is the exact judge: no judge is stronger, so the alarms that need one are off, and say why
    assert grpo["config"]["reward"] == ["first_action"] and not grpo["config"].get("gold_judge")
    monitor = grpo["summary"].get("monitor")
    assert isinstance(monitor, dict), monitor
    assert monitor["armed"]["divergence"].startswith("off: the reward is the exact first-action judge"), monitor
    assert monitor["armed"]["length"] == "armed"
    assert monitor["curve"] and all(p.get("proxy") is not None for p in monitor["curve"]), monitor["curve"]
    assert "monitor    armed: length" in done.stdout
    # the group watch: on the random tiny model every sampled group is unanimous, and the run says so
    training = grpo["summary"]["training"]
    assert training["mixed_groups"]["mean"] == 0 and training["sampled_pass_rate"]["mean"] == 0
    assert "almost every sampled group was unanimous" in grpo["summary"]["grpo_groups"]
    for line in ("load and grade the dataset", "push", "cut by task", "selection report", "export with gates",
                 "wai.train on local", "held-out"):
        assert line in done.stderr
    sft_id, grpo_id = (r["id"] for r in runs_file("card")["runs"])
    # a run's name carries only the knobs its method reads: beta names the GRPO run, not the SFT stage
    assert record(sft_id)["name"].startswith("grpo_tooluse · sft stage · ") and "beta" not in record(sft_id)["name"]
    assert record(grpo_id)["name"].startswith("grpo_tooluse · grpo · beta=0.04 ")
    for run_id in (sft_id, grpo_id):
        assert_counts(run_id)
        assert f"run        {run_id}  grpo_tooluse · " in done.stdout


def test_dpo_tooluse_runs_after_its_sft_stage_and_json_prints_one_closing_object():
    # the random tiny model never writes a passing reply, so the recipe's on-policy pairs would have no pass to
    # pair: this plumbing run pairs the dataset's rows (tests/test_stages.py samples a trained policy's replies)
    args = ["recipe=dpo_tooluse", *TINY, f"base_model={tiny_base()}", "stages.sft.steps=2",
            "stages.sft.holdout_rows=4", "expect.holdout_gain_significant=null",
            "pair_source=rows"]
    done = whileai("run", *args, "--json", token="dpo")
    assert done.returncode == 0, done.stdout + done.stderr
    _check_stages("dpo", args, ["sft", "dpo"])
    closing = json.loads(done.stdout)  # the whole of stdout is one JSON object
    written = runs_file("dpo")["runs"]
    assert [r["id"] for r in closing["runs"]] == [r["id"] for r in written] and closing["run"] == written[-1]["id"]
    assert closing["status"] == "done" and closing["exit_code"] == 0 and closing["recipe"] == "dpo_tooluse"
    kept = record(closing["run"])
    assert closing["held_out"]["before"] == kept["summary"]["training"]["before"]
    assert closing["held_out"]["after"] == kept["summary"]["training"]["after"]
    assert closing["held_out"]["metric"] == "pass_rate" and "verdict" in closing and closing["alarms"] == []
    assert set(closing["cost"]) == {"usd", "basis"} and closing["page"] == f"python -m whileai open {closing['run']}"
    assert closing["expect"]["passed"] is True and closing["expect"]["failed"] == []
    assert set(closing["datasets"]) >= {"pushed", "train", "holdout"} and closing["outcome"]["status"] == "done"
    assert closing["datasets"]["pushed"] in done.stderr, "the pushed dataset's id is printed"
    for run_id in (r["id"] for r in written):
        assert_counts(run_id)


def test_rm_tooluse_as_a_joblib_sweep_of_two_parallel_jobs_on_one_dataset():
    # the jobs sweep a training knob over the same dataset at the same time: each point is its own run
    args = ["-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "recipe=rm_tooluse", *TINY,
            f"base_model={tiny_base()}", "seed=0,1", "stages.sft.steps=2", "stages.sft.holdout_rows=4",
            "expect.holdout_after_min=null",
            "expect.holdout_gain_significant=null", "--json"]
    done = whileai("run", *args, token="rmsweep")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sweep sweep_rmsweep: its jobs run now" in done.stderr
    closing = json.loads(done.stdout)  # one object for the whole sweep, every job's summary inside
    assert closing["sweep_id"] == "sweep_rmsweep" and closing["wait"] == "python -m whileai wait sweep_rmsweep"
    assert [j["job"] for j in closing["jobs"]] == ["0", "1"]
    assert all(j["summary"]["held_out"]["metric"] in ("pair_accuracy", "row_accuracy") for j in closing["jobs"])
    jobs = [runs_file("rmsweep", str(i)) for i in range(2)]
    sweep_ids = {j["sweep_id"] for j in jobs}
    assert len(sweep_ids) == 1 and None not in sweep_ids
    run_ids = [j["runs"][-1]["id"] for j in jobs]
    specs = [runner_record(r)["spec"] for r in run_ids]
    assert [s["seed"] for s in specs] == [0, 1]
    assert len(set(run_ids)) == 2
    records = [record(r) for r in run_ids]
    assert len({r["dataset"] for r in records}) == 1, [r["dataset"] for r in records]
    assert [r["config"]["seed"] for r in records] == [0, 1]
    assert all(r["status"] == "done" for r in records)
    assert [r["name"] for r in records] == ["rm_tooluse · rm · seed=0", "rm_tooluse · rm · seed=1"]
    assert [j["summary"]["run"] for j in closing["jobs"]] == run_ids
    # each reward model started from its own job's SFT stage (init_from: stages.sft), with that policy's LoRA shape
    starts = [j["runs"][0]["id"] for j in jobs]
    assert [r["config"]["init_from"] for r in records] == starts and len(set(starts)) == 2
    assert all(record(s)["config"]["method"] == "sft" for s in starts)
    assert all(r["config"]["lora_rank"] == record(s)["config"]["lora_rank"] for r, s in zip(records, starts))
    for run_id in run_ids:
        assert_counts(run_id)


def test_ctrl_c_during_training_stops_the_run_and_its_worker():
    args = ["recipe=sft_tooluse", "dataset.tasks=24", "holdout_rows=4", "steps=100000", f"base_model={tiny_base()}"]
    with runner_in_training(*args, token="sigint") as (proc, run_id):
        ctrl_c(proc, timeout=120)
    assert record(run_id)["status"] == "stopped"
    pid = job_of(run_id).get("pid")
    if pid:
        wait_for(lambda: not _alive(pid), 30, f"the worker (pid {pid}) to end")


def test_sigterm_during_training_stops_the_run_and_its_worker_as_ctrl_c_does():
    args = ["recipe=sft_tooluse", "dataset.tasks=24", "holdout_rows=4", "steps=100000", f"base_model={tiny_base()}"]
    with runner_in_training(*args, token="sigterm") as (proc, run_id):
        proc.send_signal(signal.SIGTERM)  # kill PID: the job runs in the platform's process, not the runner's
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, out + err
    assert f"- interrupted: stopping {run_id} ..." in err
    assert record(run_id)["status"] == "stopped"
    pid = job_of(run_id).get("pid")
    if pid:
        wait_for(lambda: not _alive(pid), 30, f"the worker (pid {pid}) to end")


def _alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_serve_platform_serves_the_run_and_the_endpoint_answers_one_chat_completion(session_home):
    from whileai.platform.server import serve_in_thread
    from whileai.platform.store import ensure_local_account, store_url

    handle = serve_in_thread("127.0.0.1", 0, store_url())
    try:
        _, key = ensure_local_account(handle.store)
        env = {"WHILEAI_BASE_URL": handle.base_url, "WHILEAI_API_KEY": key}
        args = ["recipe=sft_tooluse", *TINY, f"base_model={tiny_base()}", "serve=platform", "serve.name=runner-tiny",
                "expect.holdout_after_min=null", "expect.holdout_gain_min=null",
                "expect.holdout_gain_significant=null"]
        done = whileai("run", *args, token="served", env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"serve on platform: runner-tiny v1 at {handle.base_url}/v1; reply: " in done.stderr
        assert f"endpoint   {handle.base_url}/v1 (model runner-tiny)" in done.stdout
    finally:
        handle.stop()


def test_serve_platform_on_the_embedded_default_answers_one_chat_completion_in_process():
    """No server running: the completion goes through the SDK's client seam to the embedded app's /v1."""
    from whileai.domain.client import embedded_base_url, get_client

    assert not os.environ.get("WHILEAI_BASE_URL") and not os.environ.get("WHILEAI_API_KEY")
    args = ["recipe=sft_tooluse", *TINY, f"base_model={tiny_base()}", "serve=platform", "serve.name=runner-embedded",
            "expect.holdout_after_min=null", "expect.holdout_gain_min=null", "expect.holdout_gain_significant=null"]
    done = whileai("run", *args, token="served-embedded")
    assert done.returncode == 0, done.stdout + done.stderr
    endpoint = f"{embedded_base_url()}/v1"
    line = next(x for x in done.stderr.splitlines() if "serve on platform: " in x)
    assert f"runner-embedded v1 at {endpoint}; reply: " in line and "not asked" not in line, line
    assert f"endpoint   {endpoint} (model runner-embedded)" in done.stdout
    key = get_client().api_key  # the embedded local account's key: the bearer, never shown
    assert key and key not in done.stdout + done.stderr
