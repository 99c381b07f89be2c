"""Where a job runs: seeds, CPU threads, the device and the GPU's price key."""

from __future__ import annotations

import random

from whileai.core.launch import split_gpu
from whileai.core.spec import RunSpec

from whileai.jobs import defaults as job_defaults
from whileai.core import defaults as core_defaults

__all__ = ["seed_all", "cpu_threads", "device", "compute_path", "gpu_name", "with_count", "price_key"]


def seed_all(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def cpu_threads() -> None:
    """On a CPU, use JOB_CPU_THREADS torch threads (or $WHILEAI_JOB_THREADS)."""
    import os

    import torch

    if torch.cuda.is_available():
        return
    value = os.environ.get(job_defaults.JOB_CPU_THREADS_ENV, "").strip()
    torch.set_num_threads(int(value) if value.isdigit() and int(value) > 0 else job_defaults.JOB_CPU_THREADS)


def device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def compute_path() -> dict[str, object]:
    """What decides this job's float sums beyond its inputs: torch's CPU kernel path (``cpu_capability``, as
    torch chose it; ``aten_cpu_capability``, the variable that forces it, None when unset), its threads and the
    device, and the processor itself (``cpu``: :func:`cpu_identity`). A result that moves between two runs of one
    spec moves with these first."""
    import os

    import torch

    return {"cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "aten_cpu_capability": os.environ.get("ATEN_CPU_CAPABILITY") or None,
            "threads": torch.get_num_threads(), "device": device(), "torch": torch.__version__,
            "cpu": cpu_identity()}


#: The vector extensions a CPU's kernels are chosen by (oneDNN's and the BLAS's dispatch reads them, beyond the
#: three paths torch names): two processors that agree on torch's path can differ here and round differently.
CPU_VECTOR_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
                    "amx_tile", "amx_bf16", "amx_int8")


def cpu_identity(cpuinfo: str | None = None) -> str | None:
    """The processor as Linux names it: model name, family/model/stepping and which of CPU_VECTOR_FLAGS it has, e.g.
    ``"AMD EPYC (family 25 model 17 stepping 1; avx2 fma avx512f ...)"``; None where ``/proc/cpuinfo`` cannot be
    read (another system). ``cpuinfo`` is the file's text, read when not given."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as file:
                cpuinfo = file.read()
        except OSError:
            return None
    first: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            first.setdefault(key.strip(), value.strip())
    if "model name" not in first:
        return None
    flags = set(first.get("flags", "").split())
    where = " ".join(f"{name} {first[key]}" for name, key in (("family", "cpu family"), ("model", "model"),
                                                               ("stepping", "stepping")) if key in first)
    having = " ".join(flag for flag in CPU_VECTOR_FLAGS if flag in flags)
    return f"{first['model name']} ({where}; {having or 'no avx2'})"


def gpu_name(spec: RunSpec) -> str | None:
    """The GPU the job ran on, in GPU_USD_PER_HOUR's spelling where it has one; None on a CPU.

    On Modal it is the GPU the function was given (``spec.gpu``); on a local
    GPU the device's name, matched against the price table.
    """
    import torch

    if not torch.cuda.is_available():
        return None
    if spec.target == "modal" and spec.gpu:
        name = str(spec.gpu)
    else:
        name = price_key(torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0).total_memory)
    return with_count(name, spec.processes, spec.nodes)


def with_count(gpu: str, processes: int, nodes: int = 1) -> str:
    """``gpu`` as the price table counts it, over every node: ``"H100:16"`` for two nodes of ``"H100:8"``, or for
    eight ranks a node (one GPU each) on two nodes of ``"H100"``; one GPU stays a bare name."""
    name, count = split_gpu(gpu)
    head, per_node = name.partition(":")[0], count or max(1, processes)
    total = per_node * max(1, nodes)
    return head if total == 1 else f"{head}:{total}"


def price_key(device_name: str, memory_bytes: int) -> str:
    """GPU_USD_PER_HOUR's key for a CUDA device name ("NVIDIA H100 80GB HBM3" -> "H100"), else the name.

    Where the table prices one chip at two memory sizes (A100 40 and 80 GB), the
    device's memory picks the row.
    """
    upper = device_name.upper()
    matches = [key for key in core_defaults.GPU_USD_PER_HOUR if key.split("-")[0].upper() in upper]
    if len(matches) > 1:
        gib = memory_bytes / 2**30
        sized = [k for k in matches if "-" in k and k.split("-")[1].upper().endswith("GB")]
        if sized:  # the size nearest the device's memory
            return min(sized, key=lambda k: abs(float(k.split("-")[1][:-2]) - gib))
    return max(matches, key=len) if matches else device_name
