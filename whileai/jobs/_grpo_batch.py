"""GRPO's batch shape: how a step's prompts divide across processes and into micro-batches of whole groups.

Read by both GRPO jobs (single-turn prompts in ``grpo``, whole episodes in ``_episodes``), so a spec trains the
same shape whichever it is.
"""

from __future__ import annotations

from whileai.core import defaults as core_defaults
from whileai.core.spec import GRPOSpec

__all__ = ["prompts_per_rank", "batch_shape"]


def prompts_per_rank(per_step: int, world_size: int, prompts: int,
                      configured: int = int(core_defaults.TRAIN_GRPO_PROMPTS_PER_STEP)) -> int:
    """Each process's prompts per optimizer step: the effective ``per_step`` divided across ``world_size``.

    A step's worth capped by the data (fewer prompts than ``configured``, the spec's ``prompts_per_step``) is
    rounded down to a multiple of the world size; the configured size that does not divide is refused, naming
    those that do.
    """
    if world_size <= 1:
        return per_step
    if per_step % world_size and per_step == configured:
        from whileai.core.spec import split_problem

        raise ValueError(str(split_problem("prompts_per_step", per_step, world_size)))
    if per_step < world_size:
        raise ValueError(f"grpo has {prompts} prompts to train on, fewer than the {world_size} processes that each "
                         f"need one per step; push more tasks with mixed outcomes, or use {max(1, prompts)} "
                         "processes or fewer")
    return (per_step - per_step % world_size) // world_size


def batch_shape(spec: GRPOSpec, prompts: int) -> tuple[int, int, int]:
    """``(per_step, per_rank, micro)``: the prompts per optimizer step over all processes, per process, and per
    micro-batch on a device (a divisor of ``per_rank``, whole groups of ``generations`` completions)."""
    # a set with fewer prompts than a step's worth steps on all of them (accumulating past the data makes no step)
    per_step = max(1, min(spec.prompts_per_step, prompts))
    per_rank = prompts_per_rank(per_step, spec.world_size, prompts, spec.prompts_per_step)
    micro = max(1, min(per_rank, int(core_defaults.TRAIN_GRPO_PROMPTS_PER_MICROBATCH)))
    if spec.batch_per_device is not None:  # a device holds at most this many completions: whole groups of them
        micro = max(1, min(micro, spec.batch_per_device // spec.generations))
    if per_rank % micro:
        micro = max(n for n in range(micro, 0, -1) if per_rank % n == 0)  # whole micro-batches of prompts
    return per_rank * spec.world_size, per_rank, micro
