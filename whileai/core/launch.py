"""The one launch function: the command line that runs a job on one node, one process or many.

The local launcher (``whileai.platform.launcher.jobs``), the SLURM definition
(``whileai.jobs.distributed.slurm_submit``) and the Modal clustered function
(``whileai.jobs.modal_app``) all build from :func:`launch_command`.
"""

from __future__ import annotations

import sys

from whileai.core import defaults

__all__ = ["launch_command", "WORKER_MODULE"]

#: the job body's module: what every rank runs
WORKER_MODULE = "whileai.jobs.worker"


def launch_command(job_id: str, *, processes: int = 1, nodes: int = 1, endpoint: str | None = None,
                   rdzv_id: str | None = None, python: str | None = None) -> list[str]:
    """The command that runs job ``job_id`` on one node: its argv.

    One process on one node is the plain worker. Otherwise torchrun starts
    ``processes`` ranks here and meets the other nodes at ``endpoint``
    (``HOST:PORT`` of node 0's c10d store; required past one node) under the
    rendezvous id ``rdzv_id`` (the job id unless given). Example::

        launch_command("job_1", processes=2)
        # [python, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--nnodes", "1", ...]
    """
    python = python or sys.executable
    if processes < 1 or nodes < 1:
        raise ValueError(f"processes={processes}, nodes={nodes}: each is at least 1; pass 1 for one process")
    if processes == 1 and nodes == 1:
        return [python, "-m", WORKER_MODULE, job_id]
    if nodes > 1 and not endpoint:
        raise ValueError(f"nodes={nodes} needs the rendezvous endpoint HOST:PORT of node 0 (endpoint=); "
                         "every node's launcher passes the same one")
    return [python, "-m", "torch.distributed.run",
            "--nproc-per-node", str(processes), "--nnodes", str(nodes),
            "--rdzv-backend", defaults.RDZV_BACKEND,
            "--rdzv-endpoint", endpoint or f"127.0.0.1:{defaults.RDZV_PORT}",
            "--rdzv-id", rdzv_id or job_id,
            "--monitor-interval", str(defaults.MONITOR_INTERVAL_S),
            "--max-restarts", "0",
            "-m", WORKER_MODULE, job_id]


