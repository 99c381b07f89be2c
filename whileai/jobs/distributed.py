"""Past one process: the launch command, the rank a process is, and what this machine can run.

:func:`launch_command` is the one place a job's command line is built: the plain
``python -m whileai.jobs.worker JOB_ID`` for one process on one node (the default,
exactly what ran before), else ``python -m torch.distributed.run`` with torchrun's c10d
rendezvous. The local launcher, the SLURM definition (:func:`slurm_submit`, one task
per node) and the Modal clustered function (``whileai.jobs.modal_app``) all build
from it, so a command that works here is the one they run.

Inside a job, :func:`world` says which rank this process is; only rank 0 writes the
run. :func:`machine_problems` refuses, before anything loads, what this machine
cannot run (a DeepSpeed strategy without deepspeed, nccl or vLLM without CUDA).
"""

from __future__ import annotations

import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from whileai.core import defaults as core_defaults
from whileai.core.launch import rank_records  # noqa: F401  (re-exported: the ranks write what it reads)
from whileai.core.launch import WORKER_MODULE, launch_command, machine_problems
from whileai.jobs import defaults as job_defaults

__all__ = ["launch_command", "World", "world", "machine_problems", "split_batch", "prefix_output",
           "end_with_parent", "launcher_gone", "kill_after", "mark_rank", "rank_records", "slurm_submit",
           "WORKER_MODULE"]

#: the pid of this rank's launcher, read when the rank tied itself to it (None before, and outside torchrun)
_LAUNCHER: int | None = None

@dataclass(frozen=True)
class World:
    """Which process of the job this is: global rank, rank on its node, and how many there are."""

    rank: int = 0
    local_rank: int = 0
    size: int = 1

    @property
    def first(self) -> bool:
        """Rank 0: the process that writes the run and saves the adapter."""
        return self.rank == 0


def world(environ: dict[str, str] | None = None) -> World:
    """This process's place in the job, from torchrun's environment (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``)."""
    env = os.environ if environ is None else environ
    return World(rank=int(env.get("RANK", "0")), local_rank=int(env.get("LOCAL_RANK", "0")),
                 size=int(env.get("WORLD_SIZE", "1")))


def split_batch(size: int, world_size: int) -> int:
    """The per-process batch of an effective ``size`` over ``world_size`` processes; ValueError naming the
    sizes that divide when it does not."""
    from whileai.core.spec import split_problem

    problem = split_problem("batch_size", size, world_size)
    if problem:
        raise ValueError(problem)
    return size // world_size


class _Prefixed(io.TextIOBase):
    """A text stream that starts every line it writes with ``prefix``."""

    def __init__(self, stream: TextIO, prefix: str):
        self._stream = stream
        self._prefix = prefix
        self._at_start = True

    def write(self, text: str) -> int:
        out = []
        for piece in text.splitlines(keepends=True):
            if self._at_start:
                out.append(self._prefix)
            out.append(piece)
            self._at_start = piece.endswith("\n")
        self._stream.write("".join(out))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return False


def prefix_output(rank: int) -> None:
    """Prefix this process's stdout and stderr lines with its rank (RANK_LOG_PREFIX); rank 0 stays bare."""
    if rank == 0:
        return
    prefix = job_defaults.RANK_LOG_PREFIX.format(rank=rank)
    sys.stdout = _Prefixed(sys.stdout, prefix)
    sys.stderr = _Prefixed(sys.stderr, prefix)


def end_with_parent() -> None:
    """Ask Linux to send this process SIGTERM when its launcher dies (``PR_SET_PDEATHSIG``), so no rank outlives it.

    torchrun starts each rank in a session of its own, out of reach of a signal to the launcher's
    group; this ties them back. SIGTERM, not SIGKILL: the rank's handler sees :func:`launcher_gone`,
    arms :func:`kill_after` (RANK_ORPHAN_GRACE_S) and ends the job body, so rank 0 still flushes its
    points and every rank records how it ended (:func:`mark_rank`). Call it after the SIGTERM handler
    is installed: a launcher already gone sends the signal at once. Elsewhere than Linux it does nothing.
    """
    global _LAUNCHER
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    _LAUNCHER = os.getppid()
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, int(signal.SIGTERM))  # 1 = PR_SET_PDEATHSIG
    except OSError:
        return
    if os.getppid() != _LAUNCHER or _LAUNCHER == 1:  # the launcher died before the request took hold
        os.kill(os.getpid(), signal.SIGTERM)


def launcher_gone(wait: float = 0.0) -> bool:
    """Whether the launcher this rank was tied to (:func:`end_with_parent`) has died or is dying, watching it up to
    ``wait`` seconds: the kernel's signal can come while the dying launcher is still this rank's parent (it is sent
    when the thread that started the rank ends, before the launcher's last thread has)."""
    import time

    if _LAUNCHER is None:
        return False
    deadline = time.monotonic() + wait
    while True:
        if os.getppid() != _LAUNCHER or _LAUNCHER == 1:
            return True
        try:
            state = Path(f"/proc/{_LAUNCHER}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def kill_after(seconds: float) -> None:
    """SIGKILL this process ``seconds`` from now, from a daemon thread: the end of an orphaned rank's grace."""
    import signal
    import threading
    import time

    def end() -> None:
        time.sleep(seconds)
        print(f"ended: the {seconds:g} s a rank has after its launcher's death (RANK_ORPHAN_GRACE_S) ran out",
              file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=end, name="whileai-rank-grace", daemon=True).start()


def mark_rank(folder: Path, rank: int, **fields: Any) -> None:
    """Add ``fields`` to rank ``rank``'s record in ``folder`` (``rank-<N>.json``, replaced whole, never torn).

    Each rank writes one when it starts (its pid) and when it ends (how, whether its launcher still ran,
    rank 0's last logged step): a rank that started and never wrote its end was killed without a word, which
    is how the platform names it when the launcher died before it could (:func:`rank_records`).
    """
    import json

    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"rank-{rank}.json"
    record = rank_records(folder).get(rank, {})
    record.update(fields, rank=rank)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(record, default=str))
    os.replace(temporary, path)


def slurm_submit(job_id: str, *, processes: int, nodes: int, executor: Any, port: int | None = None) -> Any:
    """Submit job ``job_id`` through a submitit ``executor``: one task per node, each running the launch command.

    Node 0's hostname is read from SLURM's node list when the task starts
    (``scontrol show hostnames``), so every node's torchrun meets at the same
    endpoint. ``executor`` is a ``submitit.AutoExecutor`` (its folder and partition
    the caller's); returns the submitit job.
    """
    from whileai.jobs import _slurm

    executor.update_parameters(nodes=nodes, tasks_per_node=1, slurm_job_name=f"whileai-{job_id}")
    return executor.submit(_slurm.NodeTask(job_id, processes, nodes, port or core_defaults.RDZV_PORT))
