"""How the ranks of a two-process job end when one of them, or their launcher, is killed: no point rank 0 logged is
lost, and the run names what ended it.

The jobs are real: the platform launches ``torch.distributed.run`` with two worker ranks (gloo on CPU) on the
kit's tiny model; the tests kill a rank or torchrun itself mid-training, as the out-of-memory killer would.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

import whileai.simulations as wai
from whileai.jobs import defaults as job_defaults
from whileai.jobs.distributed import rank_records
from whileai.platform.launcher.jobs import job_dir, job_processes
from _job_helpers import job_of as _job_of, train as _train, wait_for as _wait_for

pytestmark = pytest.mark.slow


def _start(tiny_sample) -> tuple[object, dict]:
    """A long two-process DPO run, once it has stored a few trained steps; the run and its job."""
    run = _train(tiny_sample, "dpo", steps=500, config={"processes": 2, "batch_size": 2, "holdout_rows": 4})
    _wait_for(lambda: _loss_steps(run) and max(_loss_steps(run)) >= 3, 180, "three trained steps")
    job = _job_of(run.id)
    _wait_for(lambda: len(rank_records(job_dir(job["id"]) / "ranks")) == 2, 30, "both ranks' start records")
    return run, job


def _loss_steps(run) -> list[int]:
    return sorted(p["step"] for p in wai.get_run(run.id)["series"] if "loss" in p["metrics"])


def _rank_pid(job_id: str, rank: int) -> int:
    return int(rank_records(job_dir(job_id) / "ranks")[rank]["pid"])


def _kill_and_settle(run, job: dict, *kills: tuple[int | None, signal.Signals]) -> float:
    """Send each ``(rank, signal)`` in turn (rank None: the launcher, torchrun's own process), 0.2 s apart (under
    torchrun's monitor interval, so a launcher killed next dies before it can name the rank); wait for the run to
    settle and every process of the job to end. Seconds from the last signal to the run settling."""
    for index, (rank, sig) in enumerate(kills):
        if index:
            time.sleep(0.2)
        os.kill(job["pid"] if rank is None else _rank_pid(job["id"], rank), sig)
    killed = time.monotonic()
    _wait_for(lambda: run.refresh().status != "running", 60 + job_defaults.RANK_ORPHAN_GRACE_S, "the run to settle")
    took = time.monotonic() - killed
    _wait_for(lambda: not job_processes(job["id"]), 10, "every process of the job to end")
    return took


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


def test_a_sigkilled_launcher_leaves_its_ranks_to_flush_and_the_run_names_it(tiny_sample):
    run, job = _start(tiny_sample)
    took = _kill_and_settle(run, job, (None, signal.SIGKILL))
    assert took < job_defaults.RANK_ORPHAN_GRACE_S + 30
    assert run.status == "crashed", run.error
    assert f"the job process (pid {job['pid']}) was killed by SIGKILL" in run.error
    assert "Its launcher ended first: ranks 0, 1 were sent SIGTERM and ended on their own" in run.error
    records = rank_records(job_dir(job["id"]) / "ranks")
    assert all(r["launcher_alive"] is False for r in records.values()), records
    _no_point_lost(run, job["id"])


def test_a_rank_killed_just_before_its_launcher_is_named(tiny_sample):
    run, job = _start(tiny_sample)
    _kill_and_settle(run, job, (1, signal.SIGKILL), (None, signal.SIGKILL))
    assert run.status == "failed", run.error
    assert run.error.startswith("rank 1 of the job"), run.error
    _no_point_lost(run, job["id"])


@pytest.mark.parametrize("rank, sig, error", [
    (1, signal.SIGKILL, "rank 1 of the job failed (killed by SIGKILL)"),
    (0, signal.SIGTERM, "rank 0 of the job failed"),  # the polite kill: a SIGKILLed rank 0 cannot send what it buffered
], ids=["sigkilled-rank-1", "terminated-rank-0"])
def test_a_killed_rank_is_named_and_loses_no_point_of_rank_0(tiny_sample, rank, sig, error):
    run, job = _start(tiny_sample)
    _kill_and_settle(run, job, (rank, sig))
    assert run.status == "failed" and error in run.error, run.error
    _no_point_lost(run, job["id"])
    assert (job_dir(job["id"]) / "ranks" / "rank-0.json").is_file()
