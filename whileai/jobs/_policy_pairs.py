"""On-policy preference pairs: the start policy's own replies, sampled and judged, a pass against a fail per prompt.

DPO with ``pair_source="policy"`` trains on these instead of the dataset's
rollout rows. For each training prompt (one per task with a gold first action)
the policy the run starts from samples ``policy_samples`` replies at
DPO_POLICY_TEMPERATURE; the first-action judge (the held-out measurement's and
GRPO's reward's judge, ``judge_reply``) scores each against the row's gold; a
prompt whose samples both pass and fail gives up to DPO_POLICY_PAIRS_PER_PROMPT
pairs, each a distinct failing reply against a passing one (a pass repeats when
the policy wrote fewer distinct passes than mistakes). So the rejected side is a mistake this policy
actually makes, and the chosen side a reply it can already write.

With ``pair_source="policy_gold"`` a prompt whose samples all failed is not lost:
its chosen side is the dataset's own passing reply to that prompt (the first
assistant turn of a passing row, rendered by the chat template), against the
policy's mistakes, as SPIN pairs the gold reply against the model's own
generation (Chen et al. 2024, arXiv:2401.01335). So kinds the policy never gets
right by sampling still get a gradient; the rendered gold reply must pass the
judge, or the prompt gives no pair.

The pairs are TRL's standard (text) preference rows: ``prompt`` is the chat
template's rendering of the prompt with its tools and the generation prompt,
exactly what the policy was sampled from; ``chosen`` / ``rejected`` are the
sampled tokens decoded, ending with the end-of-turn token. A reply the token cap
cut (no end-of-turn token) is left out of the pairs, as GRPO masks it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypedDict

from whileai.core.spec import DPOSpec

from whileai.jobs import _evaluation
from whileai.domain import defaults

__all__ = ["policy_pairs", "PolicyPairsReport"]


class PolicyPairsReport(TypedDict):
    """What :func:`policy_pairs` sampled and paired (the summary's ``policy_pairs``)."""

    prompts: int  # the prompts that fit the context with a full reply
    samples_per_prompt: int
    max_new_tokens: int
    temperature: float
    samples: int
    sampled_pass_rate: float | None  # the judge's passes over the samples; None without a sample
    cut_by_cap: int  # replies the token cap cut (left out of the pairs)
    mixed_prompts: int  # prompts whose samples both passed and failed
    gold_chosen_prompts: int  # prompts whose chosen side is the dataset's passing reply (policy_gold)
    pairs: int
    pairs_per_prompt: int
    left_out_too_long: int


def _prompts(rows: list[dict[str, Any]], seed: int) -> list[Mapping[str, Any]]:
    """One row per distinct prompt that carries a gold first action (what the judge needs)."""
    with_gold: list[Mapping[str, Any]] = [r for r in rows if r.get("gold") is not None]
    if not with_gold:
        raise ValueError("dpo with pair_source='policy' judges the policy's own replies against each row's gold, and "
                         "no row carries one; grade the rows with a gold first action (docs/rows.md), or use "
                         "pair_source='rows'")
    return list(_evaluation.distinct_prompts(with_gold, len(with_gold), seed))


def _gold_replies(tokenizer: Any, rows: list[dict[str, Any]]) -> dict[str, str]:
    """Per prompt (its rendered text), a passing row's first assistant turn as the policy would write it.

    The chat template renders the prompt with that turn and without it; the reply
    is the difference, up to and including the end-of-turn token (what a sampled
    reply ends with). A template that does not render the prompt as a prefix of the
    whole gives no reply for that prompt.
    """
    from whileai.domain.export import decoding_chat_template
    from whileai.domain.rows.rollouts import prompt_messages

    eos = tokenizer.eos_token or ""
    out: dict[str, str] = {}
    with decoding_chat_template(tokenizer):
        for row in rows:
            if row.get("passed") is not True:
                continue
            prompt = prompt_messages(row)
            messages = list(row.get("messages") or [])
            if len(messages) <= len(prompt) or messages[len(prompt)].get("role") != "assistant":
                continue
            tools = row.get("tools") or None
            head = tokenizer.apply_chat_template(prompt, tools=tools, add_generation_prompt=True, tokenize=False)
            if head in out:
                continue
            whole = tokenizer.apply_chat_template(prompt + [messages[len(prompt)]], tools=tools, tokenize=False)
            if not whole.startswith(head):
                continue
            reply = whole[len(head):]
            if eos and eos in reply:
                reply = reply[: reply.index(eos) + len(eos)]
            out[head] = reply
    return out


def _sample(model: Any, tokenizer: Any, encoded: list[list[int]], k: int, max_new_tokens: int,
            temperature: float) -> list[list[tuple[list[int], bool]]]:
    """``k`` sampled replies per prompt: (token ids up to and including the end-of-turn token, ended)."""
    import torch

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    eos = tokenizer.eos_token_id
    dev = next(model.parameters()).device
    input_ids, mask, width = _evaluation.left_padded(encoded, pad, dev)
    with torch.no_grad():
        out = model.generate(input_ids=input_ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=True,
                             temperature=temperature, top_k=0, top_p=1.0, num_return_sequences=k,
                             pad_token_id=pad, eos_token_id=eos)
    replies: list[list[tuple[list[int], bool]]] = [[] for _ in encoded]
    for j, seq in enumerate(out[:, width:].tolist()):
        ended = eos in seq
        replies[j // k].append((seq[: seq.index(eos) + 1] if ended else seq, ended))
    return replies


def _fitting(tokenizer: Any, prompts: list[Mapping[str, Any]], cap: int,
             context: int) -> list[tuple[Mapping[str, Any], list[int]]]:
    """``(row, prompt token ids)`` for each prompt whose tokens plus a ``cap``-token reply fit ``context``; raises,
    saying what to change, where none does."""
    # each prompt rendered once, as the held-out measurement renders it; its length decides whether it fits
    fitting = [(r, ids) for r in prompts if len(ids := _evaluation.encode_prompt(tokenizer, r)) + cap <= context]
    if not fitting:
        raise ValueError(f"dpo with pair_source='policy' has no prompt that fits the model's context of {context} "
                         f"tokens with a {cap}-token reply ({len(prompts)} prompts); shorten the prompts or use a base "
                         "with a longer context")
    return fitting


def _judged(tokenizer: Any, replies: list[tuple[list[int], bool]], row: Mapping[str, Any],
            fmt: Any) -> tuple[list[str], list[str], int, int]:
    """One prompt's samples judged: ``(good, bad, passed, cut)``, the distinct passing and failing replies (decoded,
    end-of-turn token kept), how many samples passed, and how many the token cap cut (judged neither way)."""
    from whileai.domain.judges.judging import judge_reply

    good: list[str] = []
    bad: list[str] = []
    passed = cut = 0
    for seq, ended in replies:
        if not ended:
            cut += 1
            continue
        text = tokenizer.decode(seq, skip_special_tokens=False)
        ok = bool(judge_reply(text[: -len(tokenizer.eos_token)], row, tool_format=fmt)["passed"])
        passed += ok
        side = good if ok else bad
        if text not in side:
            side.append(text)
    return good, bad, passed, cut


def _gold_passes(tokenizer: Any, reply: str, row: Mapping[str, Any], fmt: Any) -> bool:
    """Whether the dataset's rendered passing reply (``""``: none for this prompt) passes the judge, so it can be
    the chosen side of a prompt whose samples all failed."""
    from whileai.domain.judges.judging import judge_reply

    stripped = reply.removesuffix(tokenizer.eos_token or "")
    return bool(reply and judge_reply(stripped, row, tool_format=fmt)["passed"])


def _prompt_pairs(prompt_text: str, good: list[str], bad: list[str], per_prompt: int) -> list[dict[str, str]]:
    """Up to ``per_prompt`` pairs for one prompt: each distinct mistake against a pass (none without both sides)."""
    if not (good and bad):
        return []
    # each distinct mistake against a pass (a policy that knows the task often writes one pass)
    return [{"prompt": prompt_text, "chosen": good[i % len(good)], "rejected": bad[i]}
            for i in range(min(per_prompt, len(bad)))]


def _sampled_pairs(model: Any, tokenizer: Any, fitting: list[tuple[Mapping[str, Any], list[int]]], spec: DPOSpec,
                   cap: int, fmt: Any, gold_replies: dict[str, str],
                   on_batch: Callable[[int, int], None] | None) -> tuple[list[dict[str, str]], dict[str, int]]:
    """Sample, judge and pair every fitting prompt, a batch of prompts at a time: ``(pairs, counts)``, the counts
    being the samples, passes, cut replies, mixed prompts and prompts whose chosen side is the dataset's pass.
    ``fmt`` is the run's tool convention, the format the policy's replies are written in."""
    pairs: list[dict[str, str]] = []
    counts = {"sampled": 0, "passed": 0, "cut": 0, "mixed": 0, "from_gold": 0}
    size = defaults.DPO_POLICY_BATCH_PROMPTS
    for start in range(0, len(fitting), size):
        if on_batch is not None:
            on_batch(start, len(fitting))
        batch = [row for row, _ in fitting[start : start + size]]
        encoded = [ids for _, ids in fitting[start : start + size]]
        for row, ids, replies in zip(batch, encoded, _sample(model, tokenizer, encoded, spec.policy_samples, cap,
                                                             defaults.DPO_POLICY_TEMPERATURE), strict=True):
            good, bad, passed, cut = _judged(tokenizer, replies, row, fmt)
            counts["sampled"] += len(replies)
            counts["passed"] += passed
            counts["cut"] += cut
            prompt_text = tokenizer.decode(ids, skip_special_tokens=False)
            counts["mixed"] += bool(good and bad)
            if bad and not good and gold_replies:  # every sample failed: the dataset's pass is the chosen side
                reply = gold_replies.get(prompt_text, "")
                if _gold_passes(tokenizer, reply, row, fmt):
                    good.append(reply)
                    counts["from_gold"] += 1
            pairs += _prompt_pairs(prompt_text, good, bad, defaults.DPO_POLICY_PAIRS_PER_PROMPT)
    if on_batch is not None:
        on_batch(len(fitting), len(fitting))
    return pairs, counts


def policy_pairs(model: Any, tokenizer: Any, rows: list[dict[str, Any]], spec: DPOSpec, context: int,
                 on_batch: Callable[[int, int], None] | None = None) -> tuple[list[dict[str, str]], PolicyPairsReport]:
    """``(pairs, report)``: TRL text preference rows from the policy's judged samples, and what was sampled.

    ``context`` is the model's token limit: a prompt whose tokens plus the reply
    cap exceed it is left out and counted (``left_out_too_long``).
    ``on_batch(prompts_done, prompts)`` is called before the first batch and after each.
    """
    k = spec.policy_samples
    cap = min(spec.max_completion_length,
              defaults.DPO_POLICY_MAX_NEW_TOKENS)
    per_prompt = defaults.DPO_POLICY_PAIRS_PER_PROMPT
    prompts = _prompts(rows, spec.seed)
    gold_replies = _gold_replies(tokenizer, rows) if spec.pair_source == "policy_gold" else {}
    fitting = _fitting(tokenizer, prompts, cap, context)
    from whileai.kit import reply_format

    fmt = reply_format(tokenizer)  # the run's tool convention: the format the policy's replies are written in
    was_training = model.training
    model.eval()
    try:
        pairs, counts = _sampled_pairs(model, tokenizer, fitting, spec, cap, fmt, gold_replies, on_batch)
    finally:
        if was_training:
            model.train()
    sampled, passed = counts["sampled"], counts["passed"]
    report: PolicyPairsReport = {"prompts": len(fitting), "samples_per_prompt": k, "max_new_tokens": cap, "temperature": defaults.DPO_POLICY_TEMPERATURE,
              "samples": sampled, "sampled_pass_rate": round(passed / sampled, 4) if sampled else None,
              "cut_by_cap": counts["cut"], "mixed_prompts": counts["mixed"], "gold_chosen_prompts": counts["from_gold"],
              "pairs": len(pairs), "pairs_per_prompt": per_prompt,
              "left_out_too_long": len(prompts) - len(fitting)}
    return pairs, report
