"""RM job body: a reward model (LoRA on a one-label sequence classifier) on pass-vs-fail pairs.

Each side is the chat template over the row's ``messages`` with its ``tools``
(what ``reward_model(run)`` scores later): the whole conversation, or with
``reward_span="first_action"`` the prompt and the first assistant turn only; with
``near_misses=N`` (first-action span only) each passing row also gives up to N
pairs against a near miss of itself (``judges.near_miss_pairs``: one argument
value changed, a number moved, two arguments swapped, another prompt's answer),
each judged to fail. The score head is freshly
initialised on every load, so it is trained and saved with the adapter
(``modules_to_save``); a run with ``init_from`` (a policy run) starts its
backbone from that policy's LoRA and trains it on
(``_loading.classifier_from_policy``). Before and after are the held-out pair
accuracy (the share of held-out pairs whose pass outscores its fail; where the held-out rows
are all passing, as BFCL's gold rows are, and ``near_misses`` is set, the pairs
are one near miss of each held-out row (HOLDOUT_NEAR_MISSES), drawn with one
fixed seed so before, after and every seed score the same pairs); the run's
``training["threshold"]`` is the score cut that best separates the held-out
pass and fail rows, which ``reward_model`` uses as its pass line.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from whileai.core.spec import RMSpec, knob_of

from whileai.jobs import _environment, _loading, _trainer_data, _trainer_setup
from whileai.jobs._measure import HeldOutMeasure
from whileai.jobs._training_fields import FitFields
from whileai.domain import defaults

if TYPE_CHECKING:
    from whileai.domain.judges.judging import NearMissSummary

__all__ = ["fit", "load", "evaluate", "score_rows", "best_threshold", "pair_examples", "near_miss_examples", "span_of",
           "near_misses_of", "by_failure", "RMFit"]

#: what a reward model reads of a row when its spec names no reward_span: the knob's declared default
REWARD_SPAN_DEFAULT: str = knob_of(RMSpec, "reward_span").default


class RMFit(FitFields, total=False):
    """What a reward model's fit adds to the run's training summary, beside every method's fields: its pairs,
    what of a row it read, the near-miss pairs it added, and (without a held-out set) the pass line it chose on
    the training rows."""

    pairs: int
    reward_span: str
    near_misses: NearMissSummary  # the near-miss pairs' summary (judges.near_miss_pairs), where the run adds them
    threshold: float | None
    threshold_row_accuracy: float | None
    threshold_note: str


def load(spec: RMSpec) -> tuple[Any, Any]:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = _loading.base_path(_loading.base_of(spec), spec)
    tokenizer = _loading.pretrained(AutoTokenizer, path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    _loading.use_run_tool_format(tokenizer, spec)  # tools reach the model whatever its template
    model = _loading.pretrained(AutoModelForSequenceClassification, path, num_labels=1)
    model.config.pad_token_id = tokenizer.pad_token_id
    if spec.init_adapter:  # started from a policy run: its LoRA in the backbone, the score head fresh
        model = _loading.classifier_from_policy(model, spec)
    return model.to(_environment.device()), tokenizer


def span_of(spec: RMSpec) -> str:
    """What of a row the reward model reads (config ``reward_span``)."""
    return spec.reward_span


def near_misses_of(spec: RMSpec) -> int:
    """Near-miss pairs per passing row the run adds to its training pairs (config ``near_misses``; 0: none)."""
    from whileai.domain.judges.reward_model import near_miss_problem

    value = spec.near_misses
    problem = near_miss_problem(value, span_of(spec))
    if problem:
        raise ValueError(problem)
    return value


def pair_examples(rows: list[dict[str, Any]], balance: bool, span: str = REWARD_SPAN_DEFAULT) -> list[dict[str, Any]]:
    """``{"chosen": messages, "rejected": messages, "tools": [...]}`` per pass-vs-fail pair (TRL's implicit prompt)."""
    from whileai.jobs.dpo import preference_pairs
    from whileai.domain.judges.reward_model import reward_pair_example

    return [reward_pair_example(pair, span) for pair in preference_pairs(rows, balance)]


def near_miss_examples(rows: list[dict[str, Any]], per_row: int, seed: int = 0,
                       span: str = "first_action") -> tuple[list[dict[str, Any]], NearMissSummary]:
    """``per_row`` near-miss pairs per passing row (``judges.near_miss_pairs``) as the trainer reads them, and their summary."""
    from whileai.domain.judges.judging import near_miss_pairs
    from whileai.domain.judges.reward_model import reward_pair_example

    pairs, summary = near_miss_pairs(rows, per_row, seed)
    return [reward_pair_example(pair, span) for pair in pairs], summary


def score_rows(model: Any, tokenizer: Any, rows: list[dict[str, Any]], batch_size: int | None = None,
               span: str = REWARD_SPAN_DEFAULT) -> list[float]:
    """The head's score for each row (chat template over its conversation, or up to its first action, and tools)."""
    import torch

    from whileai.domain.judges.reward_model import reward_text_messages, score_token_batches

    size = batch_size or defaults.REWARD_MODEL_BATCH_SIZE
    was_training = model.training
    model.eval()
    encoded = [
        list(tokenizer.apply_chat_template(reward_text_messages(r, span), tools=r.get("tools") or None,
                                           tokenize=True, return_dict=True)["input_ids"])
        for r in rows
    ]
    try:
        with torch.no_grad():
            scores = score_token_batches(model, encoded, tokenizer.pad_token_id, size)
    finally:
        if was_training:
            model.train()
    return scores


def best_threshold(scores: list[float], passed: list[bool]) -> tuple[float | None, float | None]:
    """The cut ``t`` maximising the accuracy of ``score >= t`` against the labels, and that accuracy.

    Candidates are the midpoints between neighbouring distinct scores (and one
    below the lowest); ties in accuracy take the middle one of the best run.
    """
    if not scores:
        return None, None
    values = sorted(set(scores))
    candidates = [values[0] - 1.0] + [(a + b) / 2 for a, b in zip(values, values[1:])] + [values[-1] + 1.0]
    best: list[float] = []
    best_acc = -1.0
    for t in candidates:
        acc = sum((s >= t) == p for s, p in zip(scores, passed, strict=True)) / len(scores)
        if acc > best_acc + 1e-12:
            best, best_acc = [t], acc
        elif abs(acc - best_acc) <= 1e-12:
            best.append(t)
    return best[len(best) // 2], best_acc


def _holdout_rows(rows: list[dict[str, Any]], spec: RMSpec) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(labelled held-out rows, held-out pairs), the rows capped at holdout_rows by whole tasks.

    The cap keeps whole tasks (sampled with the run's seed), because a pair needs
    a task's pass and its fail: on the kit's sample, a cap of 40 single rows drawn
    from 80 tasks held only 3 pairs.
    """
    import random

    from whileai.jobs.dpo import preference_pairs
    from whileai.domain.rows.rowsource import task_key

    labelled = [r for r in rows if isinstance(r.get("passed"), bool)]
    limit = spec.holdout_rows
    if len(labelled) > limit:
        tasks: dict[str, list[dict[str, Any]]] = {}
        for row in labelled:
            tasks.setdefault(task_key(row), []).append(row)
        order = sorted(tasks)
        random.Random(spec.seed).shuffle(order)
        kept: list[dict[str, Any]] = []
        for key in order:
            if len(kept) + len(tasks[key]) > limit:
                break
            kept += tasks[key]
        labelled = kept or labelled[:limit]
    return labelled, preference_pairs(labelled, True)


def holdout_pairs(rows: list[dict[str, Any]], spec: RMSpec) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                                   NearMissSummary | None]:
    """(the rows scored, the held-out pairs, the near-miss summary or None): what ``evaluate`` measures.

    Pass-vs-fail pairs of the held-out rows; where they make none and the run adds near misses (gold rows only,
    as BFCL's), near misses of the held-out rows instead, drawn alike before and after (a fixed seed)."""
    labelled, pairs = _holdout_rows(rows, spec)
    if pairs or not labelled or not near_misses_of(spec):
        return labelled, pairs, None
    from whileai.domain.judges.judging import near_miss_pairs

    pairs, near = near_miss_pairs(labelled, defaults.HOLDOUT_NEAR_MISSES, defaults.HOLDOUT_NEAR_MISS_SEED)
    return labelled + [p["rejected"] for p in pairs], pairs, near


def by_failure(pairs: list[dict[str, Any]], outcomes: list[int]) -> dict[str, dict[str, int]] | None:
    """Per failure kind of the rejected side (its ``markers.failure``): ``{"right", "pairs"}``; None when no row says.

    Where the head falls short: on the kit's sample, a right tool with a wrong value
    stayed at chance while every other kind was told apart.
    """
    kinds: dict[str, dict[str, int]] = {}
    for pair, right in zip(pairs, outcomes, strict=True):
        kind = (pair["rejected"].get("markers") or {}).get("failure")
        if kind is None:
            continue
        entry = kinds.setdefault(str(kind), {"right": 0, "pairs": 0})
        entry["right"] += int(right)
        entry["pairs"] += 1
    return dict(sorted(kinds.items())) or None


def _by_rule(pairs: list[dict[str, Any]], outcomes: list[int]) -> dict[str, dict[str, int]] | None:
    """Per near-miss rule of held-out near-miss pairs: ``{"right", "pairs"}``; None when no pair is one."""
    kinds: dict[str, dict[str, int]] = {}
    for pair, right in zip(pairs, outcomes, strict=True):
        if "near_miss" in pair:
            entry = kinds.setdefault(f"near_miss:{pair['near_miss']}", {"right": 0, "pairs": 0})
            entry["right"] += int(right)
            entry["pairs"] += 1
    return dict(sorted(kinds.items())) or None


def evaluate(spec: RMSpec, model: Any, tokenizer: Any, rows: list[dict[str, Any]]) -> HeldOutMeasure:
    """Held-out pair accuracy (pass outscores fail), plus the best-separating threshold on the held-out rows; where
    the held-out rows make no pair, the row accuracy at that threshold (metric ``row_accuracy``)."""
    labelled, pairs, near = holdout_pairs(rows, spec)
    if not labelled:
        return HeldOutMeasure(metric="pair_accuracy", value=None, why="no held-out row carries a passed label")
    scores = score_rows(model, tokenizer, labelled, span=span_of(spec))
    threshold, accuracy = best_threshold(scores, [bool(r["passed"]) for r in labelled])
    rows_only = HeldOutMeasure(metric="row_accuracy", value=accuracy, threshold=threshold, row_accuracy=accuracy,
                               reward_span=span_of(spec), prompts=len(pairs), rows=len(labelled), near_misses=near)
    if not pairs:
        return rows_only
    index = {id(r): s for r, s in zip(labelled, scores, strict=True)}
    # each pair's outcome (1: the pass outscores its fail), in pair order, kept for the paired test
    outcomes = [int(index[id(p["chosen"])] > index[id(p["rejected"])]) for p in pairs]
    return replace(rows_only, metric="pair_accuracy", value=sum(outcomes) / len(pairs), outcomes=tuple(outcomes),
                   by_failure=by_failure(pairs, outcomes) or _by_rule(pairs, outcomes))


def fit(spec: RMSpec, model: Any, tokenizer: Any, rows: list[dict[str, Any]], folder: Path,
        callbacks: list[Any], holdout: list[dict[str, Any]] | None = None, run: Any = None) -> tuple[Any, RMFit]:
    from trl import RewardConfig, RewardTrainer

    examples = pair_examples(rows, spec.balance, span_of(spec))
    near = None
    per_row = near_misses_of(spec)
    if per_row:
        added, near = near_miss_examples(rows, per_row, spec.seed, span_of(spec))
        examples += added
    examples, too_long = _trainer_data.within_context(tokenizer, examples, _loading.max_length(model))
    if not examples:
        raise ValueError("rm found no pass-vs-fail pair to train on; push rollouts with a pass and a fail per task"
                         + (f" ({too_long} pairs longer than the model's context were left out)" if too_long else ""))
    trainer = _trainer_setup.train_lora(
        RewardTrainer, RewardConfig, spec, folder, model, tokenizer, examples, callbacks,
        task_type="SEQ_CLS",
        max_length=_loading.max_length(model),
    )
    extra: RMFit = {"rows": 2 * len(examples), "pairs": len(examples), "steps": trainer.state.global_step,
                    "reward_span": span_of(spec),
                    "left_out_too_long": too_long, "trainer_received": len(trainer.train_dataset),
                    "unit": "pairs"}
    if near is not None:  # how many of the pairs are near misses, by rule
        extra["near_misses"] = near
    if not holdout:  # with a held-out set the job's after-measurement picks the threshold there
        train_labelled = [r for r in rows if isinstance(r.get("passed"), bool)]
        scores = score_rows(trainer.model, tokenizer, train_labelled, span=span_of(spec))
        extra["threshold"], extra["threshold_row_accuracy"] = best_threshold(scores, [r["passed"] for r in train_labelled])
        extra["threshold_note"] = "no held-out set: the threshold was chosen on the training rows"
    return trainer.model, extra

