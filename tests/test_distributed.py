"""Past one process: two ranks under torchrun (gloo on CPU) train one run, and every rank ends with the job.

The jobs are real: the platform launches ``torch.distributed.run`` with two worker ranks on
the kit's tiny model, a few steps each. The launch function, the strategy mapping and the
refusals are checked without starting anything.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

import whileai.simulations as wai
from whileai.platform.launcher.jobs import job_log, job_processes
from _job_helpers import job_of as _job_of, train as _train, wait_for as _wait_for

#: How far each step's two-process SFT loss may be from the one-process loss at the same effective batch, data
#: order and seed (relative). The two differ only in floating-point summation order (gradients all-reduced over
#: gloo); measured here: 6.6e-8 at worst over 4 steps. 1e-3 leaves room for other CPUs' kernels.
LOSS_TOLERANCE = 1e-3


def _series(run) -> list[dict]:
    return wai.get_run(run.id)["series"]


def _assert_one_run(run, method: str) -> None:
    """One run, each point once, held-out before and after, an adapter that loads, rank 1's lines in the log."""
    assert run.status == "done", run.error
    training = run.training
    assert training["world_size"] == 2 and training["method"] == method
    assert training["before"] is not None and training["after"] is not None, training
    # HF's train-end record repeats the last step's epoch, on one process too: every other metric is once a step
    keys = [(p["step"], name) for p in _series(run) for name in p["metrics"]
            if not name.startswith("system/") and name != "epoch"]
    assert keys and len(keys) == len(set(keys)), "a point was stored twice"
    assert len([k for k in keys if k[1] in ("loss", "train_loss")]) >= training["steps"]
    assert (Path(run.adapter) / "adapter_config.json").is_file()
    assert "[rank 1] " in job_log(_job_of(run.id)["id"]).read_text()
    # the run is done before its processes have exited (rank 0 reports, then torchrun collects the ranks)
    _wait_for(lambda: not job_processes(_job_of(run.id)["id"]), 30, "every process of the job to exit")


def _loads(base: str, adapter: str, method: str) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    if method == "rm":
        model = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1)
    else:
        model = AutoModelForCausalLM.from_pretrained(base)
    assert PeftModel.from_pretrained(model, adapter) is not None


@pytest.fixture(scope="module")
def sft_two(tiny_sample):
    return _train(tiny_sample, "sft", steps=4, wait=True, config={"processes": 2, "batch_size": 4, "holdout_rows": 4,
                                                           "metric": "loss"})


@pytest.mark.slow
def test_two_process_sft_is_one_run_with_its_world_recorded(tiny_sample, sft_two):
    _assert_one_run(sft_two, "sft")
    training = sft_two.training
    assert training["processes"] == 2 and training["nodes"] == 1 and training["strategy"] == "ddp"
    assert training["batch_per_device"] == 2 and training["gradient_accumulation"] == 1 and training["batch_size"] == 4
    assert training["steps"] == 4
    _loads(tiny_sample["base"], sft_two.adapter, "sft")


@pytest.fixture(scope="module")
def sft_one(tiny_sample):
    """One process at the same effective batch, data order and seed as ``sft_two``."""
    one = _train(tiny_sample, "sft", steps=4, wait=True, config={"batch_size": 4, "holdout_rows": 4, "metric": "loss"})
    assert one.status == "done", one.error
    return one


def _losses(run) -> list[float]:
    return [p["metrics"]["loss"] for p in sorted(_series(run), key=lambda p: p["step"]) if "loss" in p["metrics"]]


def _same_curve(a: list[float], b: list[float], what: str) -> None:
    assert len(a) == len(b) == 4
    print(f"{what}: {a} against {b}; largest relative gap {max(abs(x - y) / abs(x) for x, y in zip(a, b)):.2e}")
    for x, y in zip(a, b):
        assert abs(x - y) <= LOSS_TOLERANCE * abs(x), (a, b)


@pytest.mark.slow
def test_two_process_sft_follows_the_one_process_loss_curve(sft_one, sft_two):
    assert sft_one.training["world_size"] == 1 and sft_one.training["batch_per_device"] == 4
    _same_curve(_losses(sft_one), _losses(sft_two), "one process against two")


@pytest.mark.slow
def test_a_per_device_cap_accumulates_to_the_same_effective_batch(tiny_sample, sft_one):
    capped = _train(tiny_sample, "sft", steps=4, wait=True,
                    config={"batch_size": 4, "batch_per_device": 1, "holdout_rows": 4, "metric": "loss"})
    assert capped.status == "done", capped.error
    training = capped.training
    assert training["batch_per_device"] == 1 and training["gradient_accumulation"] == 4 and training["batch_size"] == 4
    _same_curve(_losses(sft_one), _losses(capped), "the whole batch at once against four accumulated micro-batches")


def test_a_per_device_cap_that_does_not_divide_the_share_is_refused_with_the_sizes_that_do():
    from whileai.core.spec import read_spec

    with pytest.raises(ValueError) as refused:
        read_spec({"method": "sft", "base_model": "kit", "dataset": "ds_1", "batch_size": 12, "processes": 2,
                   "batch_per_device": 4, "learning_rate": 1e-3, "epochs": 1})
    assert "batch_per_device=4 does not divide a process's share of the effective batch (6)" in str(refused.value)
    assert "(3, 2, 1, ...)" in str(refused.value)
    with pytest.raises(ValueError, match="batch_per_device=4 is under generations=8"):
        read_spec({"method": "grpo", "base_model": "kit", "dataset": "ds_1", "batch_per_device": 4, "generations": 8,
                   "learning_rate": 1e-6, "steps": 2})


@pytest.mark.slow
@pytest.mark.parametrize("method", ["dpo", "rm", "grpo"])
def test_each_method_trains_two_processes_as_one_run(tiny_sample, method):
    config: dict = {"processes": 2, "holdout_rows": 4}
    arguments: dict = {}
    if method == "grpo":
        config["monitor"] = False
        arguments.update(generations=2, max_completion_length=8)
    else:
        config["batch_size"] = 2
    run = _train(tiny_sample, method, steps=2, wait=True, config=config, **arguments)
    _assert_one_run(run, method)
    _loads(tiny_sample["base"], run.adapter, method)


def _rank_pid(job_id: str, rank: int) -> int:
    for pid in job_processes(job_id):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in env and b"TORCHELASTIC_RUN_ID=" + job_id.encode() in env:
            return pid
    raise AssertionError(f"no rank {rank} of {job_id} among {job_processes(job_id)}")


@pytest.mark.slow
def test_a_sigkilled_rank_fails_the_run_naming_it_and_leaves_no_process(tiny_sample):
    run = _train(tiny_sample, "dpo", steps=500, config={"processes": 2, "batch_size": 2, "holdout_rows": 4})
    job_id = _job_of(run.id)["id"]
    _wait_for(lambda: any("loss" in p["metrics"] for p in _series(run)), 120, "the first trained step")
    os.kill(_rank_pid(job_id, 1), signal.SIGKILL)
    killed = time.monotonic()
    _wait_for(lambda: run.refresh().status != "running", 60, "the run to fail")
    assert time.monotonic() - killed < 60
    assert run.status == "failed"
    assert "rank 1 of the job failed (killed by SIGKILL)" in run.error
    _wait_for(lambda: not job_processes(job_id), 10, "every process of the job to end")


@pytest.mark.slow
def test_a_sigkilled_launcher_reads_crashed_and_leaves_no_rank(tiny_sample):
    run = _train(tiny_sample, "dpo", steps=500, config={"processes": 2, "batch_size": 2, "holdout_rows": 4})
    job = _job_of(run.id)
    _wait_for(lambda: any("loss" in p["metrics"] for p in _series(run)), 120, "the first trained step")
    os.kill(job["pid"], signal.SIGKILL)  # torchrun itself: no rank failed, nothing is reported
    killed = time.monotonic()
    _wait_for(lambda: run.refresh().status != "running", 60, "the run to be settled")
    assert time.monotonic() - killed < 60
    assert run.status == "crashed", run.error
    assert "was killed by SIGKILL" in run.error and "rank" not in run.error.split(".")[0]
    # each rank ends with its launcher (PR_SET_PDEATHSIG): nothing of the job is left
    _wait_for(lambda: not job_processes(job["id"]), 15, "every rank to end with its launcher")


@pytest.mark.slow
def test_stopping_a_two_process_run_ends_every_rank(tiny_sample):
    run = _train(tiny_sample, "dpo", steps=500, config={"processes": 2, "batch_size": 2, "holdout_rows": 4})
    job = _job_of(run.id)
    _wait_for(lambda: len(job_processes(job["id"])) == 3, 60, "torchrun and its two ranks")
    groups = {os.getpgid(pid) for pid in job_processes(job["id"])}
    run.stop()
    assert run.refresh().status == "stopped"
    assert not job_processes(job["id"])
    # the launcher's group and each rank's own (torchrun gives each its session) hold no live process
    assert groups and not _group_members(groups), _group_members(groups)


def _group_members(groups: set[int]) -> list[int]:
    """Live (not zombie) processes whose process group is one of ``groups``, read from /proc."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in ("Z", "X") and int(fields[2]) in groups:
            out.append(int(entry.name))
    return out


@pytest.mark.slow
def test_ctrl_c_of_the_runner_ends_every_rank_of_a_two_process_run():
    from _runner_helpers import ctrl_c, record, runner_in_training, tiny_base

    args = ["recipe=sft_tooluse", "dataset.tasks=24", "holdout_rows=4", "steps=100000", "batch_size=4",
            "target.processes=2", f"base_model={tiny_base()}"]
    with runner_in_training(*args, token="sigint-ranks") as (proc, run_id):
        job_id = _job_of(run_id)["id"]
        groups = {os.getpgid(pid) for pid in job_processes(job_id)}
        assert len(groups) == 3, "torchrun and two ranks, each in its own group"
        ctrl_c(proc, timeout=240)  # the ranks' grace to flush (RANK_ORPHAN_GRACE_S) included
    assert record(run_id)["status"] == "stopped"
    assert wai.get_run(run_id)["config"]["processes"] == 2
    assert not job_processes(job_id) and not _group_members(groups)


@pytest.mark.slow
def test_two_nodes_meet_at_a_loopback_rendezvous_and_train(tiny_sample):
    run = _train(tiny_sample, "sft", steps=2, wait=True, config={"processes": 1, "nodes": 2, "batch_size": 2,
                                                          "holdout_rows": 4, "metric": "loss"})
    _assert_one_run(run, "sft")
    assert run.training["nodes"] == 2 and run.training["processes"] == 1 and run.training["batch_per_device"] == 1


def _gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.gpu
@pytest.mark.slow
def test_two_gpus_train_sft_over_nccl(tiny_sample):
    if _gpus() < 2:
        pytest.skip("needs two CUDA devices")
    run = _train(tiny_sample, "sft", steps=2, wait=True, config={"processes": 2, "batch_size": 4, "holdout_rows": 4,
                                                          "metric": "loss"})
    _assert_one_run(run, "sft")
    assert run.training["device"] == "cuda"
    assert "nccl" in run.summary["trainer"]["config"].get("ddp_backend", "")


@pytest.mark.gpu
@pytest.mark.slow
def test_grpo_generates_with_vllm_on_a_gpu(tiny_sample):
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not installed")
    run = _train(tiny_sample, "grpo", steps=2, wait=True, generations=2, max_completion_length=8,
                 config={"generation_backend": "vllm", "monitor": False, "holdout_rows": 4})
    assert run.status == "done", run.error
    assert run.summary["trainer"]["config"]["use_vllm"] is True


@pytest.mark.gpu
@pytest.mark.slow
def test_grpo_generates_on_a_vllm_server_of_its_own(tiny_sample):
    import importlib.util

    import torch

    if importlib.util.find_spec("vllm") is None or torch.cuda.device_count() < 2:
        pytest.skip("needs vllm and two GPUs: one trains, one serves")
    run = _train(tiny_sample, "grpo", steps=2, wait=True, generations=2, max_completion_length=8,
                 config={"generation_backend": "vllm", "vllm_mode": "server", "monitor": False, "holdout_rows": 4})
    assert run.status == "done", run.error
    assert run.summary["trainer"]["config"]["vllm_mode"] == "server"


@pytest.mark.slow
def test_a_stopped_two_process_run_resumes_on_both_ranks(tiny_sample):
    """Rank 0 writes the checkpoints under the run's folder; both ranks continue from the newest."""
    from whileai.core.paths import last_checkpoint
    from whileai.platform.launcher.jobs import checkpoint_dir

    run = _train(tiny_sample, "sft", steps=8, config={"processes": 2, "batch_size": 4, "holdout_rows": 4, "save_steps": 2})
    deadline = time.monotonic() + 180
    while last_checkpoint(checkpoint_dir(run.id)) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run.stop() == "stopped"
    step = int(last_checkpoint(checkpoint_dir(run.id)).name.split("-")[1])
    assert 0 < step < 8
    resumed = wai.resume(run)
    assert resumed.wait(poll=1, timeout=400) == "done", resumed.error
    record = wai.get_run(run.id)
    assert record["summary"]["training"]["steps"] == 8 and record["summary"]["resumed"]["from_step"] == step
    keys = [(p["step"], name) for p in record["series"] for name in p["metrics"]]
    assert len(keys) == len(set(keys)), "a point was stored twice"
    assert sorted(s for s, name in keys if name == "loss") == list(range(1, 9))
    assert f"[rank 1] resuming from checkpoint-{step}" in job_log(_job_of(run.id)["id"]).read_text()
