"""Where a job runs: seeds, CPU threads, the device and the GPU's price key."""

from __future__ import annotations

import functools
import random
from typing import Any, TypedDict

from whileai.core.launch import split_gpu
from whileai.core.spec import RunSpec

from whileai.jobs import defaults as job_defaults
from whileai.core import defaults as core_defaults

__all__ = ["seed_all", "cpu_threads", "device", "compute_path", "blas_branch", "pin_blas_branch", "gpu_name",
           "with_count", "price_key"]


def seed_all(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def cpu_threads() -> None:
    """On a CPU, use JOB_CPU_THREADS torch threads (or $WHILEAI_JOB_THREADS), with MKL pinned to its
    instruction set's branch (``pin_blas_branch``)."""
    import os

    import torch

    if torch.cuda.is_available():
        return
    value = os.environ.get(job_defaults.JOB_CPU_THREADS_ENV, "").strip()
    torch.set_num_threads(int(value) if value.isdigit() and int(value) > 0 else job_defaults.JOB_CPU_THREADS)
    pin_blas_branch()


class BlasBranch(TypedDict):
    """Which of MKL's code branches a job's matrix products took (``blas_branch``)."""

    branch: str  # the branch in effect (MKL_BRANCH_NAMES), or "auto" where none is set
    processor: str  # the branch MKL would pick for this processor by itself
    set_by: str | None  # "whileai" (the job's pin), "MKL_CBWR=VALUE" (the environment), None: none set


@functools.cache
def _mkl() -> Any:
    """torch's MKL, linked into its CPU library, through ctypes, loaded once a process; None where torch has none
    (an ARM wheel, a build on another BLAS) or does not export its service functions."""
    import ctypes
    import os

    import torch

    if not torch.backends.mkl.is_available():  # type: ignore[no-untyped-call]
        return None
    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
        for name in ("mkl_serv_cbwr_get", "mkl_serv_cbwr_set", "mkl_serv_cbwr_get_auto_branch"):
            getattr(lib, name)
    except (OSError, AttributeError):
        return None
    return lib


def _branch_name(code: int) -> str:
    return job_defaults.MKL_BRANCH_NAMES.get(code, f"branch {code}")


def pin_blas_branch() -> BlasBranch | None:
    """Pin MKL to the branch of its instruction set's class (MKL_PINNED_BRANCH: AVX512 for any AVX-512 Intel
    processor), so a product sums alike on two processors of one class, unless $MKL_CBWR chose a branch already.
    It holds only when set before MKL's first product in the process: later, MKL keeps its branch, and the record
    says none was set. Returns ``blas_branch()``."""
    import os

    lib = _mkl()
    if lib is None:
        return None
    pin = job_defaults.MKL_PINNED_BRANCH.get(int(lib.mkl_serv_cbwr_get_auto_branch()))
    if pin is not None and not os.environ.get(job_defaults.MKL_BRANCH_ENV):
        lib.mkl_serv_cbwr_set(pin)  # 0, or -8 once MKL has run under another branch (then it keeps that one)
    return blas_branch()


def blas_branch() -> BlasBranch | None:
    """Which branch MKL runs in this process and who set it (None where torch has no MKL)."""
    import os

    lib = _mkl()
    if lib is None:
        return None
    code, env = int(lib.mkl_serv_cbwr_get(1)), os.environ.get(job_defaults.MKL_BRANCH_ENV)
    unset = code == 1  # MKL_CBWR_BRANCH_OFF: MKL picks per processor
    return {"branch": "auto" if unset else _branch_name(code),
            "processor": _branch_name(int(lib.mkl_serv_cbwr_get_auto_branch())),
            "set_by": f"{job_defaults.MKL_BRANCH_ENV}={env}" if env else (None if unset else "whileai")}


def device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def compute_path() -> dict[str, object]:
    """What decides this job's float sums beyond its inputs: torch's CPU kernel path (``cpu_capability``, as
    torch chose it; ``aten_cpu_capability``, the variable that forces it, None when unset), its threads and the
    device, the processor itself (``cpu``: :func:`cpu_identity`) and the branch its BLAS ran (``blas``:
    :func:`blas_branch`, which torch's path does not choose). A result that moves between two runs of one
    spec moves with these first."""
    import os

    import torch

    return {"cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "aten_cpu_capability": os.environ.get("ATEN_CPU_CAPABILITY") or None,
            "threads": torch.get_num_threads(), "device": device(), "torch": torch.__version__,
            "cpu": cpu_identity(), "blas": blas_branch()}


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
