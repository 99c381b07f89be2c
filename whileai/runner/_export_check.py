"""What ``export --gguf`` checks before it keeps a GGUF file: read back, the file is the merged model.

The file is read as ``base_model=FILE.gguf`` reads it (``whileai.kit.load_gguf``: transformers'
GGUF reader, with the kit's split put back). Its tokenizer must give the run's tokenizer's ids
(the merged folder's, saved from the run's adapter) on every text of ``tokenizer_texts.jsonl``
(tool tags, the chat template's control tokens, unicode, whitespace, numbers) and on the chat
template's rendering of a conversation with tools; its greedy replies to the run's held-out prompts
must be the merged folder's, token for token, so every held-out outcome is the same. A file that
fails is removed and the export says where it differed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["roundtrip_texts", "tokenizer_differences", "held_out_rows", "greedy_replies", "check_gguf", "GGUFCheck"]

_CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "Call a tool when the request needs one."},
    {"role": "user", "content": "Weather in Zürich, in °C?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius"}}}]},
    {"role": "tool", "content": '{"temperature": 21}'},
    {"role": "assistant", "content": "It is 21 °C in Zürich."},
]
_TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                   "required": ["city"]}}}]


def roundtrip_texts() -> list[str]:
    """The committed texts a GGUF file's tokenizer must split as the run's does (``tokenizer_texts.jsonl``)."""
    lines = resources.files("whileai.runner").joinpath("tokenizer_texts.jsonl").read_text(encoding="utf-8")
    return [json.loads(line)["text"] for line in lines.splitlines() if line.strip()]


def _rendered(tokenizer: Any) -> str | None:
    if not getattr(tokenizer, "chat_template", None):
        return None
    return str(tokenizer.apply_chat_template(_CONVERSATION, tools=_TOOLS, tokenize=False))


def tokenizer_differences(reference: Any, other: Any, texts: list[str]) -> list[str]:
    """Where ``other`` splits a text (or renders the chat template) unlike ``reference``: one line each, empty if never."""
    out = []
    want, got = _rendered(reference), _rendered(other)
    if want != got:
        out.append(f"the chat template renders a conversation with tools as {str(got)[:80]!r}..., the run's as "
                   f"{str(want)[:80]!r}...")
    for text in [*texts, *([want] if want else [])]:
        a, b = reference(text)["input_ids"], other(text)["input_ids"]
        if a != b:
            out.append(f"{text[:60]!r}: the run's tokenizer gives ids {a[:10]}, the GGUF file {b[:10]}")
    return out


def held_out_rows(record: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` of the rows the run's held-out figure was measured on, in the job's order; [] without a set."""
    import whileai.simulations as wai
    from whileai.jobs import distinct_prompts
    from whileai.domain.rows.datagate import gate_rows

    config = record.get("config") or {}
    if not config.get("holdout"):
        return []
    try:
        rows, _ = gate_rows(wai.datasets.load_rows(config["holdout"]))
    except (OSError, ValueError):  # the set moved or went since the run: the tokenizer check still stands
        return []
    chosen = distinct_prompts(rows, config.get("holdout_rows"), int(config.get("seed") or 0))
    return [dict(r) for r in chosen][:limit]


def greedy_replies(model: Any, tokenizer: Any, rows: list[dict[str, Any]], max_new_tokens: int) -> list[list[int]]:
    """Each row's greedy reply as token ids (one prompt at a time, the job's reply cap), up to the end of turn."""
    import torch

    from whileai.domain.rows.rollouts import prompt_messages

    out = []
    for row in rows:
        enc = tokenizer.apply_chat_template(prompt_messages(row), tools=row.get("tools") or None,
                                            add_generation_prompt=True, return_tensors="pt", return_dict=True)
        with torch.no_grad():
            seq = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                                 pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id)
        reply = seq[0, enc["input_ids"].shape[1]:].tolist()
        out.append(reply[: reply.index(tokenizer.eos_token_id) + 1] if tokenizer.eos_token_id in reply else reply)
    return out


@dataclass(frozen=True)
class GGUFCheck:
    """A GGUF file read back against the merged folder: the texts its tokenizer round-tripped, the held-out prompts
    both replied to and how many of them passed, and every difference found (none: the same model)."""

    texts: int
    prompts: int
    passed: int
    differences: list[str]


def check_gguf(folder: Path, target: Path, record: dict[str, Any], tool_format: str) -> GGUFCheck:
    """The GGUF file at ``target`` against the merged ``folder`` (:class:`GGUFCheck`)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from whileai.core.defaults import TRAIN_EVAL_MAX_NEW_TOKENS
    from whileai.kit import load_gguf
    from whileai.domain.judges.judging import judge_reply

    from whileai.runner import defaults

    texts = roundtrip_texts()
    run_tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    gguf_model, gguf_tokenizer = load_gguf(target)
    differences = tokenizer_differences(run_tokenizer, gguf_tokenizer, texts)
    rows = held_out_rows(record, defaults.EXPORT_CHECK_PROMPTS)
    passed = 0
    if rows and not differences:
        merged = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32, local_files_only=True)
        want = greedy_replies(merged, run_tokenizer, rows, TRAIN_EVAL_MAX_NEW_TOKENS)
        got = greedy_replies(gguf_model, gguf_tokenizer, rows, TRAIN_EVAL_MAX_NEW_TOKENS)
        for row, a, b in zip(rows, want, got, strict=True):
            if a != b:
                differences.append(f"held-out task {row.get('task_id')!r}: the merged folder replies "
                                   f"{run_tokenizer.decode(a)[:60]!r}, the GGUF file {gguf_tokenizer.decode(b)[:60]!r}")
            passed += bool(judge_reply(str(run_tokenizer.decode(a, skip_special_tokens=True)), row,
                                       tool_format=tool_format)["passed"])
    return GGUFCheck(texts=len(texts) + 1, prompts=len(rows), passed=passed, differences=differences)
