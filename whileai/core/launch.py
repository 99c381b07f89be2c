"""The one launch function: the command line that runs a job on one node, one process or many.

The local launcher (``whileai.platform.launcher.jobs``), the SLURM definition
(``whileai.jobs.distributed.slurm_submit``) and the Modal clustered function
(``whileai.jobs.modal_app``) all build from :func:`launch_command`. :func:`machine_problems` says, before
anything loads, what of a spec this machine cannot run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import importlib.util
import sys

from whileai.core import defaults
from whileai.core.spec import GRPOSpec, RunSpec

__all__ = ["launch_command", "machine_problems", "split_gpu", "rank_records", "WORKER_MODULE"]

#: the job body's module: what every rank runs
WORKER_MODULE = "whileai.jobs.worker"


def split_gpu(gpu: str) -> tuple[str, int | None]:
    """A GPU as Modal and the price table spell it, split into its name and count: ``"H100:8"`` is
    ``("H100", 8)``; a bare name, or a count that is not a positive whole number, has count None."""
    head, _, tail = gpu.partition(":")
    count = int(tail) if tail.strip().isdigit() and int(tail) > 0 else None
    return (head, count) if count is not None else (gpu, None)


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


def machine_problems(spec: RunSpec, *, cuda: bool | None = None, devices: int | None = None) -> list[str]:
    """What in ``spec`` this machine cannot run, each naming why and the fix; empty when it can.

    Checked before anything loads: a strategy without its engine, vLLM without a GPU,
    more processes per node than GPUs. One process ignores ``strategy``.
    """
    vllm = isinstance(spec, GRPOSpec) and spec.generation_backend == "vllm"
    if spec.world_size <= 1 and not vllm:
        return []  # one process on HF generate runs wherever the job runs
    if cuda is None or devices is None:
        import torch

        cuda = torch.cuda.is_available() if cuda is None else cuda
        devices = (torch.cuda.device_count() if cuda else 0) if devices is None else devices
    problems = []
    if spec.world_size > 1:
        if spec.strategy in ("zero2", "zero3") and importlib.util.find_spec("deepspeed") is None:
            problems.append(f"strategy={spec.strategy!r} runs on DeepSpeed, which is not installed here; "
                            "`pip install deepspeed` on a GPU machine, or use strategy='ddp'")
        if spec.strategy in ("fsdp", "zero2", "zero3") and not cuda:
            problems.append(f"strategy={spec.strategy!r} shards the model over GPUs and this machine has no CUDA "
                            "device (on a CPU only gloo's ddp runs); use strategy='ddp' here, or run on GPUs")
        if cuda and devices and spec.processes > devices:
            problems.append(f"processes={spec.processes} is more than this node's {devices} GPUs (nccl needs one "
                            f"each); pass processes={devices} or fewer")
    if vllm:
        if not cuda:
            problems.append("generation_backend='vllm' needs a CUDA GPU (vLLM does not generate on a CPU); use "
                            "generation_backend='hf' here")
        elif importlib.util.find_spec("vllm") is None:
            problems.append("generation_backend='vllm' needs vllm installed (`pip install vllm`); or use 'hf'")
        server = isinstance(spec, GRPOSpec) and spec.vllm_server
        if cuda and server and devices is not None and devices <= spec.processes:
            problems.append(f"vllm_mode='server' runs vLLM on a GPU of its own on node 0, and processes="
                            f"{spec.processes} takes all {devices} of its GPUs; pass processes={max(1, devices - 1)}, "
                            "or vllm_mode='colocate'")
    return problems


def rank_records(folder: Path) -> dict[int, dict[str, Any]]:
    """Every rank's record in ``folder``, by rank (:func:`mark_rank`); empty where there is none."""
    import json

    found: dict[int, dict[str, Any]] = {}
    for path in sorted(folder.glob("rank-*.json")) if folder.is_dir() else []:
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and isinstance(record.get("rank"), int):
            found[record["rank"]] = record
    return found
