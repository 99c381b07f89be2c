"""Held-out prompts in, completions and their log-probabilities out: HackMonitor's model side.

The default sampler renders each prompt the way TRL's GRPO does (the chat
template with a generation prompt for a message list, the text as is for a
string), samples with ``model.generate`` in batches, and keeps the token ids so
the sequence KL to the reference can be measured on exactly what was sampled.
torch is imported inside the functions: the monitor's statistics run without it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from whileai.core.toolcalls import parse_tool_calls

__all__ = [
    "HeldOut",
    "held_out_rows",
    "prompt_key",
    "gold_row",
    "trl_completion",
    "trl_completions",
    "generate",
    "has_adapter",
    "sequence_kl",
    "tokenize_completions",
    "measure_kl",
    "prompt_ids_of",
]

#: Keyword names the trainer passes a reward function itself; never dataset columns.
RESERVED = frozenset({"prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric",
                      "environments"})


class HeldOut:
    """One held-out prompt: what the policy sees, the tools it may call, and the row's other columns."""

    __slots__ = ("prompt", "tools", "columns")

    def __init__(self, prompt: Any, tools: Any, columns: dict[str, Any]):
        self.prompt = prompt
        self.tools = tools
        self.columns = columns


def _is_messages(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(m, Mapping) and "role" in m for m in value) \
        and len(value) > 0


def held_out_rows(holdout: Sequence[Any]) -> list[HeldOut]:
    """Read the holdout: strings, message lists, ``{"prompt": ...}`` rows or rollout rows (``messages``).

    Raises ValueError naming every row that is none of these.
    """
    out: list[HeldOut] = []
    problems: list[str] = []
    for i, row in enumerate(holdout):
        if isinstance(row, str) and row.strip():
            out.append(HeldOut(row, None, {}))
        elif _is_messages(row):
            out.append(HeldOut([dict(m) for m in row], None, {}))
        elif isinstance(row, Mapping) and ("prompt" in row or "messages" in row):
            columns = {k: v for k, v in row.items() if k not in ("prompt", "messages") and k not in RESERVED}
            if "prompt" in row:
                prompt = row["prompt"]
            else:
                prompt = []
                for m in row["messages"] or []:
                    if isinstance(m, Mapping) and m.get("role") == "assistant":
                        break
                    prompt.append(dict(m))
            if not (isinstance(prompt, str) and prompt.strip()) and not _is_messages(prompt):
                problems.append(f"row {i}: its prompt is {type(prompt).__name__} {str(prompt)[:60]!r}")
                continue
            out.append(HeldOut(prompt, row.get("tools") or None, columns))
        else:
            problems.append(f"row {i}: {type(row).__name__} {str(row)[:60]!r}")
    if problems:
        raise ValueError(
            f"holdout has {len(problems)} row(s) that are not prompts: " + "; ".join(problems[:5])
            + ". Each row is a prompt string, a list of chat messages, {'prompt': ..., <columns>} "
              "or a rollout row with 'messages'"
        )
    return out


def prompt_key(prompt: Any) -> str:
    """A stable key for a prompt (string or messages), to group a prompt's completions."""
    if isinstance(prompt, str):
        text = prompt
    else:
        text = json.dumps(prompt, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=8).hexdigest()


def gold_row(prompt: Any, text: str, columns: Mapping[str, Any], tools: Any = None,
             tool_format: str = "hermes") -> dict[str, Any]:
    """The rollout row a gold judge reads: the prompt's messages, the completion as an assistant turn, the columns.

    The completion's tool calls, written in ``tool_format`` (the policy's
    template's convention, ``whileai.kit.reply_format``), become OpenAI wire
    ``tool_calls``; a ``gold`` column held as JSON text is decoded to the
    reference action.
    """
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]
    content, calls = parse_tool_calls(text, tool_format)
    turn: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        turn["tool_calls"] = calls
    row = {k: v for k, v in columns.items()}
    gold = row.get("gold")
    if isinstance(gold, str) and gold.lstrip().startswith("{"):
        try:  # a dataset column keeps gold as JSON text (Arrow cannot hold mixed dicts); judges want the dict
            row["gold"] = json.loads(gold)
        except ValueError:
            pass
    row["messages"] = messages + [turn]
    if tools and "tools" not in row:
        row["tools"] = tools
    return row


def trl_completion(prompt: Any, text: str) -> Any:
    """The completion in the shape TRL hands a reward function for this prompt (no response parser)."""
    return text if isinstance(prompt, str) else [{"role": "assistant", "content": text}]


def trl_completions(held: Sequence[HeldOut], texts: list[list[str]], prompt_ids: list[list[int]] | None,
                    completion_ids: list[list[list[int]]] | None, tokenizer: Any) -> list[Any]:
    """Every completion, flattened, in the shape TRL's GRPO hands a reward function.

    A string prompt gets the text; a conversation gets one assistant message,
    parsed into content and tool calls with TRL's ``parse_response`` when the
    tokenizer carries a response parser (what GRPO itself does), else the
    decoded text as content.
    """
    parser: Callable[..., Any] | None = None
    if tokenizer is not None and prompt_ids is not None and completion_ids is not None and (
            getattr(tokenizer, "response_template", None) is not None
            or getattr(tokenizer, "response_schema", None) is not None):
        try:
            from trl.chat_template_utils import parse_response as parser
        except ImportError:  # pragma: no cover - an older TRL
            parser = None
    out: list[Any] = []
    for p, (h, ts) in enumerate(zip(held, texts)):
        for j, text in enumerate(ts):
            # the ids are always there when a parser is (it is only imported with them)
            if parser is not None and prompt_ids is not None and completion_ids is not None \
                    and not isinstance(h.prompt, str):
                try:
                    out.append([parser(tokenizer, completion_ids[p][j], prefix=prompt_ids[p], tools=h.tools)])
                    continue
                except Exception:  # TRL falls back to the plain text too
                    pass
            out.append(trl_completion(h.prompt, text))
    return out


# ---------------------------------------------------------------------------
# Sampling and log-probabilities (torch)
# ---------------------------------------------------------------------------


def prompt_ids_of(tokenizer: Any, prompt: Any, tools: Any) -> list[int]:
    if isinstance(prompt, str):
        return list(tokenizer(prompt)["input_ids"])
    kwargs = {"tools": tools} if tools else {}
    encoded = tokenizer.apply_chat_template(list(prompt), add_generation_prompt=True, tokenize=True,
                                            return_dict=True, **kwargs)
    ids = encoded["input_ids"]
    return list(ids[0] if ids and isinstance(ids[0], list) else ids)


def _eos_ids(model: Any, tokenizer: Any) -> list[int]:
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    if eos is None:
        return []
    return list(eos) if isinstance(eos, (list, tuple)) else [int(eos)]


def _device(model: Any) -> Any:
    return next(model.parameters()).device


@contextlib.contextmanager
def random_state_kept() -> Iterator[None]:
    """Torch's (every CUDA device's too), Python's and NumPy's global random state, as they were on entry.

    A look's judges draw from them: loading a reward-model judge initialises its
    fresh score head from torch's generator before its weights are read. Drawn
    inside a training loop, that moves every later GRPO sample, so a run with a
    gold judge is not the run without one (on the kit: 38 -> 39 of 73 held-out
    prompts where the same run without the judge went 38 -> 49).
    """
    import random

    import numpy as np
    import torch

    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    python_state, numpy_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            random.setstate(python_state)
            np.random.set_state(numpy_state)


@contextlib.contextmanager
def _eval_mode(model: Any) -> Iterator[None]:
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def generate(model: Any, tokenizer: Any, held: Sequence[HeldOut], *, n: int, max_new_tokens: int,
             sampling: Mapping[str, Any], seed: int) -> tuple[list[list[str]], list[list[int]], list[list[list[int]]]]:
    """Sample ``n`` completions per prompt. Returns (texts, prompt ids, completion ids), per prompt.

    Completion ids run up to and including the end-of-turn token when one was
    sampled. The trainer's random state is left as it was (the sampler forks it)
    and so is the model's train/eval mode.
    """
    import torch

    prompt_ids = [prompt_ids_of(tokenizer, h.prompt, h.tools) for h in held]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (_eos_ids(model, tokenizer) or [0])[0]
    eos = set(_eos_ids(model, tokenizer))
    device = _device(model)
    per_call = max(1, int(sampling["batch"]) // n)
    texts: list[list[str]] = []
    completion_ids: list[list[list[int]]] = []
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.no_grad(), torch.random.fork_rng(devices=devices), _eval_mode(model):
        torch.manual_seed(seed)
        for start in range(0, len(prompt_ids), per_call):
            chunk = prompt_ids[start : start + per_call]
            width = max(len(p) for p in chunk)
            input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in chunk], device=device)
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk], device=device)
            out = model.generate(
                input_ids=input_ids, attention_mask=mask, do_sample=True,
                temperature=float(sampling["temperature"]), top_p=float(sampling["top_p"]),
                top_k=int(sampling["top_k"]), max_new_tokens=max_new_tokens, num_return_sequences=n,
                pad_token_id=pad, eos_token_id=sorted(eos) or None, use_cache=True,
            )
            rows = out[:, width:].tolist()
            for p in range(len(chunk)):
                ids_p, texts_p = [], []
                for seq in rows[p * n : (p + 1) * n]:
                    cut = len(seq)
                    for t, tok in enumerate(seq):
                        if tok in eos:
                            cut = t + 1
                            break
                    seq = seq[:cut]
                    ids_p.append(seq)
                    texts_p.append(tokenizer.decode(seq, skip_special_tokens=True))
                completion_ids.append(ids_p)
                texts.append(texts_p)
    return texts, prompt_ids, completion_ids


def has_adapter(model: Any) -> bool:
    """Whether the model carries a LoRA-style adapter that can be switched off to get the reference."""
    if model is None:
        return False
    if getattr(model, "peft_config", None) and callable(getattr(model, "disable_adapter", None)):
        return True
    return bool(getattr(model, "_hf_peft_config_loaded", False)) and callable(getattr(model, "disable_adapters", None))


@contextlib.contextmanager
def _adapter_off(model: Any) -> Iterator[None]:
    if getattr(model, "peft_config", None) and callable(getattr(model, "disable_adapter", None)):
        with model.disable_adapter():
            yield
        return
    model.disable_adapters()
    try:
        yield
    finally:
        model.enable_adapters()


def _completion_logits(model: Any, ps: list[list[int]], cs: list[list[int]], *, temperature: float,
                       pad: int) -> tuple[Any, Any, Any]:
    """Next-token log-probabilities over the vocabulary at every completion position (left-padded batch).

    Returns (log-probs [batch, positions, vocab], the sampled tokens [batch,
    positions], the mask of real positions [batch, positions]); completions are
    right-aligned, so position j of a short one is padding until its tokens start.
    """
    import torch

    device = _device(model)
    seqs = [p + c for p, c in zip(ps, cs)]
    width = max(len(s) for s in seqs)
    c_width = max(1, max(len(c) for c in cs))
    ids = torch.tensor([[pad] * (width - len(s)) + s for s in seqs], device=device)
    mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in seqs], device=device)
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    kwargs = {"input_ids": ids, "attention_mask": mask, "position_ids": positions, "use_cache": False}
    try:
        logits = model(**kwargs, logits_to_keep=c_width + 1).logits
    except TypeError:
        logits = model(**kwargs).logits
    logp = torch.log_softmax(logits[:, -(c_width + 1) : -1, :].float() / temperature, dim=-1)
    lengths = torch.tensor([len(c) for c in cs], device=device)
    real = torch.arange(c_width, device=device)[None, :] >= (c_width - lengths)[:, None]
    return logp, ids[:, -c_width:], real


#: Floats of vocabulary-wide log-probabilities held at once while measuring KL (2^26 x 4 bytes = 256 MB per model).
_KL_FLOATS = 2**26


def sequence_kl(model: Any, reference: Any, tokenizer: Any, prompt_ids: list[list[int]],
                completion_ids: list[list[list[int]]], *, temperature: float, batch: int) -> list[list[float]]:
    """The KL from the reference to the policy along each sampled completion, per prompt and sample.

    At every position of a sampled completion the exact KL between the two
    next-token distributions is summed over the completion. Its mean over the
    policy's samples estimates the sequence-level KL exactly as the mean of
    sum(log p_policy - log p_ref) over the sampled tokens does (the same
    expectation), but each term is the conditional expectation of that one
    (Rao-Blackwellised), so it is never negative and far less noisy from a few
    dozen samples. The reference is ``reference`` when given, else the model
    with its adapter switched off; both are read at the sampling temperature.
    """
    import torch

    flat_p = [prompt_ids[i] for i, cs in enumerate(completion_ids) for _ in cs]
    flat_c = [c for cs in completion_ids for c in cs]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    vocab = int(getattr(getattr(model, "config", None), "vocab_size", 0) or len(tokenizer))
    c_width = max(1, max((len(c) for c in flat_c), default=1))
    chunk = max(1, min(batch, _KL_FLOATS // max(1, c_width * vocab)))
    values: list[float] = []
    with torch.no_grad(), _eval_mode(model):
        for start in range(0, len(flat_p), chunk):
            ps, cs = flat_p[start : start + chunk], flat_c[start : start + chunk]
            policy, _tokens, real = _completion_logits(model, ps, cs, temperature=temperature, pad=pad)
            if reference is not None:
                with _eval_mode(reference):
                    ref, _, _ = _completion_logits(reference, ps, cs, temperature=temperature, pad=pad)
            else:
                with _adapter_off(model):
                    ref, _, _ = _completion_logits(model, ps, cs, temperature=temperature, pad=pad)
            per_token = (policy.exp() * (policy - ref)).sum(dim=-1).clamp(min=0.0)
            values.extend((per_token * real).sum(dim=1).tolist())
    out, pos = [], 0
    for cs in completion_ids:
        out.append(values[pos : pos + len(cs)])
        pos += len(cs)
    return out


def tokenize_completions(tokenizer: Any, texts: list[list[str]]) -> list[list[list[int]]]:
    """Token ids of completions drawn by a custom sampler (for length and KL)."""
    return [[list(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in ts] for ts in texts]


def measure_kl(model: Any, reference: Any, tokenizer: Any, held: Sequence[HeldOut],
               prompt_ids: list[list[int]] | None, completion_ids: list[list[list[int]]] | None,
               texts: list[list[str]], *, temperature: float, batch: int) -> tuple[Any, str]:
    """The per-sample sequence KL as a (prompts, k) array, or None, and a line saying how it went."""
    import numpy as np

    if model is None:
        return None, "skipped: completions came from sample= and no model was given to score them"
    if tokenizer is None:
        return None, "skipped: no tokenizer to read the completions' tokens with"
    if reference is None and not has_adapter(model):
        return None, ("skipped: the model has no adapter to switch off for the reference; set kl_budget and the "
                      "monitor keeps a copy of the starting model as the reference")
    try:
        if prompt_ids is None:
            prompt_ids = [prompt_ids_of(tokenizer, h.prompt, h.tools) for h in held]
        if completion_ids is None:
            completion_ids = tokenize_completions(tokenizer, texts)
        kl = sequence_kl(model, reference, tokenizer, prompt_ids, completion_ids, temperature=temperature,
                         batch=batch)
    except Exception as exc:  # KL is one check among several; the look goes on without it
        return None, f"failed: {type(exc).__name__}: {exc}"
    how = "measured against the model with its adapter off" if reference is None else (
        "measured against a copy of the starting model")
    return np.array(kl, dtype=float), how
