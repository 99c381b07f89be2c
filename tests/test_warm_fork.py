"""What the warm process forks from, and how a forked job is known and reported (whileai/platform/launcher/_warm.py,
_warm_process.py, _pids.py).

Forking a process that runs threads copies only the forking thread: a lock another thread held stays held in the
child. The warm process runs no Python thread, and the native threads its imports leave are numpy's OpenBLAS pool
and pyarrow's jemalloc background thread, which both handle a fork themselves; these tests pin that set on the real
warm process and fork with exactly those threads running. A job is known by its pid and start time, so a pid the
kernel has handed to another process is not taken for the job, and a job killed by a signal is reported as such.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from whileai.platform.launcher import _pids, _warm
from whileai.platform.launcher.jobs import _ended_silently, _pid_alive, job_dir
from _job_helpers import warm_ready

#: what ``import numpy, pyarrow`` leaves running besides the main thread, by name
_LIBRARY_THREADS = "import numpy, pyarrow, os; print(' '.join(sorted(open(f'/proc/self/task/{t}/comm').read().strip() for t in os.listdir('/proc/self/task'))))"

_FORK_WITH_THREADS = """
import os, signal, numpy, pyarrow
a = numpy.random.default_rng(0).random((400, 400))
a @ a  # OpenBLAS's pool at work in the parent
kept = pyarrow.array(range(100_000))
assert len(os.listdir('/proc/self/task')) > 1, 'no library thread to fork with'
pid = os.fork()
if pid == 0:
    signal.alarm(60)  # a lock copied held would hang the child: it dies of SIGALRM instead of exiting 0
    b = numpy.random.default_rng(1).random((400, 400))
    assert abs((b @ b).sum() - (b @ b).sum()) < 1e-6
    assert pyarrow.array(range(100_000)).sum().as_py() == kept.sum().as_py()
    os._exit(0)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.slow
def test_the_warm_process_forks_with_no_python_thread_and_only_the_libraries_fork_safe_threads(tiny_sample):
    warm_ready()
    answer = _warm._ping(_warm._home())
    assert answer is not None
    env = {**_warm.launch_env(), "PYTHONPATH": os.pathsep.join(sys.path)}
    alone = subprocess.run([sys.executable, "-c", _LIBRARY_THREADS], capture_output=True, text=True, env=env,
                           timeout=120)
    assert answer["python_threads"] == 1
    # torch's, transformers', TRL's and PEFT's imports add no thread: their pools start on first use, after a fork.
    # No more than numpy and pyarrow alone start: OpenBLAS's pool (its threads are named like the main one) may be
    # smaller in a warm process an earlier test started with fewer threads allowed.
    extra = Counter(answer["native_threads"]) - Counter(alone.stdout.split())
    assert "python" in answer["native_threads"] and not extra, (answer, alone.stdout, alone.stderr)


def test_a_fork_made_while_openblas_and_jemalloc_threads_run_works_in_the_child():
    done = subprocess.run([sys.executable, "-c", _FORK_WITH_THREADS], capture_output=True, text=True, timeout=180,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "2"})
    assert done.returncode == 0 and done.stdout.split()[-1] == "0", done.stderr


def test_a_job_is_its_pid_and_start_time_so_a_reused_pid_is_not_taken_for_it():
    me = os.getpid()
    started = _pids.start_time(me)
    assert started is not None
    assert _pid_alive(me, {"id": "job_x", "platform": {"pid_started": started}})
    # the same pid with another start time: the job's process is gone and the pid is now another's
    assert not _pid_alive(me, {"id": "job_x", "platform": {"pid_started": str(int(started) - 1)}})
    assert _pids.state(me, str(int(started) - 1)) is None


def test_a_job_killed_by_a_signal_is_reported_killed_by_it(home):
    job = {"id": "job_00000000000000aa", "pid": None, "spec": {}}
    job_dir(job["id"]).mkdir(parents=True)
    pid = os.fork()
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    started = _pids.start_time(pid)
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert _pids.state(pid, started) is None
    _pids.note_exit(job_dir(job["id"]), pid, status)  # what the warm process and the cold launcher's reaper do
    job["pid"] = pid
    assert _ended_silently(job).startswith(f"the job process (pid {pid}) was killed by SIGKILL before it could")
    assert _pids.exit_words(3 << 8) == "exited with code 3"
    job["pid"] = pid + 1  # a note of another process says nothing of this one
    assert "ended without reporting" in _ended_silently(job)
