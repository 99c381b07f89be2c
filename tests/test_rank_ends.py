"""How the ranks of a two-process job end when one of them, or their launcher, is killed: no point rank 0 logged is
lost, and the run names what ended it.

The jobs are real: the platform launches ``torch.distributed.run`` with two worker ranks (gloo on CPU) on the
kit's tiny model; the tests kill a rank or torchrun itself mid-training, as the out-of-memory killer would.
"""

from __future__ import annotations

import os
import signal
import time
import warnings
from pathlib import Path

import pytest

import whileai.simulations as wai
from whileai.jobs import defaults as job_defaults
from whileai.jobs.distributed import rank_records
from whileai.platform.launcher.jobs import job_dir, job_processes
from _job_helpers import job_of as _job_of, wait_for as _wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sets(session_home, push_sample):
    from whileai.kit._base import tiny_model_dir

    found = push_sample("sample-quarter", tasks=100)
    return {**found, "base": str(tiny_model_dir())}


def _start(sets) -> tuple[object, dict]:
    """A long two-process DPO run, once it has stored a few trained steps; the run and its job."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(sets["train"], method="dpo", steps=500, base_model=sets["base"], holdout=sets["holdout"],
                        config={"processes": 2, "batch_size": 2, "holdout_rows": 4})
    _wait_for(lambda: _loss_steps(run) and max(_loss_steps(run)) >= 3, 180, "three trained steps")
    job = _job_of(run.id)
    _wait_for(lambda: len(rank_records(job_dir(job["id"]) / "ranks")) == 2, 30, "both ranks' start records")
    return run, job


def _loss_steps(run) -> list[int]:
    return sorted(p["step"] for p in wai.get_run(run.id)["series"] if "loss" in p["metrics"])


def _rank_pid(job_id: str, rank: int) -> int:
    return int(rank_records(job_dir(job_id) / "ranks")[rank]["pid"])


def _settled(run, job_id: str) -> None:
    _wait_for(lambda: run.refresh().status != "running", 60 + job_defaults.RANK_ORPHAN_GRACE_S, "the run to settle")
    _wait_for(lambda: not job_processes(job_id), 10, "every process of the job to end")


def _no_point_lost(run, job_id: str) -> None:
    """Every step rank 0 logged is stored, each once: its last logged step (its end record) is the run's last."""
    record = rank_records(job_dir(job_id) / "ranks")[0]
    assert "ended" in record, f"rank 0 recorded no end: {record}"
    series = wai.get_run(run.id)["series"]
    keys = [(p["step"], name) for p in series for name in p["metrics"] if name != "epoch"]
    assert len(keys) == len(set(keys)), "a point was stored twice"
    steps = _loss_steps(run)
    assert steps == list(range(1, steps[-1] + 1)), steps
    assert max(p["step"] for p in series) == record["step"], (record, steps[-5:])


def test_a_sigkilled_launcher_leaves_its_ranks_to_flush_and_the_run_names_it(sets):
    run, job = _start(sets)
    os.kill(job["pid"], signal.SIGKILL)
    killed = time.monotonic()
    _settled(run, job["id"])
    assert time.monotonic() - killed < job_defaults.RANK_ORPHAN_GRACE_S + 30
    assert run.status == "crashed", run.error
    assert f"the job process (pid {job['pid']}) ended without reporting" in run.error
    assert "Its launcher ended first: ranks 0, 1 were sent SIGTERM and ended on their own" in run.error
    records = rank_records(job_dir(job["id"]) / "ranks")
    assert all(r["launcher_alive"] is False for r in records.values()), records
    _no_point_lost(run, job["id"])


def test_a_rank_killed_just_before_its_launcher_is_named(sets):
    run, job = _start(sets)
    os.kill(_rank_pid(job["id"], 1), signal.SIGKILL)
    time.sleep(0.2)  # under torchrun's monitor interval: the launcher dies before it can name the rank
    os.kill(job["pid"], signal.SIGKILL)
    _settled(run, job["id"])
    assert run.status == "failed", run.error
    assert run.error.startswith("rank 1 of the job"), run.error
    _no_point_lost(run, job["id"])


def test_a_sigkilled_rank_1_loses_no_point_of_rank_0(sets):
    run, job = _start(sets)
    os.kill(_rank_pid(job["id"], 1), signal.SIGKILL)
    _settled(run, job["id"])
    assert run.status == "failed" and "rank 1 of the job failed (killed by SIGKILL)" in run.error, run.error
    _no_point_lost(run, job["id"])


def test_a_terminated_rank_0_flushes_and_is_named(sets):
    """SIGTERM, the polite kill (a SIGKILLed rank 0 has no chance to send what it buffered)."""
    run, job = _start(sets)
    os.kill(_rank_pid(job["id"], 0), signal.SIGTERM)
    _settled(run, job["id"])
    assert run.status == "failed" and "rank 0 of the job failed" in run.error, run.error
    _no_point_lost(run, job["id"])
    assert Path(job_dir(job["id"]) / "ranks" / "rank-0.json").is_file()
