"""What GRPO's sampled groups looked like: the sampled pass rate and the share of mixed groups, per step.

GRPO learns only from groups whose completions disagree (a pass and a fail under
one prompt); a unanimous group has zero advantage. The held-out rate is measured
greedily, so a policy can pass greedy held-out prompts while its sampled replies
(the ones GRPO trains on) nearly all fail, and then nothing moves. The
watch reads TRL's own per-step figures (``reward``: the mean 0/1 first-action
reward of the step's completions, i.e. the sampled pass rate; ``frac_reward_zero_std``:
the share of unanimous groups) and adds them to the step's log under plain
names, so the run's series carry ``sampled_pass_rate`` and ``mixed_groups``.
Its ``summary()`` goes on the run's training summary, with a note when nearly
every group was unanimous (``defaults.TRAIN_GRPO_MIN_MIXED_SHARE``).
"""

from __future__ import annotations

from typing import Any

from whileai.simulations import defaults

__all__ = ["group_watch"]


def group_watch() -> Any:
    """A ``transformers.TrainerCallback`` that logs and sums up the sampled groups (see the module docstring).

    Put it before the run's own callback, so the figures it adds to a step's log
    reach the run in the same point.
    """
    from transformers import TrainerCallback

    class GroupWatch(TrainerCallback):
        def __init__(self) -> None:
            self.pass_rates: list[float] = []
            self.mixed: list[float] = []

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
            if not logs or "reward" not in logs or logs.get("frac_reward_zero_std") is None:
                return
            try:
                rate, mixed = float(logs["reward"]), 1.0 - float(logs["frac_reward_zero_std"])
            except (TypeError, ValueError):
                return
            logs["sampled_pass_rate"] = rate
            logs["mixed_groups"] = mixed
            self.pass_rates.append(rate)
            self.mixed.append(mixed)

        def summary(self) -> dict[str, Any]:
            """``sampled_pass_rate`` and ``mixed_groups`` (first, last, mean over steps), and a note when unanimous."""
            if not self.mixed:
                return {}

            def span(values: list[float]) -> dict[str, float]:
                return {"first": round(values[0], 3), "last": round(values[-1], 3),
                        "mean": round(sum(values) / len(values), 3)}

            out: dict[str, Any] = {"sampled_pass_rate": span(self.pass_rates), "mixed_groups": span(self.mixed)}
            mean_mixed = out["mixed_groups"]["mean"]
            if mean_mixed < defaults.TRAIN_GRPO_MIN_MIXED_SHARE:
                out["groups_note"] = (
                    f"almost every sampled group was unanimous: {mean_mixed:.0%} of groups mixed a pass and a fail "
                    f"(under TRAIN_GRPO_MIN_MIXED_SHARE={defaults.TRAIN_GRPO_MIN_MIXED_SHARE:.0%}), sampled pass rate "
                    f"{out['sampled_pass_rate']['mean']:.2f}; a unanimous group has no advantage, so GRPO had almost "
                    "nothing to learn from. Start from a policy whose sampled replies sometimes pass and sometimes "
                    "fail (more SFT steps, or the rows' sampling temperature)"
                )
            return out

    return GroupWatch()
