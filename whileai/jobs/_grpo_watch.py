"""What GRPO's sampled groups looked like: the sampled pass rate and the share of mixed groups, per step.

GRPO learns only from groups whose completions disagree (a pass and a fail under
one prompt, or different scores under a graded reward); a unanimous group has
zero advantage. The held-out rate is measured greedily, so a policy can pass
greedy held-out prompts while its sampled replies (the ones GRPO trains on)
nearly all fail, and then nothing moves. The watch reads TRL's own per-step
figures and adds them to the step's log under plain names, so the run's series
carry ``sampled_pass_rate`` (the exact first-action judge's mean over the step's
completions; in an environment, the episode judge's) and ``mixed_groups``
(1 - ``frac_reward_zero_std``: the groups whose paid reward varied). Where the
paid reward is the exact judge alone, the pass rate is TRL's ``reward``;
otherwise it is the exact judge's own verdicts (``exact_key``: the run's
``first_action`` term's column, or the episode judge's beside a per-turn reward;
or ``tally``, filled by an unpaid judge of the same completions,
``_rewards.tallied``), and the paid reward's mean is logged beside it as
``sampled_reward``: a graded reward's mean (or the episode judge plus a weighted
per-turn score) is not a pass rate, and the two part when the policy learns to
please the reward instead of doing the task.
Its ``summary()`` goes on the run's training summary, with a note when nearly
every group was unanimous (``core_defaults.TRAIN_GRPO_MIN_MIXED_SHARE``).
"""

from __future__ import annotations

from typing import Any, TypedDict

from whileai.core import defaults as core_defaults

__all__ = ["group_watch", "GroupStats", "Span"]


class Span(TypedDict):
    """A per-step series summed up: its first, last and mean value, each to three places."""

    first: float
    last: float
    mean: float


class GroupStats(TypedDict, total=False):
    """What the watch adds to the run's training summary: each series' span, and ``groups_note`` when nearly
    every group was unanimous. Empty before the first logged step."""

    mixed_groups: Span
    sampled_pass_rate: Span
    sampled_reward: Span  # where the paid reward is not the exact judge alone
    groups_note: str


def group_watch(exact_key: str | None = None, tally: list[float] | None = None) -> Any:
    """A ``transformers.TrainerCallback`` that logs and sums up the sampled groups (see the module docstring).

    Where the paid reward is not the exact judge alone, ``exact_key`` is the log
    key of the exact judge's per-step mean (``"rewards/first_action/mean"``; in an environment with a per-turn
    reward, the episode judge's ``"rewards/episode_judge/mean"``), or
    ``tally`` the exact verdicts of the completions since the last log (emptied at
    each). Both None: the paid reward is the exact judge. Put it before the run's
    own callback, so the figures it adds to a step's log reach the run in the same point.
    """
    from transformers import TrainerCallback

    class GroupWatch(TrainerCallback):
        def __init__(self) -> None:
            self.pass_rates: list[float] = []
            self.rewards: list[float] = []
            self.mixed: list[float] = []

        # a step's log, as transformers types it (Trainer.log); the watch adds its figures to it
        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, float] | None = None,
                   **kwargs: Any) -> None:
            if not logs or "reward" not in logs or logs.get("frac_reward_zero_std") is None:
                return
            try:
                paid, mixed = float(logs["reward"]), 1.0 - float(logs["frac_reward_zero_std"])
            except (TypeError, ValueError):
                return
            rate = self._exact_rate(logs, paid)
            logs["mixed_groups"] = mixed
            self.mixed.append(mixed)
            if rate is not None:  # None: the exact judge gave no verdict this step (the step still counts its groups)
                logs["sampled_pass_rate"] = rate
                self.pass_rates.append(rate)
            if exact_key is not None or tally is not None:
                logs["sampled_reward"] = paid
                self.rewards.append(paid)

        def _exact_rate(self, logs: dict[str, float], paid: float) -> float | None:
            """The exact judge's mean over the step's completions (see group_watch), or None without a verdict."""
            if tally is not None:
                rate = sum(tally) / len(tally) if tally else None
                tally.clear()
                return rate
            if exact_key is None:
                return paid
            try:
                return float(logs[exact_key])
            except (KeyError, TypeError, ValueError):
                return None

        def summary(self) -> GroupStats:
            """``sampled_pass_rate`` and ``mixed_groups`` (first, last, mean over steps), and a note when unanimous."""
            return _summary(self.pass_rates, self.rewards, self.mixed)

    return GroupWatch()


def _span(values: list[float]) -> Span:
    """The first, last and mean of a per-step series, each to three places."""
    return {"first": round(values[0], 3), "last": round(values[-1], 3),
            "mean": round(sum(values) / len(values), 3)}


def _summary(pass_rates: list[float], rewards: list[float], mixed: list[float]) -> GroupStats:
    """The watch's summary of its per-step series (empty before the first logged step): each series' span, and
    ``groups_note`` when the mean share of mixed groups is under ``core_defaults.TRAIN_GRPO_MIN_MIXED_SHARE``."""
    if not mixed:
        return {}
    out: GroupStats = {"mixed_groups": _span(mixed)}
    if pass_rates:
        out["sampled_pass_rate"] = _span(pass_rates)
    if rewards:
        out["sampled_reward"] = _span(rewards)
    mean_mixed = out["mixed_groups"]["mean"]
    if mean_mixed < core_defaults.TRAIN_GRPO_MIN_MIXED_SHARE:
        out["groups_note"] = (
            f"almost every sampled group was unanimous: {mean_mixed:.0%} of groups mixed a pass and a fail "
            f"(under TRAIN_GRPO_MIN_MIXED_SHARE={core_defaults.TRAIN_GRPO_MIN_MIXED_SHARE:.0%}), sampled pass rate "
            f"{out.get('sampled_pass_rate', {}).get('mean', float('nan')):.2f}; a unanimous group has no advantage, so GRPO had almost "
            "nothing to learn from. Start from a policy whose sampled replies sometimes pass and sometimes "
            "fail (more SFT steps, or the rows' sampling temperature)"
        )
    return out
