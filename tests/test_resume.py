"""Checkpoints and resume: an interrupted run continues from its last checkpoint to the uninterrupted run's end.

Real worker processes train the kit's tiny model on the embedded platform (as in test_jobs.py). An SFT run
is stopped (what Ctrl-C in ``python -m whileai run`` does) once a checkpoint exists, then resumed with
``python -m whileai resume``; it ends done as one run, at the same step, with the adapter of a run that
was never interrupted, one point per (metric, step) and the held-out "before" kept. A DPO run whose worker
is killed resumes through ``wai.resume``. A Modal call that loses its container is run again through the
seam (``modal_app.execute``, the deployed function's body) and continues from the Volume's checkpoint.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import warnings
from collections import Counter

import pytest

import whileai.simulations as wai
from whileai.core.errors import PlatformError
from whileai.core.paths import last_checkpoint
from whileai.platform.launcher.jobs import adapter_dir, checkpoint_dir, job_log
from whileai.domain.client import get_client
from _job_helpers import hosted_run_with_a_job, wait_for
from _stores import data_root_store

pytestmark = pytest.mark.slow

#: the SFT run's steps and checkpoint interval: long enough that a stop lands between a checkpoint and the end
STEPS, SAVE = 8, 2
#: how far the resumed run's adapter weights may be from the uninterrupted run's (CPU float32: the same ops in
#: the same order, so the two agree to rounding)
WEIGHT_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def sets(push_tiny_sample):
    return push_tiny_sample("resume-sample", tasks=60)


def _sft(sets, **config):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return wai.train(sets["passes"], method="sft", steps=config.pop("steps", STEPS), base_model=sets["base"],
                         holdout=sets["holdout"], config={"holdout_rows": 4, "batch_size": 4, "save_steps": SAVE, **config})


def _jobs(run_id: str) -> list[dict]:
    return get_client().request("GET", "/jobs", params={"run_id": run_id})["jobs"]


def _pairs(series: list[dict]) -> Counter:
    return Counter((name, p["step"]) for p in series for name in p["metrics"])


def _twice(pairs: Counter) -> set:
    """The (metric, step) pairs stored more than once."""
    return {k for k, v in pairs.items() if v > 1}


def _weights(run_id: str) -> dict:
    from safetensors.torch import load_file

    return load_file(str(adapter_dir(run_id) / "adapter_model.safetensors"))


@pytest.fixture(scope="module")
def uninterrupted(sets):
    """The same SFT run, never interrupted: what a resumed run must end as."""
    run = _sft(sets)
    assert run.wait(poll=0.5, timeout=300) == "done", run.error
    # the job drops the folder just after it marks the run done: read it once the job has ended
    wait_for(lambda: all(j["status"] != "running" for j in _jobs(run.id)), 60, "the job to report its end")
    assert not checkpoint_dir(run.id).exists(), "a done run keeps no checkpoint"
    return run


def test_a_stopped_run_resumes_from_its_checkpoint_to_the_uninterrupted_end(sets, uninterrupted):
    run = _sft(sets)
    folder = checkpoint_dir(run.id)
    wait_for(lambda: last_checkpoint(folder) is not None, 120, "the first checkpoint")
    with pytest.raises(PlatformError) as running:
        wai.resume(run)
    assert running.value.status == 409 and "still running" in str(running.value)
    assert run.stop() == "stopped"  # what Ctrl-C in `python -m whileai run` does
    start = last_checkpoint(folder)
    step = int(start.name.split("-")[1])
    assert 0 < step < STEPS and (folder / "before.json").is_file()
    stopped_points = _pairs(wai.get_run(run.id)["series"])

    done = subprocess.run([sys.executable, "-m", "whileai", "resume", run.id, "--json"], capture_output=True,
                          text=True, timeout=300, env=os.environ.copy())
    assert done.returncode == 0, done.stderr[-3000:]
    closing = json.loads(done.stdout)
    assert closing["status"] == "done" and closing["run"] == run.id
    assert f"resuming {run.id} from its checkpoint at step {step}" in done.stderr

    record = wai.get_run(run.id)
    training = record["summary"]["training"]
    assert record["status"] == "done" and training["steps"] == STEPS
    assert training["resumed"]["from_step"] == step and training["resumed"]["times"] == 1
    # the run's seconds (and a GPU run's cost) count both jobs, not only the one that finished
    assert 0 < training["resumed"]["earlier_seconds"] and training["job_seconds"] > 0
    assert training["seconds"] == pytest.approx(training["job_seconds"] + training["resumed"]["earlier_seconds"])
    # one run on the platform, with the two jobs that trained it
    assert [r["id"] for r in wai.list_runs(limit=50)].count(run.id) == 1
    # the worker finishes its run, then reports its job's end, which the resume command need not wait for
    wait_for(lambda: all(j["status"] != "running" for j in _jobs(run.id)), 60, "the jobs to report their ends")
    first, second = sorted(_jobs(run.id), key=lambda j: j["created_at"])
    assert first["status"] == "stopped" and second["status"] == "done"
    log = job_log(second["id"]).read_text()
    assert f"resuming from checkpoint-{step}" in log and "read back from the interrupted job" in log
    # the held-out before of the interrupted job, per prompt, kept for the paired test
    base = uninterrupted.training
    assert training["before"] == base["before"] and training["outcomes"]["before"] == base["outcomes"]["before"]
    assert training["stats"]["n"] == base["stats"]["n"]
    # one point per (metric, step), every step's loss there, and what the stopped job stored kept
    pairs = _pairs(record["series"])
    assert not _twice(pairs), _twice(pairs)
    assert {s for (name, s) in pairs if name == "loss"} == set(range(1, STEPS + 1))
    assert set(stopped_points) <= set(pairs)
    # the same end as the run that was never interrupted: the last step's loss and the adapter's weights
    loss = {p["step"]: p["metrics"]["loss"] for p in record["series"] if "loss" in p["metrics"]}
    loss_base = {p["step"]: p["metrics"]["loss"] for p in wai.get_run(uninterrupted.id)["series"]
                 if "loss" in p["metrics"]}
    assert loss[STEPS] == pytest.approx(loss_base[STEPS], rel=1e-3)
    mine, theirs = _weights(run.id), _weights(uninterrupted.id)
    assert mine.keys() == theirs.keys()
    drift = max(float((mine[k] - theirs[k]).abs().max()) for k in mine)
    assert drift < WEIGHT_TOLERANCE, drift
    assert not folder.exists(), "the checkpoints go once the run is done"
    from whileai.platform.pages import _views  # what the run page shows under its title

    assert _views.facts(record)["resumed"] == {"times": 1, "from_step": step}


def test_resume_refuses_what_it_cannot_continue(uninterrupted):
    with pytest.raises(PlatformError) as done:
        wai.resume(uninterrupted.id)
    assert done.value.status == 409 and "nothing to resume" in str(done.value)
    unknown = subprocess.run([sys.executable, "-m", "whileai", "resume", "run_0123456789abcdef"],
                             capture_output=True, text=True, timeout=120, env=os.environ.copy())
    assert unknown.returncode == 2 and "no run 'run_0123456789abcdef'" in unknown.stderr
    # a failed run whose job saved no checkpoint (a run no longer than save_steps saves none)
    record, _ = hosted_run_with_a_job("no-checkpoint", run={"status": "failed", "error": "the job failed"}, kind="sft",
                                      target="local", status="failed",
                                      spec={"method": "sft", "steps": SAVE, "save_steps": SAVE})
    with pytest.raises(PlatformError) as none:
        wai.resume(record["id"])
    assert none.value.status == 409
    assert f"saved no checkpoint (save_steps={SAVE}, steps={SAVE}: the run is not longer than save_steps)" \
        in str(none.value) and f"python -m whileai reproduce {record['id']}" in str(none.value)
    said = subprocess.run([sys.executable, "-m", "whileai", "resume", record["id"]], capture_output=True, text=True,
                          timeout=120, env=os.environ.copy())
    assert said.returncode == 2 and "saved no checkpoint" in said.stderr
    assert wai.get_run(record["id"])["status"] == "failed", "a refused resume leaves the run as it was"
    # deleting a run removes its checkpoints with it
    (checkpoint_dir(record["id"]) / "checkpoint-1").mkdir(parents=True)
    wai.delete_run(record["id"])
    assert not checkpoint_dir(record["id"]).exists()


def test_a_killed_dpo_worker_resumes_through_the_sdk(sets):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(sets["train"], method="dpo", steps=8, base_model=sets["base"],
                        config={"save_steps": 2, "batch_size": 2})
    wait_for(lambda: last_checkpoint(checkpoint_dir(run.id)) is not None, 180, "the first checkpoint")
    os.kill(_jobs(run.id)[0]["pid"], signal.SIGKILL)  # a crash: the worker ends without a word
    wait_for(lambda: run.refresh().status != "running", 30, "the kill to be noticed", every=0.2)
    if run.status == "done":
        pytest.fail("the DPO run ended before its worker was killed; give it more steps")
    assert run.status == "crashed"  # no error was recorded: it vanished
    step = int(last_checkpoint(checkpoint_dir(run.id)).name.split("-")[1])
    resumed = wai.resume(run.id)
    assert resumed.id == run.id and resumed.status == "running"
    assert resumed.wait(poll=0.5, timeout=300) == "done", resumed.error
    record = wai.get_run(run.id)
    assert record["summary"]["training"]["steps"] == 8
    assert record["summary"]["resumed"]["from_step"] == step
    assert not _twice(_pairs(record["series"]))


def test_checkpoints_are_off_for_a_run_no_longer_than_save_steps(tmp_path):
    from whileai.core.spec import read_spec
    from whileai.jobs._trainer_setup import checkpointing, trainer_settings

    def settings(steps: int, save_steps: int) -> dict:
        spec = read_spec({"method": "sft", "steps": steps, "save_steps": save_steps, "learning_rate": 1e-4})
        with checkpointing(tmp_path / "run"):
            return trainer_settings(spec, tmp_path / "job")

    on = settings(10, 4)
    assert on["save_strategy"] == "steps" and on["save_steps"] == 4 and on["output_dir"] == str(tmp_path / "run")
    for steps, save_steps in ((4, 4), (3, 4), (10, 0)):
        off = settings(steps, save_steps)
        assert off["save_strategy"] == "no" and off["output_dir"] == str(tmp_path / "job" / "trainer")


def test_a_modal_call_run_again_after_losing_its_container_continues_from_the_volume(sets, tmp_path, monkeypatch):
    """Modal's ``retries`` runs the call again with the same payload: the seam runs ``execute`` twice."""
    import transformers

    from whileai.jobs import modal_app
    from whileai.platform.launcher import modal_backend

    class Preempted(BaseException):
        """The container going away right after the first checkpoint reached the Volume."""

    save = transformers.Trainer._save_checkpoint
    commits = []

    def save_then_die(self, *args, **kwargs):
        save(self, *args, **kwargs)
        if not commits:
            commits.append("first")
            raise Preempted("the GPU was preempted")

    monkeypatch.setattr(transformers.Trainer, "_save_checkpoint", save_then_die)
    client = get_client()
    record = client.request("POST", "/runs", json={"name": "modal-retry", "kind": "hosted"})
    spec = {"method": "dpo", "base_model": sets["base"], "learning_rate": 1e-4, "beta": 0.1, "loss_type": "sigmoid",
            "steps": 6, "save_steps": 2, "batch_size": 2, "seed": 0, "target": "modal"}
    payload = {"job_id": "job_retry", "spec": spec, "rows": wai.datasets.load_rows(sets["train"]),
               "holdout_rows": None, "run": record}
    progress: dict = {}
    volume = tmp_path / "volume"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lost = modal_app.execute(payload, progress, volume, commit=lambda: commits.append("commit"))
        assert lost["status"] == "failed" and "preempted" in lost["error"]
        assert last_checkpoint(modal_app.checkpoint_folder(volume, record["id"])).name == "checkpoint-2"
        again = modal_app.execute(payload, progress, volume, commit=lambda: commits.append("commit"))
    assert again["status"] == "done", again["error"]
    assert again["training"]["steps"] == 6 and again["training"]["resumed"]["from_step"] == 2
    assert commits.count("commit") >= 2, "each checkpoint is committed to the Volume"
    assert not modal_app.checkpoint_folder(volume, record["id"]).exists()
    entries = [progress[modal_app.progress_key("job_retry", i)] for i in range(progress[modal_app.count_key("job_retry")])]
    with data_root_store() as store:
        account = client.request("GET", "/me")["account_id"]
        modal_backend.replay(store, account, record["id"], entries)
        replayed = store.get_run(account, record["id"])
    assert replayed["status"] == "done"
    pairs = _pairs(replayed["series"])
    assert not _twice(pairs) and {s for (n, s) in pairs if n == "loss"} == set(range(1, 7))
