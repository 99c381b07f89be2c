"""What one SLURM task (one node) of a multi-node job runs: the launch command, pointed at node 0."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping

__all__ = ["NodeTask", "first_node"]


def first_node(environ: Mapping[str, str]) -> str:
    """Node 0's hostname: the first of SLURM's node list (expanded by ``scontrol show hostnames``)."""
    nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if not nodelist:
        raise RuntimeError("not inside a SLURM allocation: SLURM_JOB_NODELIST is not set")
    if "[" not in nodelist and "," not in nodelist:
        return nodelist
    out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True)
    return out.stdout.split()[0]


class NodeTask:
    """A picklable callable submitit runs once per node: torchrun with this node's ranks."""

    def __init__(self, job_id: str, processes: int, nodes: int, port: int):
        self.job_id = job_id
        self.processes = processes
        self.nodes = nodes
        self.port = port

    def command(self, environ: Mapping[str, str]) -> list[str]:
        """The argv this node runs, given the task's environment."""
        from whileai.core.launch import launch_command

        return launch_command(self.job_id, processes=self.processes, nodes=self.nodes,
                              endpoint=f"{first_node(environ)}:{self.port}", rdzv_id=self.job_id)

    def __call__(self) -> int:
        return subprocess.run(self.command(os.environ), check=False).returncode
