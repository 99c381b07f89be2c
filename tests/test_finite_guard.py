"""The finite guard: the first logged step whose loss or gradient norm is not finite stops training, and the run
fails naming the step, the value, the method's causes and fixes, and the checkpoint ``resume`` continues from."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import pytest
from transformers import TrainerControl, TrainerState

from whileai.core.spec import DPOSpec, GRPOSpec, RMSpec, SFTSpec
from whileai.core.errors import NonFiniteTraining
from whileai.jobs._finite_guard import FiniteGuard, first_not_finite, tripped_guard


def _step(guard: FiniteGuard, step: int, logs: dict[str, Any]) -> TrainerControl:
    """One logged step as the trainer hands it to its callbacks: a fresh control, the state at ``step``."""
    control = TrainerControl(should_log=True, should_save=True, should_evaluate=True)
    guard.on_log(None, TrainerState(global_step=step), control, logs=logs)
    return control


def test_a_finite_log_goes_on_and_the_first_non_finite_one_stops_training_without_a_save():
    guard = FiniteGuard(GRPOSpec(temperature=0.1, beta=0.04, learning_rate=1e-5), "run_00000000000000aa")
    for step in (1, 2):
        control = _step(guard, step, {"loss": 0.41, "grad_norm": 0.3, "learning_rate": 1e-5, "kl": None})
        assert not control.should_training_stop and control.should_save and guard.tripped is None
    # the logged loss stays finite (logging_nan_inf_filter hides a NaN step loss); the gradient norm does not
    control = _step(guard, 3, {"loss": 0.39, "grad_norm": float("nan"), "learning_rate": 1e-5})
    assert control.should_training_stop and not control.should_save and not control.should_evaluate
    assert (guard.tripped.step, guard.tripped.key) == (3, "grad_norm") and math.isnan(guard.tripped.value)
    # a later log (the trainer's closing one) keeps the first step and still holds the loop and the save
    control = _step(guard, 3, {"train_loss": float("nan"), "loss": float("inf")})
    assert control.should_training_stop and not control.should_save and guard.tripped.step == 3
    assert tripped_guard([object(), guard]) is guard and tripped_guard([FiniteGuard(SFTSpec())]) is None


def test_what_counts_as_not_finite():
    assert first_not_finite({"loss": float("inf"), "grad_norm": float("nan")}) == ("loss", float("inf"))
    assert first_not_finite({"loss": "-inf"}) == ("loss", float("-inf"))
    for logs in (None, {}, {"loss": None, "grad_norm": "n/a"}, {"loss": 0.0, "grad_norm": 1e30},
                 {"train_loss": float("nan")}):
        assert first_not_finite(logs) is None, logs


def test_the_reason_names_the_step_value_causes_fixes_and_the_checkpoint_to_resume(tmp_path):
    checkpoints = tmp_path / "checkpoints"
    for step in (10, 20):
        (checkpoints / f"checkpoint-{step}").mkdir(parents=True)
        (checkpoints / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    guard = FiniteGuard(GRPOSpec(temperature=0.1, beta=0.04, learning_rate=1e-5), "run_00000000000000aa")
    _step(guard, 23, {"grad_norm": float("nan")})
    text = str(guard.explain(checkpoints))
    for said in ("grpo training stopped at step 23", "grad_norm was nan", "already applied",
                 "temperature=0.1", "beta=0.04", "exp(ref_logp - logp)", "learning_rate (1e-05)",
                 "raise temperature", "set beta=0", "lower learning_rate",
                 "checkpoint-20 (step 20)", "python -m whileai resume run_00000000000000aa"):
        assert said in text, (said, text)
    no_kl = FiniteGuard(GRPOSpec(temperature=0.1, beta=0.0))
    _step(no_kl, 5, {"loss": float("inf")})
    text = str(no_kl.explain(None))
    assert "loss was inf" in text and "policy ratio" in text and "set beta=0" not in text
    assert "No checkpoint was saved before that step" in text
    for spec, said in ((SFTSpec(learning_rate=1e-2), "learning_rate (0.01)"), (DPOSpec(beta=0.5), "lower beta"),
                       (RMSpec(), "reward head")):
        guard = FiniteGuard(spec)
        _step(guard, 1, {"grad_norm": float("inf")})
        assert said in str(guard.explain(None)) and f"{spec.method} training stopped at step 1" in str(guard.explain(None))


def test_a_real_sft_job_whose_loss_turns_nan_stops_at_that_step_and_fails_its_run_with_the_reason(tmp_path, monkeypatch):
    """A real SFT job on the kit's tiny model, its loss made NaN from the second step on: the step's update is the
    last (no third step runs), its checkpoint is not written, and the run fails as the worker fails it."""
    import trl

    import whileai.simulations as wai
    from whileai.domain.client import get_client
    from whileai.jobs._client import error_text
    from whileai.jobs.body import JobRun, run_job
    from whileai.kit import load_sample
    from whileai.kit._base import tiny_model_dir

    real, steps_seen = trl.SFTTrainer.compute_loss, []

    def nan_from_the_second_step(self: Any, model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        out = real(self, model, inputs, *args, **kwargs)
        steps_seen.append(self.state.global_step)
        if self.state.global_step < 1:
            return out
        return (out[0] * float("nan"), *out[1:]) if isinstance(out, tuple) else out * float("nan")

    monkeypatch.setattr(trl.SFTTrainer, "compute_loss", nan_from_the_second_step)
    rows = [r for r in load_sample() if r.get("passed")][:16]
    spec = SFTSpec(base_model=str(tiny_model_dir()), steps=4, save_steps=1, batch_size=2)
    record = wai.training_run(name="finite-guard")
    run = JobRun(get_client().request("GET", f"/runs/{record.id}", params={"series": "false"}), get_client())
    checkpoints = tmp_path / "checkpoints"
    with warnings.catch_warnings(), pytest.raises(NonFiniteTraining) as caught:
        warnings.simplefilter("ignore")
        run_job(spec, rows, None, run, tmp_path / "adapter", tmp_path / "job", checkpoints=checkpoints)
    assert max(steps_seen) == 1, "no step ran after the one whose gradient was not finite"
    assert sorted(p.name for p in checkpoints.glob("checkpoint-*")) == ["checkpoint-1"]
    assert not (tmp_path / "adapter").exists()
    run.release()
    run.finish("failed", error=error_text(caught.value))  # what the worker does with an error its job raised
    failed = wai.get_run(record.id)
    assert failed["status"] == "failed"
    assert failed["error"].startswith("NonFiniteTraining: sft training stopped at step 2: its grad_norm was nan")
    for said in ("lower learning_rate", "checkpoint-1 (step 1)", f"python -m whileai resume {record.id}"):
        assert said in failed["error"], said
    assert Path(checkpoints / "checkpoint-1" / "trainer_state.json").is_file()
