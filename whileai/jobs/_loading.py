"""Loading what a job trains: the base (kit name, folder or cached hub name), the start adapter, LoRA settings, saving the adapter."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from whileai.jobs._environment import device
from whileai.simulations import defaults
from whileai.simulations.context import context_limit

__all__ = ["base_path", "load_policy", "load_adapter", "peft_config", "lora_config", "max_length", "save_adapter",
           "use_run_tool_format", "base_notes"]


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
    from whileai.kit import import_gguf, is_gguf_base

    if is_gguf_base(name):  # a .gguf file or a packaged one: the folder it was imported into (first use imports)
        return str(import_gguf(name))
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

    model, tokenizer = load_base(base_path(spec["base_model"], spec), tool_format=spec.get("tool_format"))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = model.to(device())
    if spec.get("init_adapter"):
        model = load_adapter(model, spec)
    return model, tokenizer


def use_run_tool_format(tokenizer: Any, spec: Mapping[str, Any]) -> dict[str, Any]:
    """Put the run's tool convention (``tool_format``) on a tokenizer the job loaded itself (the reward model's)."""
    from whileai.kit import use_tool_format

    return use_tool_format(tokenizer, spec.get("tool_format"))


def base_notes(spec: Mapping[str, Any], tokenizer: Any) -> dict[str, Any]:
    """What the run records of its base beyond its name: the tool convention used, and a GGUF base's import.

    ``tool_format``: ``{"requested", "used", "renders_tools", "why", "parser"}``
    (``whileai.kit.use_tool_format``); ``base_import``: the GGUF file, its SHA-256,
    its quantisation and the folder it was imported into (``whileai.kit.gguf_record``).
    """
    from whileai.kit import gguf_record

    notes: dict[str, Any] = {}
    decided = getattr(tokenizer, "whileai_tool_format", None)
    if decided:
        notes["tool_format"] = dict(decided)
    record = gguf_record(spec.get("base_model"))
    if record is not None:
        notes["base_import"] = record
    return notes


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


def max_length(model: Any) -> int:
    """TRAIN_MAX_LENGTH, or the model's own context length when that is shorter (the selection report's rule too)."""
    return context_limit(model.config)


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
