"""What every job body shares: the base, held-out measurement, export with the gates on, LoRA and trainer settings.

Held-out pass rate is the first-action judge over greedy replies: each
held-out prompt (the messages before the first assistant turn, with the row's
tools) is rendered with the chat template, the model writes one reply, the
kit's parser turns it back into OpenAI tool calls, and
``first_action_judge`` compares the first action with the row's ``gold``.
Rows of one task share a prompt, so each distinct prompt is asked once.
"""

from __future__ import annotations

import json
import random
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from whileai.jobs import defaults as job_defaults
from whileai.simulations import defaults
from whileai.simulations.rows import prompt_messages

__all__ = [
    "seed_all",
    "cpu_threads",
    "device",
    "gpu_name",
    "base_path",
    "load_policy",
    "prompt_messages",
    "distinct_prompts",
    "generate_replies",
    "policy_pass_rate",
    "heldout_loss",
    "lora_config",
    "trainer_settings",
    "export_options",
    "export_training",
    "export_pairs",
    "peft_config",
    "max_length",
    "save_adapter",
]


def seed_all(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def cpu_threads() -> None:
    """On a CPU, use JOB_CPU_THREADS torch threads (or $WHILEAI_JOB_THREADS)."""
    import os

    import torch

    if torch.cuda.is_available():
        return
    value = os.environ.get(job_defaults.JOB_CPU_THREADS_ENV, "").strip()
    torch.set_num_threads(int(value) if value.isdigit() and int(value) > 0 else job_defaults.JOB_CPU_THREADS)


def device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def gpu_name(spec: Mapping[str, Any]) -> str | None:
    """The GPU the job ran on, in GPU_USD_PER_HOUR's spelling where it has one; None on a CPU.

    On Modal it is the GPU the function was given (``spec["gpu"]``); on a local
    GPU the device's name, matched against the price table.
    """
    import torch

    if not torch.cuda.is_available():
        return None
    if spec.get("target") == "modal" and spec.get("gpu"):
        return str(spec["gpu"])
    name = torch.cuda.get_device_name(0)
    return price_key(name, torch.cuda.get_device_properties(0).total_memory)


def price_key(device_name: str, memory_bytes: int) -> str:
    """GPU_USD_PER_HOUR's key for a CUDA device name ("NVIDIA H100 80GB HBM3" -> "H100"), else the name.

    Where the table prices one chip at two memory sizes (A100 40 and 80 GB), the
    device's memory picks the row.
    """
    upper = device_name.upper()
    matches = [key for key in defaults.GPU_USD_PER_HOUR if key.split("-")[0].upper() in upper]
    if len(matches) > 1:
        gib = memory_bytes / 2**30
        sized = [k for k in matches if "-" in k and k.split("-")[1].upper().endswith("GB")]
        if sized:  # the size nearest the device's memory
            return min(sized, key=lambda k: abs(float(k.split("-")[1][:-2]) - gib))
    return max(matches, key=len) if matches else device_name


def base_path(name: str, spec: Mapping[str, Any] | None = None) -> str:
    """A loadable directory (or cached hub name) for the base ``name``.

    The kit's demo base resolves to its cached folder. On Modal a hub name is
    fetched into the container's cache first (``HF_TOKEN`` from the job's
    secret for gated models); everywhere else nothing is downloaded, so a hub
    base must already be in the local cache.
    """
    if name == defaults.KIT_BASE_NAME:
        from whileai.kit import demo_base

        return str(demo_base())
    local = Path(name).expanduser()
    if (spec or {}).get("target") == "modal" and not local.exists():
        from huggingface_hub import snapshot_download

        return snapshot_download(name)
    return name


def load_policy(spec: Mapping[str, Any]) -> tuple[Any, Any]:
    """The base model (causal LM, on the job's device) and its tokenizer.

    A run started from another (``init_from``) gets that run's adapter on top,
    loaded trainable (``spec["init_adapter"]``, the folder the platform resolved
    for it): the trainer keeps training the same adapter, so the result is one
    complete adapter for the base.
    """
    from whileai.kit import load_base

    model, tokenizer = load_base(base_path(spec["base_model"], spec))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = model.to(device())
    if spec.get("init_adapter"):
        model = load_adapter(model, spec)
    return model, tokenizer


def load_adapter(model: Any, spec: Mapping[str, Any]) -> Any:
    """``model`` with the adapter of the run it starts from (``init_from``), trainable, as PEFT's "default"."""
    from peft import PeftModel

    folder = Path(spec["init_adapter"])
    if not (folder / "adapter_config.json").is_file():
        raise FileNotFoundError(
            f"the adapter of init_from run {spec.get('init_from')} is not at {folder} (no adapter_config.json); "
            "train that run again, or start this one from another finished run"
        )
    return PeftModel.from_pretrained(model, str(folder), is_trainable=True)


def peft_config(model: Any, spec: Mapping[str, Any], task_type: str = "CAUSAL_LM") -> Any:
    """What a trainer's ``peft_config`` gets: None when the model already carries the adapter to train."""
    from peft import PeftModel

    return None if isinstance(model, PeftModel) else lora_config(spec, task_type)


# ---------------------------------------------------------------------------
# Held-out measurement
# ---------------------------------------------------------------------------


def distinct_prompts(rows: list[Mapping[str, Any]], limit: int | None, seed: int) -> list[Mapping[str, Any]]:
    """One row per distinct (prompt, tools, gold), at most ``limit`` of them, sampled with ``seed``."""
    seen: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        if row.get("gold") is None:
            continue
        key = json.dumps([prompt_messages(row), row.get("tools"), row.get("gold")], sort_keys=True, default=str)
        seen.setdefault(key, row)
    chosen = list(seen.values())
    if limit is not None and len(chosen) > limit:
        chosen = random.Random(seed).sample(chosen, limit)
    return chosen


def _encode_prompt(tokenizer: Any, row: Mapping[str, Any]) -> list[int]:
    ids = tokenizer.apply_chat_template(
        prompt_messages(row), tools=row.get("tools") or None, add_generation_prompt=True, tokenize=True, return_dict=True
    )["input_ids"]
    return list(ids)


def generate_replies(model: Any, tokenizer: Any, rows: list[Mapping[str, Any]], max_new_tokens: int,
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
            encoded = [_encode_prompt(tokenizer, row) for row in rows[start : start + batch_size]]
            width = max(len(ids) for ids in encoded)
            input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids in encoded], device=dev)
            mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in encoded], device=dev)
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


def policy_pass_rate(model: Any, tokenizer: Any, rows: list[Mapping[str, Any]], spec: Mapping[str, Any]) -> dict[str, Any]:
    """``{"value": pass rate, "prompts": n, "outcomes": [1, 0, ...]}`` of the first-action judge on greedy replies.

    ``outcomes`` is each prompt's pass (1) or fail (0) in prompt order, the same order before and
    after training (the prompts are drawn with the run's seed), so a paired test can be computed
    from them. Value None without gold. ``gold_over_cap`` counts the prompts whose reference reply
    is longer than the reply cap (TRAIN_EVAL_MAX_NEW_TOKENS): they can never pass, so they are
    counted and warned about (and still measured).
    """
    from whileai.simulations.judges import judge_reply

    prompts = distinct_prompts(rows, spec.get("holdout_rows") or defaults.TRAIN_HOLDOUT_MAX_ROWS, spec.get("seed") or 0)
    if not prompts:
        return {"value": None, "prompts": 0, "why": "no held-out row carries a gold first action"}
    cap = defaults.TRAIN_EVAL_MAX_NEW_TOKENS
    over = sum(1 for row in prompts if gold_reply_tokens(tokenizer, row.get("gold")) > cap)
    if over:
        warnings.warn(f"{over} of {len(prompts)} held-out prompts have a gold reply longer than the reply cap "
                      f"({cap} tokens, TRAIN_EVAL_MAX_NEW_TOKENS): they cannot pass", stacklevel=2)
    replies = generate_replies(model, tokenizer, prompts, cap)
    outcomes = [int(bool(judge_reply(text, row)["passed"])) for row, text in zip(prompts, replies, strict=True)]
    return {"value": sum(outcomes) / len(prompts), "prompts": len(prompts), "gold_over_cap": over,
            "outcomes": outcomes}


def gold_reply_tokens(tokenizer: Any, gold: Any) -> int:
    """Tokens of the shortest reply that satisfies ``gold`` as the template writes it (its reference call(s))."""
    from whileai.core.toolcalls import format_tool_call
    from whileai.simulations.datagate import gold_calls

    if not isinstance(gold, Mapping):
        return 0
    if "answer" in gold:
        text = str(gold["answer"])
    elif "one_of" in gold:
        return min((gold_reply_tokens(tokenizer, option) for option in gold["one_of"]), default=0)
    else:
        text = "\n".join(format_tool_call(c["name"], c.get("arguments") or {}) for c in gold_calls(gold))
    return len(tokenizer(text, add_special_tokens=False)["input_ids"]) + 1  # + the end of turn


#: the conversation keys of a training example, and which of them render together as one sequence
_SEQUENCES = (("messages",), ("prompt", "completion"), ("prompt", "chosen"), ("prompt", "rejected"), ("chosen",),
              ("rejected",))


def within_context(tokenizer: Any, examples: list[dict[str, Any]], limit: int) -> tuple[list[dict[str, Any]], int]:
    """The examples whose every rendered sequence fits ``limit`` tokens, and how many were left out.

    A longer example is left out and counted, never truncated: a cut row would
    teach a conversation that was never had (or, cut inside the assistant turn,
    a call that never closes).
    """
    kept = []
    for example in examples:
        longest = 0
        for keys in _SEQUENCES:
            if all(isinstance(example.get(k), list) for k in keys):
                messages = [m for k in keys for m in example[k]]
                ids = tokenizer.apply_chat_template(messages, tools=example.get("tools") or None, tokenize=True,
                                                    return_dict=True)["input_ids"]
                longest = max(longest, len(ids))
        if longest <= limit:
            kept.append(example)
    return kept, len(examples) - len(kept)


def heldout_loss(model: Any, tokenizer: Any, rows: list[Mapping[str, Any]], spec: Mapping[str, Any]) -> dict[str, Any]:
    """``{"value": mean assistant-token loss, "rows": n}`` over the held-out rows that passed (all when unlabelled)."""
    import torch

    chosen = [r for r in rows if r.get("passed") is True] or list(rows)
    limit = spec.get("holdout_rows") or defaults.TRAIN_HOLDOUT_MAX_ROWS
    if len(chosen) > limit:
        chosen = random.Random(spec.get("seed") or 0).sample(chosen, limit)
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
    return {"value": total / count if count else None, "rows": len(trl_rows)}


# ---------------------------------------------------------------------------
# Data and settings
# ---------------------------------------------------------------------------


def export_options(spec: Mapping[str, Any], method: str) -> dict[str, Any]:
    """The export settings the run gave (TRAIN_EXPORT_KNOBS the method reads), None ones left out.

    Left out means the exporter's own default, which is what a run that named
    none of them trains on.
    """
    return {k: spec[k] for k in defaults.TRAIN_EXPORT_KNOBS
            if spec.get(k) is not None and method in defaults.TRAINING_KNOBS[k]}


#: the keys of a TRL training row a trainer reads (the messages shape, or prompt/completion when only some turns train)
_TRL_ROW_KEYS = ("messages", "prompt", "completion", "tools")


def export_training(rows: list[Mapping[str, Any]], folder: Path | None,
                    options: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Rows in TRL's conversational shape with the export gates on (arguments round-trip, no privileged leak).

    ``options`` are export_dataset's settings (mask_mode, unroll, strip_think,
    max_tool_output_chars; see ``export_options``). Rows whose every assistant
    turn trains are ``{"messages", "tools"}``; a mask that trains only some turns
    (``mask_mode="final"``, ``unroll=True``) gives ``{"prompt", "completion",
    "tools"}`` rows instead. Written to ``folder/train.trl.jsonl`` when a folder
    is given (the job's record of what it trained on). Raises
    ExportValidationError naming the rows.
    """
    import tempfile

    from whileai.simulations.export import export_dataset

    with tempfile.TemporaryDirectory() as tmp:
        target = (folder or Path(tmp)) / "train.trl.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # rows carry their own system prompt and tools
            export_dataset(list(rows), target, format="trl", validate=True, **dict(options or {}))
        with open(target, encoding="utf-8") as f:
            return [{k: v for k, v in json.loads(line).items() if k in _TRL_ROW_KEYS} for line in f if line.strip()]


def export_pairs(pairs: list[dict[str, Any]], folder: Path | None,
                 options: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Preference pairs as TRL's prompt/chosen/rejected triple, gates on (``folder/pairs.trl.jsonl``).

    ``options`` are export_preference's strip_think and max_tool_output_chars.
    """
    import tempfile

    from whileai.simulations.export import export_preference

    with tempfile.TemporaryDirectory() as tmp:
        target = (folder or Path(tmp)) / "pairs.trl.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            export_preference(pairs, target, format="trl", validate=True, **dict(options or {}))
        with open(target, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]


def lora_config(spec: Mapping[str, Any], task_type: str = "CAUSAL_LM") -> Any:
    """LoRA on every linear projection with the run's rank and alpha (lora_rank / lora_alpha)."""
    from peft import LoraConfig

    kwargs: dict[str, Any] = {}
    if task_type == "SEQ_CLS":
        kwargs["modules_to_save"] = ["score"]  # the freshly initialised head must be saved with the adapter
    return LoraConfig(
        r=int(spec.get("lora_rank") or defaults.TRAIN_LORA_R),
        lora_alpha=int(spec.get("lora_alpha") or defaults.TRAIN_LORA_ALPHA),
        lora_dropout=defaults.TRAIN_LORA_DROPOUT,
        target_modules=defaults.TRAIN_LORA_TARGETS,
        task_type=task_type,
        **kwargs,
    )


def trainer_settings(spec: Mapping[str, Any], folder: Path) -> dict[str, Any]:
    """TrainingArguments every method shares: no checkpoints, no reporters, a log line every step."""
    import torch

    on_gpu = torch.cuda.is_available()
    settings: dict[str, Any] = {
        "output_dir": str(folder / "trainer"),
        "learning_rate": float(spec["learning_rate"]),
        "lr_scheduler_type": defaults.TRAIN_LR_SCHEDULER,
        "warmup_steps": defaults.TRAIN_WARMUP_RATIO,  # a float under 1 is a share of the steps
        "seed": int(spec.get("seed") or 0),
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": [],
        "disable_tqdm": True,
        "use_cpu": not on_gpu,
        "bf16": bool(on_gpu and torch.cuda.is_bf16_supported()),
        # recomputing activations saves GPU memory on long sequences; on a CPU it only costs time
        "activation_checkpointing": on_gpu,
        "dataloader_num_workers": 0,
    }
    if spec.get("steps"):
        settings["max_steps"] = int(spec["steps"])
    return settings


def train_lora(trainer_cls: Any, config_cls: Any, spec: Mapping[str, Any], folder: Path, model: Any, tokenizer: Any,
               examples: list[dict[str, Any]], callbacks: list[Any], *, task_type: str = "CAUSAL_LM",
               **config: Any) -> Any:
    """One TRL trainer with the run's LoRA, trained on ``examples``; returns the trainer.

    The config is ``config_cls`` over :func:`trainer_settings`, the run's batch
    size (``batch_size``, else TRAIN_BATCH_SIZE) and the method's own ``config``;
    the rows reach TRL through ``export.to_hf_dataset``. SFT, DPO and RM differ only
    in the trainer, their config keys and (RM) the LoRA task type.
    """
    from whileai.simulations.export import decoding_chat_template, to_hf_dataset

    args = config_cls(
        **trainer_settings(spec, folder),
        per_device_train_batch_size=int(spec.get("batch_size") or defaults.TRAIN_BATCH_SIZE),
        **config,
    )
    # rows whose values differ in JSON type between rows reach the trainer with arguments as JSON text
    # (to_hf_dataset); the template still renders each row's own objects
    with decoding_chat_template(tokenizer):
        trainer = trainer_cls(
            model=model,
            args=args,
            train_dataset=to_hf_dataset(examples),
            processing_class=tokenizer,
            peft_config=peft_config(model, spec, task_type=task_type),
            callbacks=callbacks,
        )
        trainer.train()
    return trainer


def max_length(model: Any) -> int:
    """TRAIN_MAX_LENGTH, or the model's own context length when that is shorter."""
    limit = int(getattr(model.config, "max_position_embeddings", 0) or 0)
    return min(defaults.TRAIN_MAX_LENGTH, limit) if limit else defaults.TRAIN_MAX_LENGTH


def save_adapter(model: Any, tokenizer: Any, path: Path) -> Path:
    """The adapter in PEFT's format (``adapter_config.json``, ``adapter_model.safetensors``) plus the tokenizer.

    Only the trained adapter ("default") is saved: a trainer continuing an
    adapter keeps a frozen copy of its start as the reference ("ref"), which is
    not part of the result. Written to a sibling folder and renamed into place,
    so a job killed mid-save leaves no half adapter at ``path``.
    """
    import os
    import shutil

    partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    adapters = list(getattr(model, "peft_config", {}) or {})
    selected = {"selected_adapters": ["default"]} if len(adapters) > 1 and "default" in adapters else {}
    model.save_pretrained(str(partial), **selected)
    tokenizer.save_pretrained(str(partial))
    if path.exists():
        shutil.rmtree(path)
    os.replace(partial, path)
    return path
