"""The warm worker: local jobs forked from one process per data root that has torch, transformers, TRL and PEFT
imported, each still a process of its own.

The jobs are real (the kit's tiny model, a few steps, the platform's own launcher); the warm process is the real
one, started on the session's data root.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

import whileai.simulations as wai
from whileai.platform import defaults
from whileai.core import defaults as core_defaults
from whileai.platform.launcher import _pids, _warm
from whileai.platform.launcher.jobs import job_dir, job_log, job_processes
from _job_helpers import job_of as _job_of, train as _train, wait_for as _wait_for, warm_ready

pytestmark = pytest.mark.slow


@pytest.fixture
def warm(tiny_sample) -> int:
    """The pid of the session data root's warm process, ready."""
    return warm_ready()


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _started(run) -> str:
    """The launcher's line in the job's log: how the job started."""
    job_id = _job_of(run.id)["id"]
    return next(line for line in job_log(job_id).read_text().splitlines() if line.startswith(f"whileai job {job_id}: "))


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _cwd_settles(pid: int, folder: str, timeout: float = 30.0) -> bool:
    """Whether process ``pid`` runs in ``folder`` within ``timeout`` seconds (or ended first, having been there)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if os.readlink(f"/proc/{pid}/cwd") == folder:
                return True
        except OSError:
            return not _alive(pid)  # it ended before it could be read: nothing left to check
        time.sleep(0.05)
    return False


def _own_group_settles(pid: int, timeout: float = 30.0) -> bool:
    """Whether process ``pid`` leads its own process group within ``timeout`` seconds: the row names a forked job's
    pid a moment before the child has called setsid() on a loaded machine."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if os.getpgid(pid) == pid:
            return True
        time.sleep(0.05)
    return False


def _losses(run) -> list[float]:
    series = wai.get_run(run.id)["series"]
    return [p["metrics"]["loss"] for p in sorted(series, key=lambda p: p["step"]) if "loss" in p["metrics"]]


def test_a_sigkilled_job_ends_alone_and_the_next_job_forks_from_the_same_warm_process(tiny_sample, warm):
    run = _train(tiny_sample, "dpo", steps=500, config={"holdout_rows": 4})
    job = _job_of(run.id)
    assert "forked from the warm worker" in _started(run)
    assert _parent(job["pid"]) == warm and _own_group_settles(job["pid"])  # its own pid, session and group
    # known by its pid and start time on its row, not by its command line (the warm process's)
    assert job["platform"]["pid_started"] == _pids.start_time(job["pid"]) and job_processes(job["id"]) == []
    _wait_for(lambda: _job_of(run.id)["heartbeat_at"] is not None, 120, "the forked worker's first heartbeat")
    os.kill(job["pid"], signal.SIGKILL)
    _wait_for(lambda: run.refresh().status != "running", 30, "the kill to be noticed")
    assert run.status == "crashed" and f"(pid {job['pid']}) was killed by SIGKILL" in run.error, run.error
    assert _alive(warm) and _warm.warm_pid() == warm
    after = _train(tiny_sample, "sft", steps=2, wait=True, config={"holdout_rows": 4, "metric": "loss"})
    assert after.status == "done", after.error
    assert f"forked from the warm worker (pid {warm})" in _started(after)


def test_a_forked_job_is_known_by_its_pid_and_start_time_from_the_launchs_answer(tiny_sample, warm, tmp_path):
    """The answer carries the fork's start time, read before the warm process can reap it: a job that has already
    failed reads as gone, one that runs as alive, whatever its command line says."""
    from whileai.core.launch import WORKER_MODULE
    from whileai.platform.launcher.jobs import _pid_alive

    env = _warm.launch_env()
    for i in range(3):  # no job of these ids exists: each worker fails at once and notes how it ended
        job_id = f"job_{i:016x}"
        forked, how = _warm.start_job([sys.executable, "-m", WORKER_MODULE, job_id], env, tmp_path,
                                      tmp_path / f"{job_id}.log")
        assert forked is not None and forked.started is not None, how
        row = {"id": job_id, "platform": {"pid_started": forked.started}}
        pid = forked.pid
        _wait_for(lambda: not _pid_alive(pid, row), 120, "the worker of no job to end")  # noqa: B023 - waited here
        _wait_for(lambda: _pids.ended_how(tmp_path, pid) is not None, 30, "its end noted")  # noqa: B023
        assert _pids.ended_how(tmp_path, forked.pid) == "exited with code 1"
    assert _warm.warm_pid() == warm


def test_concurrent_forked_jobs_share_no_state_and_train_as_a_cold_job_does(tiny_sample, warm, monkeypatch):
    config = {"holdout_rows": 4, "metric": "loss", "batch_size": 4}
    first = _train(tiny_sample, "sft", steps=3, seed=3, config=config)
    second = _train(tiny_sample, "sft", steps=3, seed=3, learning_rate=1e-3, config=config)  # another config: another run
    jobs = [_job_of(first.id), _job_of(second.id)]
    assert jobs[0]["pid"] != jobs[1]["pid"] and all(_parent(j["pid"]) == warm for j in jobs if _alive(j["pid"]))
    for job in jobs:  # each in its own folder while it runs (the fork's first step: on a loaded machine the row can
        # name the pid a moment before the child has moved there, so its folder is awaited, not read once)
        assert _cwd_settles(job["pid"], str(job_dir(job["id"]))), f"job {job['id']} never ran in its own folder"
    assert first.wait(poll=1, timeout=600) == "done", first.error
    assert second.wait(poll=1, timeout=600) == "done", second.error
    assert first.adapter != second.adapter
    monkeypatch.setenv(defaults.WARM_WORKER_ENV, "0")
    cold = _train(tiny_sample, "sft", steps=3, seed=3, wait=True, config=config)
    assert cold.status == "done", cold.error
    assert "started cold: the warm worker is off" in _started(cold)
    # the same seed and data give the same curve forked as cold: nothing of the warm process's state leaks in
    assert _losses(first) == pytest.approx(_losses(cold), rel=1e-5) and len(_losses(first)) == 3
    assert _losses(second) != _losses(first)


def test_a_stopped_forked_job_ends_and_the_warm_process_lives_on(tiny_sample, warm):
    run = _train(tiny_sample, "dpo", steps=500, config={"holdout_rows": 4})
    job = _job_of(run.id)
    assert "forked from the warm worker" in _started(run)
    _wait_for(lambda: _job_of(run.id)["heartbeat_at"] is not None, 120, "the forked worker's first heartbeat")
    run.stop()
    assert run.refresh().status == "stopped"
    assert not job_processes(job["id"]) and not _alive(job["pid"])
    assert _warm.warm_pid() == warm


def test_a_torchrun_job_starts_cold_and_its_log_says_why(tmp_path):
    from whileai.platform.launcher.jobs import _start_warm, local_commands

    forked, how = _start_warm(local_commands("job_0", {"processes": 2}), dict(os.environ), tmp_path, tmp_path / "log")
    assert forked is None and how.startswith("started cold: torchrun starts each rank")


def test_the_job_start_benchmark_prints_both_ratios_at_its_tiny_size(tiny_sample, warm):
    """benchmarks/job_start.py at its CI size, on the session's data root (its bases built, its warm process ready)."""
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "benchmarks/job_start.py", "--size", "tiny", "--home",
                           os.environ["WHILEAI_HOME"]], cwd=root, capture_output=True, text=True, timeout=1200)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]  # 1: a target missed, on a busy CI
    figures = json.loads(done.stdout[done.stdout.index("{"):])
    print(json.dumps(figures, indent=1))
    assert figures["ratio_warm_first_step_over_import"] > 0 and figures["ratio_quick_recipe_over_import"] > 0
    assert "forked from the warm worker" in figures["warm_started"]
    # --home: the benchmark leaves the data root's warm process running (a fresh one where the first idled out)
    assert _warm.warm_pid() is not None


def test_a_new_install_starts_a_fresh_warm_process(tiny_sample, warm, monkeypatch):
    real = _warm.fingerprint
    monkeypatch.setattr(_warm, "fingerprint", lambda env=None: "another install " + real(env))
    moved = _train(tiny_sample, "dpo", steps=500, config={"holdout_rows": 4})
    assert "started cold: the warm worker was of an older install" in _started(moved)
    moved.stop()
    _wait_for(lambda: not _alive(warm), 30, "the old warm process to exit")
    fresh = warm_ready()
    assert fresh is not None and fresh != warm
    again = _train(tiny_sample, "sft", steps=2, wait=True, config={"holdout_rows": 4, "metric": "loss"})
    assert f"forked from the warm worker (pid {fresh})" in _started(again)
    monkeypatch.undo()
    _warm.shutdown()  # this one's fingerprint was made up: the next launch would only find it stale
    _wait_for(lambda: not _alive(fresh), 30, "the made-up warm process to exit")
    time.sleep(0.1)


def test_another_data_root_naming_the_same_warm_home_forks_from_that_process_into_its_own_root(tiny_sample, warm, tmp_path,
                                                                                             monkeypatch, push_sample):
    """WARM_HOME_ENV: a second data root starts its jobs from the session's warm process (no second one is
    started), and the forked job's store, folders and records are its own data root's, not the warm home's."""
    other = tmp_path / "other-root"
    other.mkdir()
    monkeypatch.setenv(core_defaults.HOME_ENV, str(other))
    monkeypatch.setenv(defaults.SERVE_DIRS_ENV, str(Path(tiny_sample["base"]).parent))  # the base built in the session's root
    assert os.environ[defaults.WARM_HOME_ENV] != str(other)
    moved = push_sample("other-root", tasks=100)
    run = wai.train(moved["passes"], method="sft", base_model=tiny_sample["base"], holdout=moved["holdout"], steps=2,
                    wait=True, config={"holdout_rows": 4, "metric": "loss"})
    assert run.status == "done", run.error
    assert f"forked from the warm worker (pid {warm})" in _started(run)
    job_id = _job_of(run.id)["id"]
    assert job_dir(job_id).is_relative_to(other) and job_log(job_id).is_file()
    assert not (other / "warm").exists()  # no warm process of its own was started for it
    assert _warm.warm_pid() == warm
