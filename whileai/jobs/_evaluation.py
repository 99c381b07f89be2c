"""The held-out measurement every method shares: distinct prompts, generation, the first-action pass rate, held-out loss.

Held-out pass rate is the first-action judge over greedy replies: each
held-out prompt (the messages before the first assistant turn, with the row's
tools) is rendered with the chat template, the model writes one reply, the
kit's parser turns it back into OpenAI tool calls, and the first-action judge
compares the first action with the row's ``gold``. Rows of one task share a
prompt, so each distinct prompt is asked once.
"""

from __future__ import annotations

import json
import random
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from whileai.core.defaults import HOLDOUT_GROUP_FIELD
from whileai.core.errors import TrainingWarning
from whileai.core.spec import RunSpec

from whileai.jobs._measure import HeldOutMeasure
from whileai.jobs._trainer_data import export_training
from whileai.domain.rows.rollouts import prompt_messages

__all__ = ["distinct_prompts", "encode_prompt", "left_padded", "generate_replies", "policy_pass_rate", "prompt_digest", "gold_reply_tokens", "heldout_loss"]


def _prompt_key(row: Mapping[str, Any]) -> str:
    """What makes a held-out prompt itself: its messages, its tools and its gold."""
    return json.dumps([prompt_messages(row), row.get("tools"), row.get("gold")], sort_keys=True, default=str)


def distinct_prompts(rows: Sequence[Mapping[str, Any]], limit: int | None, seed: int) -> list[Mapping[str, Any]]:
    """One row per distinct (prompt, tools, gold), at most ``limit`` of them, sampled with ``seed``."""
    seen: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        if row.get("gold") is None:
            continue
        seen.setdefault(_prompt_key(row), row)
    chosen = list(seen.values())
    if limit is not None and len(chosen) > limit:
        chosen = random.Random(seed).sample(chosen, limit)
    return chosen


def encode_prompt(tokenizer: Any, row: Mapping[str, Any]) -> list[int]:
    ids = tokenizer.apply_chat_template(
        prompt_messages(row), tools=row.get("tools") or None, add_generation_prompt=True, tokenize=True, return_dict=True
    )["input_ids"]
    return list(ids)


def left_padded(encoded: list[list[int]], pad: int, device: Any) -> tuple[Any, Any, int]:
    """``(input_ids, attention_mask, width)``: prompts padded on the left to one width, as generation wants them."""
    import torch

    width = max(len(ids) for ids in encoded)
    input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids in encoded], device=device)
    mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in encoded], device=device)
    return input_ids, mask, width


def generate_replies(model: Any, tokenizer: Any, rows: Sequence[Mapping[str, Any]], max_new_tokens: int,
                     batch_size: int = 16) -> list[str]:
    """Greedy replies to each row's prompt, decoded with the control tokens kept (the parser drops them)."""
    import torch

    was_training = model.training
    model.eval()
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    dev = next(model.parameters()).device
    replies: list[str] = []
    try:
        for start in range(0, len(rows), batch_size):
            encoded = [encode_prompt(tokenizer, row) for row in rows[start : start + batch_size]]
            input_ids, mask, width = left_padded(encoded, pad, dev)
            with torch.no_grad():
                out = model.generate(
                    input_ids=input_ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=False,
                    pad_token_id=pad, eos_token_id=tokenizer.eos_token_id,
                )
            for seq in out[:, width:].tolist():
                if tokenizer.eos_token_id in seq:
                    seq = seq[: seq.index(tokenizer.eos_token_id)]
                replies.append(tokenizer.decode([t for t in seq if t != pad], skip_special_tokens=False))
    finally:
        if was_training:
            model.train()
    return replies


def policy_pass_rate(model: Any, tokenizer: Any, rows: Sequence[Mapping[str, Any]], spec: RunSpec,
                     proxy: Any = None) -> HeldOutMeasure:
    """The first-action judge's pass rate on greedy replies (metric ``pass_rate``): its ``value``, ``prompts`` and
    per-prompt ``outcomes`` (``[1, 0, ...]``).

    ``outcomes`` is each prompt's pass (1) or fail (0) in prompt order, the same order before and
    after training (the prompts are drawn with the run's seed), so a paired test can be computed
    from them. Value None without gold. ``gold_over_cap`` counts the prompts whose reference reply
    is longer than the reply cap (the ``eval_max_new_tokens`` knob): they can never pass, so they are
    counted and warned about (and still measured). ``groups`` (only when some prompt's row carries
    the HOLDOUT_GROUP_FIELD field) is each prompt's value of it, in the same order. ``proxy`` (a TRL-shaped reward) scores the same greedy
    replies too: ``proxy_scores``, per prompt in the same order.
    """
    from whileai.domain.judges.judging import judge_reply

    prompts = distinct_prompts(rows, spec.holdout_rows, spec.seed)
    if not prompts:
        return HeldOutMeasure(metric="pass_rate", value=None, prompts=0,
                              why="no held-out row carries a gold first action")
    cap = spec.eval_max_new_tokens
    lengths = [gold_reply_tokens(tokenizer, row.get("gold")) for row in prompts]
    over = sum(1 for n in lengths if n > cap)
    if over:
        warnings.warn(f"{over} of {len(prompts)} held-out prompts have a gold reply longer than the reply cap "
                      f"(eval_max_new_tokens={cap}): they cannot pass; eval_max_new_tokens={max(lengths)} fits "
                      "every one", TrainingWarning, stacklevel=2)
    replies = generate_replies(model, tokenizer, prompts, cap)
    from whileai.kit import reply_format

    fmt = reply_format(tokenizer)  # the parser of the convention the prompts were rendered in
    outcomes = [int(bool(judge_reply(text, row, tool_format=fmt)["passed"]))
                for row, text in zip(prompts, replies, strict=True)]
    field = HOLDOUT_GROUP_FIELD  # each prompt's group (a BFCL row's category), for the per-group figures
    groups = tuple(row.get(field) for row in prompts) if any(row.get(field) is not None for row in prompts) else None
    return HeldOutMeasure(metric="pass_rate", value=sum(outcomes) / len(prompts), prompts=len(prompts),
                          gold_over_cap=over, outcomes=tuple(outcomes), prompt_digest=prompt_digest(prompts),
                          groups=groups, proxy_scores=_proxy_scores(proxy, prompts, replies))


def _proxy_scores(proxy: Any, prompts: Sequence[Mapping[str, Any]], replies: list[str]) -> tuple[float, ...] | None:
    """``proxy`` (a TRL-shaped reward) on each prompt's greedy reply, in prompt order; None without a proxy."""
    if proxy is None:
        return None
    scores = proxy(prompts=[prompt_messages(row) for row in prompts], completions=list(replies),
                   completion_ids=None, gold=[json.dumps(row.get("gold")) for row in prompts],
                   row_tools=[json.dumps(row.get("tools") or []) for row in prompts])
    return tuple(float(s) if s is not None else 0.0 for s in scores)


def prompt_digest(prompts: Sequence[Mapping[str, Any]]) -> str:
    """Which held-out prompts were measured, in which order: two runs' outcomes pair prompt by prompt only when
    their digests are equal (``python -m whileai diff``'s head to head)."""
    import hashlib

    keys = "[" + ", ".join(_prompt_key(row) for row in prompts) + "]"  # json.dumps of the list of keys, byte for byte
    return hashlib.sha256(keys.encode()).hexdigest()[:16]


def gold_reply_tokens(tokenizer: Any, gold: Any) -> int:
    """Tokens of the shortest reply that satisfies ``gold`` as the template writes it (its reference call(s))."""
    from whileai.core.toolcalls import format_tool_call
    from whileai.domain.rows.datagate import gold_calls

    if not isinstance(gold, Mapping):
        return 0
    if "answer" in gold:
        text = str(gold["answer"])
    elif "one_of" in gold:
        return min((gold_reply_tokens(tokenizer, option) for option in gold["one_of"]), default=0)
    else:
        text = "\n".join(format_tool_call(c["name"], c.get("arguments") or {}) for c in gold_calls(gold))
    return len(tokenizer(text, add_special_tokens=False)["input_ids"]) + 1  # + the end of turn


def heldout_loss(model: Any, tokenizer: Any, rows: Sequence[Mapping[str, Any]], spec: RunSpec) -> HeldOutMeasure:
    """The mean assistant-token loss (metric ``loss``: its ``value``, and the ``rows`` read) over the held-out rows
    that passed (all when unlabelled)."""
    import torch

    chosen = [r for r in rows if r.get("passed") is True] or list(rows)
    limit = spec.holdout_rows
    if len(chosen) > limit:
        chosen = random.Random(spec.seed).sample(chosen, limit)
    trl_rows = export_training(chosen, None)
    was_training = model.training
    model.eval()
    dev = next(model.parameters()).device
    total = count = 0.0
    try:
        for row in trl_rows:
            enc = tokenizer.apply_chat_template(
                row["messages"], tools=row.get("tools") or None, tokenize=True, return_dict=True,
                return_assistant_tokens_mask=True,
            )
            ids = torch.tensor([enc["input_ids"]], device=dev)
            mask = torch.tensor(enc["assistant_masks"], device=dev)
            if int(mask[1:].sum()) == 0:
                continue
            with torch.no_grad():
                logits = model(input_ids=ids).logits[0, :-1]
            losses = torch.nn.functional.cross_entropy(logits.float(), ids[0, 1:], reduction="none")
            total += float((losses * mask[1:]).sum())
            count += float(mask[1:].sum())
    finally:
        if was_training:
            model.train()
    return HeldOutMeasure(metric="loss", value=total / count if count else None, rows=len(trl_rows))
