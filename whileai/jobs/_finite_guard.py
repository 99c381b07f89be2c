"""The finite guard: a job stops at the first logged step whose loss or gradient norm is not finite, and says why.

One optimizer step with a NaN or infinite gradient makes every LoRA weight NaN. Left alone, the trainer goes on: the
next GRPO step samples from those weights and torch's sampler fails with "probability tensor contains either inf,
nan or element < 0", which names neither the step nor the cause. :class:`FiniteGuard` is a trainer callback every
job installs (every method, every rank); ``_trainer_setup.fit_trainer`` raises ``core.errors.NonFiniteTraining`` once
the trainer has stopped, before the method's fit reads the model again.

What transformers does (5.x, ``Trainer._inner_training_loop``), and so what the guard can and cannot do:

- ``TrainingArguments`` has no option that skips a non-finite update. Only fp16 mixed precision skips one (its
  gradient scaler); bf16 and fp32 apply it. Clipping (``max_grad_norm``) cannot rescale a NaN gradient either.
- ``logging_nan_inf_filter`` (on by default) changes only the logged loss: a step's NaN loss is replaced by the
  window's average, so the logged loss can look finite while the gradient norm is NaN. The guard reads both.
- Within a step the gradient norm is taken, ``optimizer.step()`` applies the update, ``on_step_end`` runs, then the
  step's log (``on_log``, where the guard sees the values), then the step's checkpoint when one is due.

So the guard cannot undo the update of the step it sees: the weights in memory are already not finite, and the job
saves no adapter. A HackMonitor look due at that very step runs in ``on_step_end``, before the log, on those weights
(the monitor records its failure as an evaluation error and never raises). What it does: it stops the loop there
(``should_training_stop``: no other update, and no other GRPO generation, which comes at the start of a step), it
keeps that step's checkpoint from being written (``should_save``), so the newest checkpoint is from before that
step and is what ``python -m whileai resume`` continues from, and the run fails naming the step, the value, the
likely causes for the method and the fixes. It does not skip the step and go on: a run whose knobs make one step
overflow tends to make the next one overflow too, and a skipped step would hide that.

Every rank stops at the same step: the logged loss is the mean over the ranks and the gradient norm the global one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from whileai.core.paths import last_checkpoint

__all__ = ["FiniteGuard", "NotFinite", "first_not_finite", "tripped_guard", "WATCHED"]

#: The logged values whose being NaN or infinite means the update of that step was not finite. ``loss`` alone is
#: not enough: ``logging_nan_inf_filter`` hides a NaN step loss from the log (see the module docstring).
WATCHED = ("loss", "grad_norm")


@dataclass(frozen=True)
class NotFinite:
    """The first logged value that was not finite: at which optimizer step, which value, and what it was."""

    step: int
    key: str
    value: float


def first_not_finite(logs: Mapping[str, object] | None) -> tuple[str, float] | None:
    """The first of :data:`WATCHED` in a trainer's log whose value is NaN or infinite, else None."""
    for key in WATCHED:
        value = (logs or {}).get(key)
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):  # absent (None), or not a number: nothing to judge
            continue
        if not math.isfinite(number):
            return key, number
    return None


class FiniteGuard(TrainerCallback):
    """Stops training at the first logged step whose loss or gradient norm is not finite (see the module docstring).

    ``spec`` is the job's run spec (its method and knobs name the causes and the fixes); ``run_id`` the run the
    message tells ``resume`` to continue.
    """

    def __init__(self, spec: Any, run_id: str | None = None):
        self.spec = spec
        self.run_id = run_id
        self.tripped: NotFinite | None = None

    def on_log(self, args: Any, state: Any, control: Any, logs: Mapping[str, object] | None = None,
               **kwargs: Any) -> Any:
        if self.tripped is None:
            found = first_not_finite(logs)
            if found is not None:
                self.tripped = NotFinite(int(state.global_step), *found)
                print(f"step {self.tripped.step}: {found[0]} is {found[1]}, not finite: training stops here "
                      "(the run fails with the causes and fixes)", flush=True)
        return self._hold(control)

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        return self._hold(control)  # the loop's closing log and save come after the epoch's end

    def _hold(self, control: Any) -> Any:
        """Once tripped: no other step, and no checkpoint of the weights the non-finite update made."""
        if self.tripped is not None:
            control.should_training_stop = True
            control.should_save = False
            control.should_evaluate = False
        return control

    def explain(self, checkpoints: Path | None) -> str:
        """What the job fails with (``core.errors.NonFiniteTraining``'s message); ``checkpoints`` is the run's
        checkpoint folder (None: it keeps none)."""
        assert self.tripped is not None, "explain() is asked of a guard that tripped"
        return failure_text(self.spec, self.tripped, last_checkpoint(checkpoints), self.run_id)


def tripped_guard(callbacks: list[Any]) -> FiniteGuard | None:
    """The trainer's :class:`FiniteGuard` when it stopped training, else None."""
    return next((c for c in callbacks if isinstance(c, FiniteGuard) and c.tripped is not None), None)


def failure_text(spec: Any, seen: NotFinite, checkpoint: Path | None, run_id: str | None) -> str:
    """What the run's error says: the step and value, that its update was applied, the method's likely causes and
    fixes, and what ``resume`` would continue from."""
    method = str(getattr(spec, "method", "?"))
    causes, fixes = _causes_and_fixes(spec)
    return (f"{method} training stopped at step {seen.step}: its {seen.key} was {seen.value}, not finite. The "
            f"optimizer had already applied that step's update, so the weights in memory are not finite and no "
            f"adapter was saved. Likely causes for {method}: {causes}. Fixes: {fixes}. {_resume_text(spec, checkpoint, run_id)}")


def _causes_and_fixes(spec: Any) -> tuple[str, str]:
    """The method's likely causes of a non-finite step, with the spec's own values, and the knobs that fix them."""
    method = getattr(spec, "method", None)
    lr = f"too high a learning_rate ({getattr(spec, 'learning_rate', '?')})"
    if method == "grpo":
        sharp = (f"a low temperature (temperature={spec.temperature}): TRL divides the logits by it, so the per-token "
                 f"log-probs are sharp")
        if spec.beta > 0:
            sharp += (f" and the KL term's estimator exp(ref_logp - logp) (beta={spec.beta}) can overflow where the "
                      "policy has moved from the reference")
        else:
            sharp += " and the policy ratio exp(logp - old_logp) can overflow"
        fixes = "raise temperature; set beta=0 (no KL term, no reference model); lower learning_rate"
        return f"{sharp}; {lr}", fixes if spec.beta > 0 else "raise temperature; lower learning_rate"
    if method == "dpo":
        return (f"{lr}: the policy's log-probs run far from the reference's and the scaled log-ratio "
                f"(beta={spec.beta}) overflows"), "lower learning_rate; lower beta"
    if method == "rm":
        return f"{lr}: the reward head's scores grow without bound", "lower learning_rate"
    return (f"{lr}; a batch with no token left to learn from (every label masked, a 0/0 loss)",
            "lower learning_rate; check that every row keeps an assistant reply within the model's context")


def _resume_text(spec: Any, checkpoint: Path | None, run_id: str | None) -> str:
    """What ``resume`` would continue from: the newest checkpoint, saved before the step that was not finite."""
    run = run_id or "RUN_ID"
    if checkpoint is None:
        return (f"No checkpoint was saved before that step (save_steps={getattr(spec, 'save_steps', '?')}): "
                "nothing to resume; train again with the knobs changed.")
    step = checkpoint.name.partition("-")[2]
    return (f"The newest checkpoint, {checkpoint.name} (step {step}), was saved before that step: "
            f"`python -m whileai resume {run}` continues from it with the same knobs, which may fail the same way; "
            "to change a knob, train again with it changed.")
