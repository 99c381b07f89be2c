"""GRPO's training episodes chosen by the start policy's own samples (``prompt_filter_pool``): DAPO's dynamic
sampling, done once before training.

A group whose samples are all paid the same has no advantage, so GRPO learns nothing from it; from the kit's SFT
start most groups were such (recipes/MEASUREMENTS.md#agent_tooluse), because GRPO's prompts were tasks the start
already passes every time or never. DAPO (arXiv:2503.14476) over-samples at every step and drops those groups. Here
the start policy plays ``generations`` episodes of each of ``prompt_filter_pool`` training prompts (drawn with the
run's seed) at the run's temperature, TRL's sampling otherwise (top_p 1, no top_k), each reply and the whole episode's
completion within ``max_completion_length`` as the trainer's rollouts are, each episode paid as the trainer pays it,
and GRPO trains only on the prompts whose episodes were not all paid the same. Done once, it costs one pass
over the pool instead of a resample at every step; a prompt the policy masters during the run stays (its groups then
stop teaching, as in plain GRPO).

The pool is played a batch of START_FILTER_BATCH episodes at a time, by the held-out play's machinery
(``_episode_play.play_episodes``), and paid by the rewards the trainer is handed, called as TRL calls a reward in an
environment (``environments=`` and every dataset column). The summary's ``start_filter`` says what was sampled and
what was kept.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from whileai.core.spec import GRPOSpec
from whileai.jobs import defaults
from whileai.jobs._training_fields import StartFilterReport

__all__ = ["start_filtered", "pool_of"]


def pool_of(prompts: Sequence[Mapping[str, Any]], size: int, seed: int) -> list[Mapping[str, Any]]:
    """``size`` of ``prompts`` drawn with ``seed``, in their own order (all of them when there are no more)."""
    if size >= len(prompts):
        return list(prompts)
    picked = sorted(random.Random(seed).sample(range(len(prompts)), size))
    return [prompts[i] for i in picked]


def _play_pool(spec: GRPOSpec, model: Any, tokenizer: Any, factory: Any, starts: list[Mapping[str, Any]],
               reward: Callable[..., list[float]], note: Callable[[str], None] | None) -> list[float]:
    """Every start played once, sampled, a batch at a time, and paid: the rewards, in the starts' order."""
    import torch

    from whileai.jobs._episode_play import paid_scores, play_episodes
    from whileai.jobs._episode_prompts import turn_cap

    sampling = {"temperature": spec.temperature, "top_p": 1.0, "top_k": 0}  # TRL GRPOConfig's top_p and top_k
    torch.manual_seed(spec.seed)  # the trainer seeds itself again when it is built
    paid: list[float] = []
    size = defaults.START_FILTER_BATCH
    for first in range(0, len(starts), size):
        if note is not None:
            note(f"sampling the start's episodes to choose GRPO's prompts: {first}/{len(starts)}")
        batch = starts[first:first + size]
        played = play_episodes(model, tokenizer, factory, batch, turn_cap(spec), spec.max_completion_length,
                               sampling=sampling, budget=spec.max_completion_length)  # the trainer's rollout budget
        paid += paid_scores(reward, batch, played)
    return paid


def start_filtered(spec: GRPOSpec, model: Any, tokenizer: Any, factory: Any, prompts: list[dict[str, Any]],
                   reward: Callable[..., list[float]],
                   note: Callable[[str], None] | None = None) -> tuple[list[dict[str, Any]], StartFilterReport]:
    """``(the prompts GRPO trains on, the report)``: of ``spec.prompt_filter_pool`` prompts drawn from ``prompts`` (TRL's
    dataset rows), those whose ``generations`` episodes sampled from ``model`` were not all paid the same by
    ``reward`` (the trainer's rewards, weighted and summed). Raises, naming what the start did, where none is left.
    ``note`` hears the progress."""
    began = time.monotonic()
    size = int(spec.prompt_filter_pool or len(prompts))
    chosen = pool_of(prompts, size, spec.seed)
    k = spec.generations
    paid = _play_pool(spec, model, tokenizer, factory, [p for p in chosen for _ in range(k)], reward, note)
    kept: list[dict[str, Any]] = []
    same: dict[str, int] = {}
    for i, prompt in enumerate(chosen):
        group = paid[i * k:(i + 1) * k]
        if len(set(group)) > 1:
            kept.append(dict(prompt))
        else:
            same[str(group[0])] = same.get(str(group[0]), 0) + 1
    report: StartFilterReport = {
        "pool": len(chosen), "samples_per_prompt": k, "temperature": spec.temperature, "episodes": len(paid),
        "kept": len(kept), "same_paid": dict(sorted(same.items())),
        "mean_paid": round(sum(paid) / len(paid), 4) if paid else 0.0,
        "seconds": round(time.monotonic() - began, 1)}
    if not kept:
        alike = ", ".join(f"{n} at {value}" for value, n in report["same_paid"].items())
        raise ValueError(f"grpo with prompt_filter_pool={size} found no prompt whose {k} sampled episodes were paid "
                         f"differently: every group of the {len(chosen)} was paid the same ({alike}), so GRPO would "
                         "have nothing to learn from; raise temperature (more varied episodes), generations or "
                         "prompt_filter_pool, or start from another policy (init_from)")
    return kept, report
