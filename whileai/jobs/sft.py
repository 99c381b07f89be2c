"""SFT job body: LoRA supervised fine-tuning on every row as pushed, loss on the assistant turns only.

The trainer does not filter on reward (the selection gate refused failing rows
before the job started, unless ``check`` said otherwise): push
``scored.passes()`` to clone only what passed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from whileai.core.spec import SFTSpec

from whileai.jobs import _episode_play, _evaluation, _loading, _trainer_data, _trainer_setup
from whileai.jobs._measure import HeldOutMeasure
from whileai.jobs._training_fields import ExportOptions, FitFields

__all__ = ["fit", "load", "evaluate", "keeps_measure", "SFTFit"]


class SFTExport(ExportOptions, total=False):
    """The export settings SFT trained with, and the shape its rows reached TRL in."""

    rows_shape: str  # messages (every assistant turn trains) or prompt_completion (a mask that trains some)


class SFTFit(FitFields, total=False):
    """What SFT's fit adds to the run's training summary, beside every method's fields."""

    export: SFTExport

load = _loading.load_policy


def evaluate(spec: SFTSpec, model: Any, tokenizer: Any, rows: list[dict[str, Any]]) -> HeldOutMeasure:
    """Held-out first-action pass rate, or held-out loss when the run's config says ``metric="loss"``; in an
    environment, the held-out episodes played whole and judged (``_episode_play.episode_pass_rate``)."""
    if spec.metric == "loss":
        return _evaluation.heldout_loss(model, tokenizer, rows, spec)
    if spec.environment is not None:
        return _episode_play.episode_pass_rate(spec, model, tokenizer, rows)
    return _evaluation.policy_pass_rate(model, tokenizer, rows, spec)


def keeps_measure(spec: SFTSpec) -> bool:
    """The pass rate is kept beside the adapter for a stage that starts from it; held-out loss is not."""
    return spec.metric != "loss"


def fit(spec: SFTSpec, model: Any, tokenizer: Any, rows: list[dict[str, Any]], folder: Path,
        callbacks: list[Any], holdout: list[dict[str, Any]] | None = None, run: Any = None) -> tuple[Any, SFTFit]:
    """Train; returns the PEFT model and what the run's ``training`` summary should add."""
    from trl import SFTConfig, SFTTrainer

    options = _trainer_data.export_options(spec, "sft")
    examples = _trainer_data.export_training(rows, folder, options)
    # in an environment each row is a whole gold episode, capped as one (EPISODE_MAX_LENGTH)
    limit = _loading.max_length(model, episodes=spec.environment is not None)
    examples, too_long = _trainer_data.within_context(tokenizer, examples, limit)
    if not examples:
        raise ValueError(f"sft has no row to train on after the export settings {options}; every row was left out "
                         f"(no trained assistant turn, or {too_long} longer than the model's context of "
                         f"{limit} tokens): check mask_mode, the rows' weights and their length")
    trainer = _trainer_setup.train_lora(
        SFTTrainer, SFTConfig, spec, folder, model, tokenizer, examples, callbacks,
        # the messages shape trains its assistant turns; prompt/completion rows (a mask that trains only
        # some turns) train the completion, which TRL does on its own for that shape
        assistant_only_loss="messages" in examples[0],
        max_length=limit,
        packing=False,
        dataset_num_proc=None,
    )
    shape = "messages" if "messages" in examples[0] else "prompt_completion"
    return trainer.model, {"rows": len(examples), "steps": trainer.state.global_step, "left_out_too_long": too_long,
                           "trainer_received": len(trainer.train_dataset), "unit": "rows",
                           "export": {**options, "rows_shape": shape}}
