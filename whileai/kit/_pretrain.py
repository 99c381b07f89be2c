"""The demo base's pre-training: generic chat, copy and tool-call-shape data, built in code.

LoRA on a randomly initialised model learns nothing (the frozen random
embeddings and norms keep the logits flat), so the kit pre-trains its tiny model
briefly on building blocks the sample task needs but not the task itself:

- ``echo``: the user gives a span of words, cities, units or numbers and the
  assistant repeats it (copying any token from the ask);
- ``call``: the system lists made-up tools and the user names one with its
  values, either literally ("use find_note with topic apple and count 7") or by
  value only ("find_note Oslo 7"), where each value's kind (a city, a unit, a
  number) says which slot it fills; the assistant writes the ``<tool_call>``
  JSON (JSON shape, keys from the tool list, values copied from the ask,
  numbers unquoted);
- ``report``: after a made-up call and its tool response the assistant reads
  one value back ("The count is 7.") (the tool turn and the final reply).

Every token the sample task's first actions need is written by an assistant
turn here, so its (tied) embedding is trained before LoRA, which trains none:
the echo spans draw from the task's identifier words (``_vocab.TOOL_WORDS``:
``get_weather``, ``set_timer``, ...) and whole stock replies
(``_vocab.STOCK_REPLIES``, the small-talk answers among them), and a share
``defaults.KIT_BASE_TASK_NAME_SHARE`` of the made-up tools carry a task tool's
name (with made-up parameters, spelled out in the ask). A base that never wrote
those tokens keeps them at random init: after LoRA SFT they won greedy decoding
at p ~0.01, so sampled replies passed far less often than greedy ones and GRPO's
groups carried no advantage. The sample task's asks, parameters and
answers-to-asks never appear, so the base's held-out first-action pass rate on
the sample task stays near 0 until it is fine-tuned. The recipe's numbers are
``defaults.KIT_BASE_*``.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypedDict

from whileai.kit import _vocab

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["Conversation", "copy_friendly_init", "pretrain", "pretrain_conversations"]


class Conversation(TypedDict):
    """One pre-training conversation: its chat messages and the tools offered (None for an echo)."""

    messages: list[dict[str, Any]]  #: chat messages as the chat template reads them
    tools: list[dict[str, Any]] | None  #: OpenAI-style tool schemas


#: The sample task's tools: never used as made-up tool names here.
_RESERVED = {"get_weather", "convert", "set_timer", "get_time"}


#: Argument names whose values come from one category, so a value's kind says which slot it fills.
_CITY_KEYS = ("city", "town", "place", "destination", "origin")
_UNIT_KEYS = ("unit", "from_unit", "to_unit", "scale", "measure")
_NUMBER_KEYS = ("amount", "minutes", "count", "number", "size", "days", "hours", "value")


def _units() -> list[str]:
    return list(_vocab.TEMPERATURE_UNITS) + [u for a, b, _ in _vocab.CONVERSIONS for u in (a, b)]


def _words() -> list[str]:
    return [w for w in _vocab.GENERIC_WORDS if w.isidentifier()]


def _fake_tool(rng: random.Random, task_name_share: float = 0.0) -> dict[str, Any]:
    """A made-up tool; with chance ``task_name_share`` it carries a task tool's name (never its parameters)."""
    words = _words()
    if rng.random() < task_name_share:
        name = rng.choice(sorted(_RESERVED))
    else:
        while True:
            name = f"{rng.choice(words)}_{rng.choice(words)}"
            if name not in _RESERVED:
                break
    params: dict[str, Any] = {}
    for _ in range(rng.randint(1, 3)):
        pool = rng.choice([_CITY_KEYS, _UNIT_KEYS, _NUMBER_KEYS, tuple(words)])
        key = rng.choice(pool)
        params[key] = {"type": "integer" if key in _NUMBER_KEYS else "string"}
    return {"type": "function", "function": {
        "name": name, "description": " ".join(rng.choice(words) for _ in range(rng.randint(1, 3))) + ".",
        "parameters": {"type": "object", "properties": params, "required": list(params)}}}


def _value(rng: random.Random, key: str) -> Any:
    if key in _NUMBER_KEYS:
        return rng.randint(0, 300)
    if key in _CITY_KEYS:
        return rng.choice(_vocab.CITIES)
    if key in _UNIT_KEYS:
        return rng.choice(_units())
    return rng.choice(_words())


def _call_example(rng: random.Random, task_name_share: float = 0.0) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict]:
    """A made-up call spelled out in the ask: literally (key and value) or by value only.

    By value only, each value's kind (a city, a unit, a number) says which slot it fills.
    """
    tools: list[dict[str, Any]] = []
    wanted = rng.randint(1, 3)
    while len(tools) < wanted:
        tool_ = _fake_tool(rng, task_name_share)
        if all(t["function"]["name"] != tool_["function"]["name"] for t in tools):
            tools.append(tool_)
    tool = rng.choice(tools)["function"]
    args = {k: _value(rng, k) for k in tool["parameters"]["properties"]}
    if rng.random() < 0.5:
        said = " and ".join(f"{k} {v}" for k, v in args.items())
        ask = rng.choice(["use {n} with {a}", "call {n} with {a}", "run {n}: {a}", "{n} with {a} please"])
    else:
        values = [str(v) for v in args.values()]  # in the tool's order: same-kind values stay ordered
        said = rng.choice([" ", ", ", " in ", " for "]).join(values)
        ask = rng.choice(["{n} {a}", "{n} for {a}?", "please {n}: {a}", "I need {n} {a}."])
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": ask.format(n=tool["name"], a=said)},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": tool["name"], "arguments": args}}]},
    ]
    return messages, tools, args


def pretrain_conversations(n: int, seed: int = 0) -> list[Conversation]:
    """``n`` pre-training conversations (``{"messages", "tools"}``), deterministic for ``seed``."""
    from whileai.kit import defaults

    rng = random.Random(seed)
    words = _words() + list(_vocab.CITIES) + _units() + [str(i) for i in range(0, 301)]
    identifiers = list(_vocab.TOOL_WORDS)
    share = defaults.KIT_BASE_TASK_NAME_SHARE
    out: list[Conversation] = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.25:
            if rng.random() < defaults.KIT_BASE_STOCK_REPLY_SHARE:
                span = rng.choice(_vocab.STOCK_REPLIES)
            else:
                pool = identifiers if rng.random() < defaults.KIT_BASE_IDENTIFIER_SHARE else words
                span = " ".join(rng.choice(pool) for _ in range(rng.randint(1, 6)))
            lead = rng.choice(["Repeat after me: ", "Say: ", "Echo ", "Copy this: "])
            msgs = [{"role": "user", "content": lead + span}, {"role": "assistant", "content": span}]
            if rng.random() < 0.5:
                msgs.insert(0, {"role": "system", "content": "You repeat what you are told."})
            out.append({"messages": msgs, "tools": None})
        elif kind < 0.9:
            msgs, tools, _ = _call_example(rng, share)
            if rng.random() < 0.2:
                msgs.insert(0, {"role": "system", "content": "You call the tool you are told to call."})
            out.append({"messages": msgs, "tools": tools})
        else:
            msgs, tools, args = _call_example(rng, share)
            result = {k: _value(rng, k) for k in args}
            key = rng.choice(sorted(result))
            msgs.append({"role": "tool", "tool_call_id": "call_0", "content": json.dumps(result)})
            msgs.append({"role": "assistant", "content": f"The {key} is {result[key]}."})
            out.append({"messages": msgs, "tools": tools})
    return out


def copy_friendly_init(model: PreTrainedModel) -> None:
    """Set every attention layer's value and output projections to the identity.

    An attention head then adds the (normed) embedding of the token it attends
    to, and the tied unembedding reads that token straight back: copying needs
    only the attention pattern to be learned. On the kit's tiny model this
    turned a phase change that had not happened by step 400 (echo loss 1.8) into
    echo loss 0.04 by step 200 (defaults.KIT_BASE_COPY_INIT).
    """
    import torch

    with torch.no_grad():
        for layer in model.model.layers:
            for proj in (layer.self_attn.v_proj, layer.self_attn.o_proj):
                proj.weight.copy_(torch.eye(*proj.weight.shape, dtype=proj.weight.dtype))


def _encode(tokenizer: PreTrainedTokenizerBase, conv: Conversation) -> tuple[list[int], list[int]]:
    enc = tokenizer.apply_chat_template(
        conv["messages"], tools=None if conv["tools"] is None else [*conv["tools"]], tokenize=True, return_dict=True,
        return_assistant_tokens_mask=True,
    )
    if not isinstance(enc, Mapping):  # return_dict=True: a BatchEncoding (transformers types every return shape together)
        raise TypeError(f"apply_chat_template(return_dict=True) returned a {type(enc).__name__}, not a mapping")
    return list(enc["input_ids"]), list(enc["assistant_masks"])


def pretrain(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, seed: int = 0,
             steps: int | None = None, log: Any = None, every: int = 100) -> dict[str, float]:
    """Pre-train ``model`` in place on ``pretrain_conversations``; returns loss and timing figures.

    Plain PyTorch (AdamW, linear warmup then cosine decay). The loss is on the
    assistant turns, with every other token weighted ``defaults.KIT_BASE_CONTEXT_WEIGHT``
    (the asks are random words: predicting them is noise). Steps, batch, learning
    rate and data size are ``defaults.KIT_BASE_*``. ``log(step, model, mean_loss)``
    is called every ``every`` steps when given.
    """
    import math

    import torch

    from whileai.kit import defaults

    steps = defaults.KIT_BASE_STEPS if steps is None else steps
    batch = defaults.KIT_BASE_BATCH
    if defaults.KIT_BASE_COPY_INIT:
        copy_friendly_init(model)
    convs = pretrain_conversations(defaults.KIT_BASE_EXAMPLES, seed=seed)
    encoded = [_encode(tokenizer, c) for c in convs]
    gen = torch.Generator().manual_seed(seed)
    pad = tokenizer.pad_token_id
    opt = torch.optim.AdamW(model.parameters(), lr=defaults.KIT_BASE_LR, betas=(0.9, 0.98),
                            weight_decay=defaults.KIT_BASE_WEIGHT_DECAY)
    warmup = max(1, int(steps * defaults.KIT_BASE_WARMUP_RATIO))

    def lr_at(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    model.train()
    start, cpu, losses = time.perf_counter(), time.process_time(), []
    for step in range(steps):
        idx = torch.randint(len(encoded), (batch,), generator=gen).tolist()
        width = max(len(encoded[i][0]) for i in idx)
        ids = torch.full((batch, width), pad, dtype=torch.long)
        weight = torch.zeros((batch, width))
        attn = torch.zeros((batch, width), dtype=torch.long)
        for row, i in enumerate(idx):
            toks, mask = encoded[i]
            ids[row, : len(toks)] = torch.tensor(toks)
            attn[row, : len(toks)] = 1
            m = torch.tensor(mask, dtype=torch.float)
            weight[row, : len(toks)] = m + defaults.KIT_BASE_CONTEXT_WEIGHT * (1.0 - m)
        logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1]
        target, w = ids[:, 1:], weight[:, 1:]
        tok_loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1),
                                                     reduction="none").view_as(w)
        loss = (tok_loss * w).sum() / w.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if log is not None and (step + 1) % every == 0:
            log(step + 1, model, sum(losses[-every:]) / every)
            model.train()
    model.eval()
    tail = losses[-50:] or [float("nan")]
    return {"steps": steps, "seconds": round(time.perf_counter() - start, 1),
            "cpu_seconds": round(time.process_time() - cpu, 1), "threads": torch.get_num_threads(),
            "first_loss": round(losses[0], 3) if losses else float("nan"),
            "final_loss": round(sum(tail) / len(tail), 3)}
