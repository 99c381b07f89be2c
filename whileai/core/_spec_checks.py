"""The checks of a spec's plain values that the spec models' rules and the layers above both call: how an effective
batch divides across the processes (:func:`split_problem`) and into micro-batches (:func:`micro_batches`,
:func:`micro_problem`), which methods continue runs (:func:`continues_runs`), and which names are the user's own
code (:func:`is_python_ref`). None of them reads a spec model; ``whileai.core.spec`` re-exports them.
"""

from __future__ import annotations

__all__ = ["PYTHON_PREFIX", "is_python_ref", "split_problem", "continues_runs", "micro_batches", "micro_problem"]

#: How a spec names the user's own code: a reward ``python:MODULE:FUNCTION`` (TRAIN_REWARD_PYTHON_PATTERN) or an
#: environment ``python:MODULE:CLASS``. Spelled here once; the rewards, the environments' loader, the platform's
#: governance of user code and the jobs read it from here.
PYTHON_PREFIX = "python:"


def is_python_ref(name: object) -> bool:
    """Whether ``name`` names the user's own code (it starts with ``python:``; its form is checked where it loads)."""
    return isinstance(name, str) and name.startswith(PYTHON_PREFIX)


def split_problem(name: str, size: int, world: int) -> str | None:
    """Why ``size`` (an effective, global batch) cannot be divided across ``world`` processes, else None.

    The refusal names the sizes that do divide, nearest first, and the other fix.
    """
    if world <= 1 or size % world == 0:
        return None
    below = size - size % world
    near = [n for n in (below, below + world, below + 2 * world) if n > 0]
    return (f"{name}={size} does not divide across {world} processes (processes x nodes): it is the effective batch, "
            f"split evenly over the processes; pass a multiple of {world} ({', '.join(map(str, near))}, ...), "
            f"or a world size that divides {size}")


def continues_runs(method: str) -> bool:
    """Whether a run of ``method`` is a policy: a stage of it continues the latest earlier policy stage on its
    own (``init_from``), and a later run can continue it.

    A reward model (rm) is not: it scores rows and writes none, so nothing continues it, and it starts from the
    base with a fresh score head unless it is told to start from a policy (a run's ``init_from``, a stage's
    ``init_from: stages.NAME``): then its backbone begins as that policy's weights, as InstructGPT's reward
    model began as its SFT model, and the score head is still fresh.
    """
    return method != "rm"


def micro_batches(share: int, cap: int | None) -> tuple[int, int]:
    """``(per-device batch, accumulation steps)`` for one process's ``share`` of the effective batch under ``cap``
    (``batch_per_device``; None: the whole share at once). :func:`micro_problem` says when ``cap`` does not fit."""
    if cap is None or cap >= share:
        return share, 1
    return cap, share // cap


def micro_problem(share: int, cap: int) -> str | None:
    """Why a process's ``share`` of the effective batch cannot be accumulated in micro-batches of ``cap``, else None."""
    if cap < 1 or cap >= share or share % cap == 0:
        return None  # a cap under 1 is its range check's to refuse
    fits = [n for n in range(cap, 0, -1) if share % n == 0][:3]
    return (f"batch_per_device={cap} does not divide a process's share of the effective batch ({share}): its "
            f"micro-batches must add up to the share exactly; pass one that divides {share} "
            f"({', '.join(map(str, fits))}, ...), or change batch_size")
