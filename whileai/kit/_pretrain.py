"""The demo base's pre-training: generic chat, copy and tool-call-shape data, built in code.

LoRA on a randomly initialised model learns nothing (the frozen random
embeddings and norms keep the logits flat), so the kit pre-trains its tiny model
briefly on building blocks the sample task needs but not the task itself:

- ``echo``: the user gives a span of words, cities, units or numbers and the
  assistant repeats it (copying any token from the ask);
- ``call``: the system lists made-up tools and the user spells out the call
  literally ("use find_note with topic apple and count 7"); the assistant
  writes the ``<tool_call>`` JSON (JSON shape, keys from the tool list, values
  copied from the ask, numbers unquoted);
- ``report``: after a made-up call and its tool response the assistant reads
  one value back ("The count is 7.") (the tool turn and the final reply).

None of the sample task's tools or phrasings appear, so the base's held-out
first-action pass rate on the sample task stays near 0 until it is fine-tuned.
The recipe's numbers are ``defaults.KIT_BASE_*``.
"""

from __future__ import annotations

import json
import random
import time
from typing import TYPE_CHECKING, Any

from whileai.kit import _vocab

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["pretrain", "pretrain_conversations"]

#: The sample task's tools: never used as made-up tool names here.
_RESERVED = {"get_weather", "convert", "set_timer", "get_time"}
_TYPES = ("string", "integer", "number")


def _value_words() -> list[str]:
    units = [u for a, b, _ in _vocab.CONVERSIONS for u in (a, b)]
    return list(_vocab.GENERIC_WORDS) + list(_vocab.CITIES) * 3 + list(_vocab.TEMPERATURE_UNITS) * 6 + units * 3


def _fake_tool(rng: random.Random) -> dict[str, Any]:
    while True:
        name = f"{rng.choice(_vocab.GENERIC_WORDS)}_{rng.choice(_vocab.GENERIC_WORDS)}"
        if name not in _RESERVED and name.isidentifier():
            break
    params: dict[str, Any] = {}
    for _ in range(rng.randint(1, 3)):
        key = rng.choice(_vocab.GENERIC_WORDS + ("city", "unit", "amount", "minutes", "from_unit", "to_unit"))
        if key.isidentifier():
            params[key] = {"type": rng.choice(_TYPES)}
    if not params:
        params["value"] = {"type": "string"}
    return {"type": "function", "function": {
        "name": name, "description": " ".join(rng.choice(_vocab.GENERIC_WORDS) for _ in range(rng.randint(2, 5))) + ".",
        "parameters": {"type": "object", "properties": params, "required": list(params)}}}


def _value(rng: random.Random, kind: str, words: list[str]) -> Any:
    if kind in ("integer", "number"):
        return rng.randint(0, 300)
    return rng.choice(words)


def _call_example(rng: random.Random, words: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict]:
    tools = [_fake_tool(rng) for _ in range(rng.randint(1, 4))]
    tool = rng.choice(tools)["function"]
    args = {k: _value(rng, v["type"], words) for k, v in tool["parameters"]["properties"].items()}
    said = " and ".join(f"{k} {v}" for k, v in args.items())
    ask = rng.choice(["use {n} with {a}", "call {n} with {a}", "run {n}: {a}", "{n} with {a} please"])
    messages = [
        {"role": "user", "content": ask.format(n=tool["name"], a=said)},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": tool["name"], "arguments": args}}]},
    ]
    return messages, tools, args


def pretrain_conversations(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` pre-training conversations (``{"messages", "tools"}``), deterministic for ``seed``."""
    rng = random.Random(seed)
    words = _value_words() + [str(i) for i in range(0, 301)]
    out: list[dict[str, Any]] = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.3:
            span = " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))
            lead = rng.choice(["Repeat after me: ", "Say: ", "Echo ", "Copy this: "])
            msgs = [{"role": "user", "content": lead + span}, {"role": "assistant", "content": span}]
            if rng.random() < 0.5:
                msgs.insert(0, {"role": "system", "content": "You repeat what you are told."})
            out.append({"messages": msgs, "tools": None})
        elif kind < 0.8:
            msgs, tools, _ = _call_example(rng, words)
            if rng.random() < 0.5:
                msgs.insert(0, {"role": "system", "content": "You call the tool you are told to call."})
            out.append({"messages": msgs, "tools": tools})
        else:
            msgs, tools, args = _call_example(rng, words)
            result = {k: _value(rng, "integer" if rng.random() < 0.5 else "string", words) for k in args}
            key = rng.choice(sorted(result))
            msgs.append({"role": "tool", "tool_call_id": "call_0", "content": json.dumps(result)})
            msgs.append({"role": "assistant", "content": f"The {key} is {result[key]}."})
            out.append({"messages": msgs, "tools": tools})
    return out


def _encode(tokenizer: PreTrainedTokenizerBase, conv: dict[str, Any]) -> tuple[list[int], list[int]]:
    enc = tokenizer.apply_chat_template(
        conv["messages"], tools=conv["tools"], tokenize=True, return_dict=True,
        return_assistant_tokens_mask=True,
    )
    return list(enc["input_ids"]), list(enc["assistant_masks"])


def pretrain(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, seed: int = 0,
             steps: int | None = None, log: Any = None) -> dict[str, float]:
    """Pre-train ``model`` in place on ``pretrain_conversations``; returns loss and timing figures.

    Plain PyTorch (AdamW, linear warmup then cosine decay), loss on every token
    with the assistant turns weighted by ``defaults.KIT_BASE_ASSISTANT_WEIGHT``.
    Steps, batch, learning rate and data size are ``defaults.KIT_BASE_*``.
    """
    import math

    import torch

    from whileai.simulations import defaults

    steps = defaults.KIT_BASE_STEPS if steps is None else steps
    batch = defaults.KIT_BASE_BATCH
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
    start, losses = time.perf_counter(), []
    for step in range(steps):
        idx = torch.randint(len(encoded), (batch,), generator=gen).tolist()
        width = max(len(encoded[i][0]) for i in idx)
        ids = torch.full((batch, width), pad, dtype=torch.long)
        weight = torch.zeros((batch, width))
        for row, i in enumerate(idx):
            toks, mask = encoded[i]
            ids[row, : len(toks)] = torch.tensor(toks)
            weight[row, : len(toks)] = 1.0 + (defaults.KIT_BASE_ASSISTANT_WEIGHT - 1.0) * torch.tensor(mask, dtype=torch.float)
        attn = (weight > 0).long()
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
        if log is not None and (step + 1) % 100 == 0:
            log(f"step {step + 1}/{steps} loss {sum(losses[-100:]) / 100:.3f}")
    model.eval()
    tail = losses[-50:] or [float("nan")]
    return {"steps": steps, "seconds": round(time.perf_counter() - start, 1),
            "first_loss": round(losses[0], 3) if losses else float("nan"),
            "final_loss": round(sum(tail) / len(tail), 3)}
