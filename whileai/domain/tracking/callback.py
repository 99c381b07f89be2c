"""``TrainerCallback``: a Transformers or TRL trainer logging into a run.

Defined on first use, so importing this module does not import transformers.
"""

from __future__ import annotations

from typing import Any

from whileai.domain.tracking import TrainingRun


def _define_trainer_callback() -> type:
    import transformers

    class TrainerCallback(transformers.TrainerCallback):
        """Log a Transformers or TRL trainer into a run: ``trainer.add_callback(wai.TrainerCallback(run))``.

        Takes the step count from the trainer at train begin, records every
        numeric value the trainer logs (loss, learning_rate, eval_loss, epoch,
        grad_norm, mean_token_accuracy, TRL's rewards/..., kl, ...) at the
        trainer's global step (once: the trainer's closing log repeats the last
        step's epoch, which is not stored again), and finishes the run as done at train end,
        keeping notes. If training raises, the run stays running: use the run
        as a context manager around ``trainer.train()`` or call ``run.fail``.
        """

        def __init__(self, run: TrainingRun):
            if not isinstance(run, TrainingRun):
                raise TypeError(
                    f"TrainerCallback needs the TrainingRun to log into, got {type(run).__name__}; "
                    "make one with wai.training_run(...)"
                )
            self.run = run
            self._logged: tuple[int, set[str]] = (-1, set())  # the last step logged and its metric names

        def on_train_begin(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                total = state.max_steps if state.max_steps and state.max_steps > 0 else None
                self.run._tracker.progress(state.global_step, total)

        def on_step_end(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                self.run._tracker.progress(state.global_step, None)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and state.is_world_process_zero:
                # a trainer reports None for a metric with no value at this step (TRL's GRPO does for
                # clip_ratio/low_min when nothing was clipped): absent, not a bad value to warn about
                # the trainer's closing log repeats values of the last step (epoch): the run keeps one point each
                step, seen = self._logged
                if step != state.global_step:
                    step, seen = state.global_step, set()
                values = {k: v for k, v in logs.items() if v is not None and k not in seen}
                seen.update(values)
                self._logged = (step, seen)
                if values:
                    self.run._tracker.log(state.global_step, values)

        def on_train_end(self, args, state, control, **kwargs):
            if state.is_world_process_zero and self.run.status == "running":
                self.run.finish("done")

    TrainerCallback.__module__ = __name__
    TrainerCallback.__qualname__ = "TrainerCallback"
    return TrainerCallback


def __getattr__(name: str) -> Any:
    if name == "TrainerCallback":
        value = globals()["TrainerCallback"] = _define_trainer_callback()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
