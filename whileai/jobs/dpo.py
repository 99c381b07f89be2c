"""DPO job body: LoRA DPO on a pass against a fail per prompt, length matched.

Pairs come from ``build_preference_pairs`` (the ``select_for_preference``
rule: per task, the pass/fail pairs closest in length, PREFERENCE_PAIRS_PER_TASK
of them when ``balance`` is on) and leave through ``export_preference`` in
TRL's conversational triple, gates on. With LoRA the reference model is the
base with the adapter disabled, so no second copy is loaded. Mind the learning
rate: TRAINING_KNOBS records a held-out collapse at 1e-3 where 1e-4 improved.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from whileai.jobs import _evaluation, _loading, _trainer_data, _trainer_setup

__all__ = ["fit", "load", "evaluate", "preference_pairs"]

load = _loading.load_policy


def evaluate(spec: dict[str, Any], model: Any, tokenizer: Any, rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {**_evaluation.policy_pass_rate(model, tokenizer, rows, spec), "metric": "pass_rate"}


def preference_pairs(rows: list[dict[str, Any]], balance: bool) -> list[dict[str, Any]]:
    """Pass-vs-fail pairs per task (PREFERENCE_PAIRS_PER_TASK per task when balanced, else every length-matched pair)."""
    from whileai.simulations.judges import build_preference_pairs

    return build_preference_pairs(rows, per_task=None if balance else len(rows) or 1)


def _longest_prompt(tokenizer: Any, examples: list[dict[str, Any]]) -> int:
    return max(
        len(tokenizer.apply_chat_template(ex["prompt"], tools=ex.get("tools") or None, add_generation_prompt=True,
                                          tokenize=True, return_dict=True)["input_ids"])
        for ex in examples
    )


def fit(spec: dict[str, Any], model: Any, tokenizer: Any, rows: list[dict[str, Any]], folder: Path,
        callbacks: list[Any], holdout: list[dict[str, Any]] | None = None, run: Any = None) -> tuple[Any, dict[str, Any]]:
    from trl import DPOConfig, DPOTrainer

    pairs = preference_pairs(rows, bool(spec.get("balance", True)))
    options = _trainer_data.export_options(spec, "dpo")
    examples = _trainer_data.export_pairs(pairs, folder, options)
    examples, too_long = _trainer_data.within_context(tokenizer, examples, _loading.max_length(model))
    if not examples:
        raise ValueError("dpo found no pass-vs-fail pair to train on; push rollouts with a pass and a fail per task")
    loss_type = str(spec["loss_type"])
    extra_args: dict[str, Any] = {}
    if loss_type == "exo_pair":
        extra_args["label_smoothing"] = 1e-3  # EXO's recommended epsilon (TRL refuses 0 for exo_pair)
    trainer = _trainer_setup.train_lora(
        DPOTrainer, DPOConfig, spec, folder, model, tokenizer, examples, callbacks,
        beta=float(spec["beta"]),
        loss_type=[loss_type],
        max_length=_longest_prompt(tokenizer, examples) + int(spec["max_completion_length"]),
        **extra_args,
    )
    return trainer.model, {"rows": 2 * len(examples), "pairs": len(examples), "steps": trainer.state.global_step,
                           "left_out_too_long": too_long, "trainer_received": len(trainer.train_dataset), "unit": "pairs",
                           "export": options}
