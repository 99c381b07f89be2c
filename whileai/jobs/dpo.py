"""DPO job body: LoRA DPO on a pass against a fail per prompt.

With ``pair_source="rows"`` (the default) pairs come from the dataset through
``build_preference_pairs`` (the ``select_for_preference`` rule: per task, the
pass/fail pairs closest in length, PREFERENCE_PAIRS_PER_TASK of them when
``balance`` is on) and leave through ``export_preference`` in TRL's
conversational triple, gates on. With ``pair_source="policy"`` they are the
start policy's own sampled replies, judged against the rows' gold
(``jobs._policy_pairs``); ``"policy_gold"`` also pairs the dataset's passing reply
against a prompt's samples when all of them failed. ``nll_weight`` adds an NLL term on the chosen side
(TRL's ``"sft"`` loss beside ``loss_type``: RPO). With LoRA the reference is the
adapter the run starts from (TRL keeps a frozen copy, "ref"), or the bare base,
so no second model is loaded. Mind the learning rate: TRAINING_KNOBS records a
held-out collapse at 1e-3 where 1e-4 improved.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from whileai.core.spec import DPOSpec

from whileai.jobs import _evaluation, _loading, _policy_pairs, _trainer_data, _trainer_setup
from whileai.jobs._measure import HeldOutMeasure
from whileai.jobs._training_fields import ExportOptions, FitFields

__all__ = ["fit", "load", "evaluate", "keeps_measure", "preference_pairs", "DPOFit"]


class DPOFit(FitFields, total=False):
    """What DPO's fit adds to the run's training summary, beside every method's fields: its pairs, and the export
    settings they left through (``pair_source="rows"``) or what the policy sampled for them (the other sources)."""

    pairs: int
    export: ExportOptions
    policy_pairs: _policy_pairs.PolicyPairsReport

load = _loading.load_policy


def evaluate(spec: DPOSpec, model: Any, tokenizer: Any, rows: list[dict[str, Any]]) -> HeldOutMeasure:
    """The held-out first-action pass rate of the policy (``_evaluation.policy_pass_rate``)."""
    return _evaluation.policy_pass_rate(model, tokenizer, rows, spec)


def keeps_measure(spec: DPOSpec) -> bool:
    """DPO's held-out measurement is the plain pass rate: kept beside the adapter for a stage that starts from it."""
    return True


def preference_pairs(rows: list[dict[str, Any]], balance: bool) -> list[dict[str, Any]]:
    """Pass-vs-fail pairs per task (PREFERENCE_PAIRS_PER_TASK per task when balanced, else every length-matched pair)."""
    from whileai.domain.judges.judging import build_preference_pairs

    return build_preference_pairs(rows, per_task=None if balance else len(rows) or 1)


def _longest_prompt(tokenizer: Any, examples: list[dict[str, Any]]) -> int:
    """Tokens of the longest prompt: the chat template's rendering, or a text prompt's own tokens."""
    from whileai.domain.rows.context import prompt_length

    return max(
        len(tokenizer(ex["prompt"], add_special_tokens=False)["input_ids"]) if isinstance(ex["prompt"], str)
        else prompt_length(tokenizer, ex["prompt"], ex.get("tools"))
        for ex in examples
    )


def _row_pairs(spec: DPOSpec, tokenizer: Any, rows: list[dict[str, Any]], folder: Path,
               limit: int) -> tuple[list[dict[str, Any]], DPOFit]:
    pairs = preference_pairs(rows, spec.balance)
    options = _trainer_data.export_options(spec, "dpo")
    examples = _trainer_data.export_pairs(pairs, folder, options)
    examples, too_long = _trainer_data.within_context(tokenizer, examples, limit)
    return examples, {"left_out_too_long": too_long, "export": options}


def _sampled_pairs(spec: DPOSpec, model: Any, tokenizer: Any, rows: list[dict[str, Any]], folder: Path,
                   limit: int, run: Any = None) -> tuple[list[dict[str, Any]], DPOFit]:
    import json

    def sampling(done: int, prompts: int) -> None:  # the run's phase while the policy samples (often most of a CPU run)
        if run is not None:
            run.note(phase=f"sampling the policy's pairs: {done}/{prompts} prompts x {spec.policy_samples}")

    examples, report = _policy_pairs.policy_pairs(model, tokenizer, rows, spec, limit, on_batch=sampling)
    if run is not None:
        run.note(phase="training")
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "pairs.policy.jsonl", "w", encoding="utf-8") as f:  # the job's record of what it trained on
        f.writelines(json.dumps(e, ensure_ascii=False) + "\n" for e in examples)
    if not examples:
        raise ValueError(
            f"dpo with pair_source={spec.pair_source!r} found no prompt whose {report['samples_per_prompt']} "
            f"sampled replies both pass and fail ({report['prompts']} prompts, sampled pass rate "
            f"{report['sampled_pass_rate']}, {report['gold_chosen_prompts']} paired with a passing row); start from "
            "a policy that sometimes passes (init_from an SFT run), raise policy_samples, or use pair_source='rows'")
    return examples, {"left_out_too_long": report["left_out_too_long"], "policy_pairs": report}


def fit(spec: DPOSpec, model: Any, tokenizer: Any, rows: list[dict[str, Any]], folder: Path,
        callbacks: list[Any], holdout: list[dict[str, Any]] | None = None, run: Any = None) -> tuple[Any, DPOFit]:
    from trl import DPOConfig, DPOTrainer

    limit = _loading.max_length(model)
    if spec.pair_source in ("policy", "policy_gold"):
        examples, said = _sampled_pairs(spec, model, tokenizer, rows, folder, limit, run)
    else:
        examples, said = _row_pairs(spec, tokenizer, rows, folder, limit)
    if not examples:
        raise ValueError("dpo found no pass-vs-fail pair to train on; push rollouts with a pass and a fail per task")
    # beta, the loss (with RPO's NLL term) and the batch come from the spec (trainer_config.trl_settings)
    trainer = _trainer_setup.train_lora(
        DPOTrainer, DPOConfig, spec, folder, model, tokenizer, examples, callbacks,
        max_length=min(limit, _longest_prompt(tokenizer, examples) + spec.max_completion_length),
    )
    return trainer.model, {"rows": 2 * len(examples), "pairs": len(examples), "steps": trainer.state.global_step,
                           "trainer_received": len(trainer.train_dataset), "unit": "pairs", **said}
