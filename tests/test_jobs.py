"""The job runner with real worker processes: an SFT run end to end, crashes, kills, and RM's judge.

Workers are real detached processes (``python -m whileai.jobs.worker``)
on the embedded platform under the session's data root. They train the kit's
randomly initialised tiny model (``tiny_model_dir``, built in seconds) rather
than the pre-trained demo base, with tiny steps and held-out sets: these tests
prove the plumbing; benchmarks/training_sample_learns.py measures learning on
the demo base.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

import whileai.simulations as wai
from whileai.core.stats import holdout_result
from whileai.platform import defaults as platform_defaults
from whileai.platform.launcher.jobs import job_log
from whileai.platform.store import store_url
from whileai.domain.client import get_client
from whileai.domain.tracking import TrainingRun
from _job_helpers import hosted_run_with_a_job, job_of as _job_of, wait_for as _wait_for
from _stores import data_root_store

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def _key_count(account_id: str) -> int:
    from sqlalchemy import func, select

    from whileai.platform.store import ApiKey

    with data_root_store() as store:
        return store._tx(lambda s: s.scalar(select(func.count()).select_from(ApiKey).where(ApiKey.account_id == account_id)))


def test_sft_end_to_end_and_the_caller_exiting_does_not_stop_it(tiny_sample, session_home):
    account = get_client().request("GET", "/me")["account_id"]
    keys_before = _key_count(account)
    script = textwrap.dedent(f"""
        import whileai.simulations as wai
        run = wai.train({tiny_sample['passes'].id!r}, method="sft", steps=6, base_model={tiny_sample['base']!r},
                        holdout={tiny_sample['holdout'].id!r}, config={{"holdout_rows": 12}})
        print(run.id, flush=True)
    """)
    env = {**os.environ, "WHILEAI_HOME": str(session_home), "PYTHONWARNINGS": "ignore"}
    caller = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT,
                            timeout=120)
    assert caller.returncode == 0, caller.stderr
    run_id = caller.stdout.strip().splitlines()[-1]
    run = TrainingRun(get_client().request("GET", f"/runs/{run_id}"), get_client())
    assert run.wait(poll=2, timeout=240) == "done", run.error
    assert run.config["holdout"] == tiny_sample["holdout"].id
    adapter = Path(run.adapter)
    assert (adapter / "adapter_config.json").is_file() and (adapter / "adapter_model.safetensors").is_file()
    assert (adapter / "tokenizer_config.json").is_file()
    assert adapter == session_home / "adapters" / run_id
    training = run.training
    assert 0.0 <= training["before"] <= 1.0 and 0.0 <= training["after"] <= 1.0
    assert training["holdout_prompts"] == 12 and training["rows"] > 0 and training["seconds"] > 0
    assert len(training["outcomes"]["before"]) == len(training["outcomes"]["after"]) == 12
    assert training["stats"] == holdout_result(training["outcomes"]["before"], training["outcomes"]["after"])
    assert training["before"] == sum(training["outcomes"]["before"]) / 12
    assert training["gpu"] is None and "no estimate" in training["cost_basis"]
    assert run.summary["holdout_before"] == training["before"]
    trainer = run.summary["trainer"]  # what the trainer saw, library defaults filled in
    assert trainer["config_class"] == "SFTConfig" and trainer["config"]["max_steps"] == 6
    assert "max_steps" not in trainer["library_defaults"] and "adam_beta1" in trainer["library_defaults"]
    assert trainer["peft"]["default"]["r"] == run.config["lora_rank"]
    assert trainer["versions"]["trl"] and trainer["versions"]["peft"]
    record = wai.get_run(run_id)
    assert record["step"] == 6 and record["total_steps"] == 6
    assert any("loss" in p["metrics"] for p in record["series"])
    # the job's system samples (at least the one at train end) and what the trainer ran with (whileai/jobs/system.py)
    assert any(p["metrics"].get("system/rss_mb", 0) > 0 for p in record["series"])
    assert run.summary["setup"]["lora_rank"] == trainer["peft"]["default"]["r"]
    assert run.summary["setup"]["batch_size"] == trainer["config"]["per_device_train_batch_size"]
    # the worker finishes its run first, then reports its job's end; run.wait() sees the run's end at once (a long
    # poll), so the job's report may still be on its way: wait for it
    _wait_for(lambda: _job_of(run_id)["status"] != "running", 60, "the worker to report its job's end")
    job = _job_of(run_id)
    assert job["status"] == "done" and job["heartbeat_at"] is not None
    assert _key_count(account) == keys_before  # a job's key is its own, never an account key
    with data_root_store() as store:
        assert store.revoke_job_keys(job["id"]) == 0, "the job's key was revoked when it ended"
    assert "log" not in job["spec"] and "key_hash" not in job["spec"]
    log = job_log(job["id"]).read_text()  # where the platform keeps it, derived from the job id
    assert f"whileai job {job['id']}: done" in log


def test_a_crashing_job_fails_its_run_with_the_error_text_through_a_real_server(tiny_sample, tmp_path, monkeypatch):
    """Over HTTP to a uvicorn server on loopback: the server launches the worker on its own store."""
    from whileai.platform.server import serve_in_thread
    from whileai.platform.store import ensure_local_account

    handle = serve_in_thread("127.0.0.1", 0, store_url())
    try:
        _account, key = ensure_local_account(handle.store)
        monkeypatch.setenv(platform_defaults.SERVE_DIRS_ENV, str(tmp_path))  # its operator lets it load from there
        monkeypatch.setenv("WHILEAI_BASE_URL", handle.base_url)
        monkeypatch.setenv("WHILEAI_API_KEY", key)
        client = get_client()
        assert not client.embedded
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = wai.train(tiny_sample["passes"].id, method="sft", steps=2, base_model=str(tmp_path))
        assert run.wait(poll=2, timeout=120) == "failed"
        assert run.error.startswith("FileNotFoundError: base model")
        assert "Traceback" in run.error and "is not a model directory" in run.error
        # the worker fails its run first, then reports its job's end: wait for that report
        def job() -> dict:
            return client.request("GET", "/jobs", params={"run_id": run.id})["jobs"][0]

        _wait_for(lambda: job()["status"] != "running", 60, "the worker to report its job's end")
        assert job()["status"] == "failed" and job()["error"] == run.error
    finally:
        handle.stop()


def test_a_killed_worker_is_detected_and_its_run_reads_crashed(tiny_sample):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(tiny_sample["train"], method="dpo", steps=500, base_model=tiny_sample["base"],
                        config={"holdout_rows": 4})
    _wait_for(lambda: _job_of(run.id)["heartbeat_at"] is not None, 90, "the worker's first heartbeat")
    os.kill(_job_of(run.id)["pid"], signal.SIGKILL)
    _wait_for(lambda: run.refresh().status != "running", 30, "the kill to be noticed")
    # the process vanished without a word: crashed (an error it reported would read failed), with its log's tail
    assert run.status == "crashed"
    assert "was killed by SIGKILL before it could record an error" in run.error
    job = _job_of(run.id)
    assert job["status"] == "crashed" and job["error"] == run.error
    assert run.id in [r["id"] for r in wai.list_runs(status="crashed")]


def test_a_stale_heartbeat_fails_a_job_whose_process_cannot_be_checked(tiny_sample):
    from whileai.platform import defaults

    client = get_client()
    record, job = hosted_run_with_a_job("elsewhere", kind="sft", target="local", status="running", pid=4242,
                                        platform={"host": "another-host", "launched_at": time.time()},
                                        heartbeat_at=time.time() - defaults.JOB_STALE_S - 1)
    run = TrainingRun(record, client).refresh()
    assert run.status == "failed" and "no heartbeat for" in run.error
    assert client.request("GET", f"/jobs/{job['id']}")["status"] == "failed"


def test_a_stale_jobs_error_reaches_its_run_when_the_run_already_reads_crashed(tiny_sample, monkeypatch):
    """A job is settled when it is read; on a stalled machine that can be after its run went silent past
    RUN_STALE_S and reads crashed with only a guess. The job's end still fails the run with the job's error."""
    from whileai.platform import defaults

    monkeypatch.setenv(defaults.RUN_STALE_ENV, "1")
    client = get_client()
    record, job = hosted_run_with_a_job("stalled", kind="sft", target="local", status="running", pid=4242,
                                        platform={"host": "another-host", "launched_at": time.time()},
                                        heartbeat_at=time.time() - defaults.JOB_STALE_S - 1)
    time.sleep(1.5)  # the run is silent past RUN_STALE_S before its job is read
    run = TrainingRun(record, client).refresh()
    assert run.status == "failed" and "no heartbeat for" in run.error, run.error
    assert client.request("GET", f"/jobs/{job['id']}")["error"] == run.error


def _silent_job(name: str, code: str, silent_s: float) -> tuple[dict, dict, subprocess.Popen]:
    """A running hosted run whose job's process on this host runs ``code`` (its command line names the worker
    module and the job, as a real worker's does) and whose last heartbeat was ``silent_s`` ago."""
    import socket

    record, job = hosted_run_with_a_job(name, kind="sft", target="local", status="running",
                                        platform={"host": socket.gethostname(), "launched_at": time.time()})
    proc = subprocess.Popen([sys.executable, "-c", f"print('ready', flush=True)\n{code}", "whileai.jobs.worker",
                             job["id"]], start_new_session=True, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"  # past the interpreter's start, which computes
    _beat(job, silent_s, pid=proc.pid)
    return record, job, proc


def _beat(job: dict, silent_s: float, **changes: object) -> None:
    """Write the job's last heartbeat as ``silent_s`` ago (and any other ``changes``) straight into the store."""
    account = get_client().request("GET", "/me")["account_id"]
    with data_root_store() as store:
        store.update_job(account, job["id"], {**changes, "heartbeat_at": time.time() - silent_s})


def test_a_silent_job_whose_process_is_blocked_is_stopped_as_hung(tiny_sample):
    record, job, proc = _silent_job("blocked", "import time; time.sleep(600)", platform_defaults.JOB_STALE_S + 1)
    try:
        run = TrainingRun(record, get_client()).refresh()
        assert run.status == "failed" and "is hung; it was stopped" in run.error, run.error
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        proc.kill()


def test_a_silent_job_that_still_computes_is_left_running_until_its_grace_ends(tiny_sample):
    """A machine that stalls for minutes silences every job at once; a job that computes again once it recovers
    is not stopped as hung (JOB_BUSY_GRACE_S), and one that stays silent past the grace is."""
    stale = platform_defaults.JOB_STALE_S
    record, job, proc = _silent_job("computing", "while True: pass", stale + 184)
    try:
        run = TrainingRun(record, get_client()).refresh()
        assert run.status == "running" and proc.poll() is None
        assert get_client().request("GET", f"/jobs/{job['id']}")["status"] == "running"
        _beat(job, stale + platform_defaults.JOB_BUSY_GRACE_S + 1)
        run = run.refresh()
        assert run.status == "failed" and "no heartbeat for" in run.error, run.error
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        proc.kill()


def test_rm_end_to_end_gives_a_judge(tiny_sample):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(tiny_sample["train"], method="rm", steps=4, base_model=tiny_sample["base"], wait=True,
                        config={"holdout_rows": 24})
    assert run.status == "done", run.error
    training = run.training
    assert training["metric"] == "pair_accuracy" and isinstance(training["threshold"], float)
    # each held-out pair's outcome before and after is kept, so the paired test can be recomputed
    pairs = training["outcomes"]
    assert len(pairs["before"]) == len(pairs["after"]) == training["holdout_prompts"] == training["stats"]["n"] > 0
    assert training["after"] == sum(pairs["after"]) / len(pairs["after"])
    assert training["stats"] == holdout_result(pairs["before"], pairs["after"])
    assert (Path(run.adapter) / "adapter_config.json").is_file()
    config = json.loads((Path(run.adapter) / "adapter_config.json").read_text())
    assert config["task_type"] == "SEQ_CLS" and "score" in (config.get("modules_to_save") or [])
    assert run.summary["trainer"]["config_class"] == "RewardConfig"
    assert run.summary["trainer"]["peft"]["default"]["task_type"] == "SEQ_CLS"
    judge = wai.reward_model(run)
    rows = wai.datasets.load_rows(tiny_sample["holdout"])[:6]
    verdicts = [judge(r) for r in rows]
    assert all(isinstance(v["reward"], float) and isinstance(v["passed"], bool) for v in verdicts)


def test_job_datasets_keep_tool_call_arguments_exact():
    """What a hosted job hands TRL: no float rounded, no argument dict given the keys of another."""
    from whileai.domain.export import to_hf_dataset

    def call(arguments):
        return {"role": "assistant", "content": None,
                "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": arguments}}]}

    rows = [{"messages": [{"role": "user", "content": "a"}, call({"x": 1e-11, "y": 0.30000000000000004})]},
            {"messages": [{"role": "user", "content": "b"}, call({"city": "Paris"})]}]
    dataset = to_hf_dataset(rows)  # what every job body hands its trainer
    assert [dataset[i]["messages"] for i in range(2)] == [r["messages"] for r in rows]
    mapped = dataset.map(lambda r: {"n": len(r["messages"])})  # what TRL's first map reads
    assert mapped[0]["n"] == 2


def test_every_method_module_is_a_job_body():
    """The job-body interface is declared (whileai.jobs.body.JobBody) and each method module meets it."""
    import importlib
    import inspect

    from whileai.jobs.body import METHOD_MODULES, JobBody, _method

    for method, name in METHOD_MODULES.items():
        module = importlib.import_module(name)
        assert isinstance(module, JobBody), name
        assert _method(method) is module
        for attr in ("load", "evaluate", "fit"):
            wanted = list(inspect.signature(getattr(JobBody, attr)).parameters)[1:]
            given = list(inspect.signature(getattr(module, attr)).parameters)
            assert given == wanted, (name, attr, given)


def test_train_refuses_near_misses_with_the_whole_conversation_before_any_job(tiny_sample):
    train = tiny_sample["train"]
    with pytest.raises(wai.TrainingConfigError) as raised:
        wai.train(train, method="rm", steps=2, config={"near_misses": 2, "learning_rate": 99})
    text = str(raised.value)
    assert "near_misses=2 needs reward_span='first_action'" in text  # every problem at once
    with pytest.raises(wai.TrainingConfigError, match="near_misses"):
        wai.train(train, method="rm", steps=2, config={"near_misses": 65, "reward_span": "first_action"})
    with pytest.raises(wai.TrainingConfigError, match="near_misses"):
        wai.train(train, method="sft", steps=2, config={"near_misses": 2})
    assert wai.defaults.TRAINING_HOST_KEYS["near_misses"]["rm"]["default"] == 0


def test_an_rm_run_records_its_near_misses(tiny_sample):
    train = tiny_sample["train"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(train, method="rm", steps=2, base_model=tiny_sample["base"], wait=True,
                        config={"holdout_rows": 24, "reward_span": "first_action", "near_misses": 2,
                                "lr_scheduler_type": "cosine"})
    assert run.status == "done", run.error
    assert run.config["near_misses"] == 2
    # the schedule reached the trainer: TRL's resolved config on the run says so
    assert run.config["lr_scheduler_type"] == "cosine"
    assert wai.get_run(run.id)["summary"]["trainer"]["config"]["lr_scheduler_type"] == "cosine"
    near = run.training["near_misses"]
    assert near["pairs"] > 0 and run.training["pairs"] >= near["pairs"]
    # the selection report, read before the job started, counted the same near misses
    assert run.selection["near_miss_pairs"] == near["pairs"] and "near-miss pairs (near_misses=2" in run.selection["summary"]
    assert run.training["pairs"] == run.selection["pairs"] + near["pairs"] - run.training["left_out_too_long"]
    assert set(near["by_rule"]) == {"value", "nearby", "swap", "answer"}
    # the held-out pairs right per failure kind of the rejected side (the sample's markers.failure), both sides
    kinds = run.training["pairs_by_failure"]
    assert set(kinds["before"]) == set(kinds["after"]) and "wrong_argument" in kinds["after"]
    assert sum(k["pairs"] for k in kinds["after"].values()) == run.training["holdout_prompts"]
    assert sum(k["right"] for k in kinds["after"].values()) == sum(run.training["outcomes"]["after"])


def test_an_rm_trained_on_the_first_action_is_a_judge_that_reads_the_first_action(tiny_sample):
    """reward_span="first_action": the pairs end at the first assistant turn, and reward_model(run) scores that span."""
    from whileai.jobs import rm
    from whileai.domain.judges.reward_model import reward_text_messages

    rows = wai.datasets.load_rows(tiny_sample["holdout"])
    called = next(r for r in rows if len(r["messages"]) > 3)  # a call, its tool response and a final reply
    first = reward_text_messages(called, "first_action")
    assert [m["role"] for m in first] == ["system", "user", "assistant"] and first[-1]["tool_calls"]
    assert reward_text_messages(called) == reward_text_messages(called, "conversation")
    assert len(reward_text_messages(called)) == len(called["messages"])
    with pytest.raises(ValueError, match="'conversation', 'first_action'"):
        reward_text_messages(called, "last")
    pairs = rm.pair_examples(rows, True, "first_action")
    assert pairs and all(p[side][-1]["role"] == "assistant" and sum(m["role"] == "assistant" for m in p[side]) == 1
                         for p in pairs for side in ("chosen", "rejected"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(tiny_sample["train"], method="rm", steps=2, base_model=tiny_sample["base"], wait=True,
                        config={"holdout_rows": 24, "reward_span": "first_action"})
    assert run.status == "done", run.error
    assert run.config["reward_span"] == "first_action" and run.training["reward_span"] == "first_action"
    judge = wai.reward_model(run)
    assert judge.span == "first_action"
    # what follows the first action does not change the score: the judge reads only up to it
    tail = {**called, "messages": called["messages"][:3] + [{"role": "assistant", "content": "something else"}]}
    assert judge.score([called])[0] == pytest.approx(judge.score([tail])[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = wai.train(tiny_sample["train"], method="rm", steps=2, base_model=tiny_sample["base"], wait=True,
                          config={"holdout_rows": 24})
    assert whole.status == "done" and wai.reward_model(whole).span == "conversation"
