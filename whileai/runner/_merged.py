"""A finished run's adapter folded into its base: one transformers folder any runtime loads.

``write_merged(base, adapter, folder)`` loads the base (the kit name, a local folder or a cached
hub name; nothing is downloaded), puts the run's LoRA adapter on it, merges the adapter's weights
into the base's (PEFT's ``merge_and_unload``) and saves the result with safetensors, beside the
tokenizer and the chat template the run trained with (the adapter folder's copy, which
``save_adapter`` wrote). The folder is written under a hidden sibling name and renamed into place,
so an interrupted export leaves no half model at the path a user gave.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["write_merged", "occupied", "CHAT_TEMPLATE_FILE", "MergedFolder"]

#: the file transformers (>= 4.43) reads a chat template from, beside tokenizer_config.json
CHAT_TEMPLATE_FILE = "chat_template.jinja"


def occupied(folder: Path) -> bool:
    """True when ``folder`` exists and is not an empty directory (then nothing is written there)."""
    return folder.exists() and (not folder.is_dir() or any(folder.iterdir()))


def merged_model(base: str, adapter: Path) -> tuple[Any, Any]:
    """(the base with the adapter merged into its weights, a plain transformers model; the tokenizer)."""
    from peft import PeftModel
    from transformers import AutoTokenizer

    from whileai.kit import load_base

    if not (adapter / "adapter_config.json").is_file():
        raise FileNotFoundError(f"the run's adapter folder {str(adapter)!r} has no adapter_config.json; the adapter is "
                                "missing or was removed: train the run again")
    model, tokenizer = load_base(base)
    if (adapter / "tokenizer_config.json").is_file():  # the tokenizer (and chat template) the run trained with
        tokenizer = AutoTokenizer.from_pretrained(str(adapter), local_files_only=True)
    merged = PeftModel.from_pretrained(model, str(adapter), local_files_only=True).merge_and_unload()
    return merged, tokenizer


@dataclass(frozen=True)
class MergedFolder:
    """What ``write_merged`` wrote: the folder, its files, the model's parameter count, whether a chat template
    file is among them, and the format its template writes tool calls in (``whileai.core.toolcalls``; hermes where
    the base's own template dropped tools and the run rendered them in that convention)."""

    folder: str
    files: list[str]
    parameters: int
    chat_template: bool
    tool_format: str


def write_merged(base: str, adapter: Path, folder: Path) -> MergedFolder:
    """Write the merged model to ``folder`` (which must not hold anything); returns what was written.

    Raises FileExistsError when ``folder`` exists and is not empty.
    """
    if occupied(folder):
        raise FileExistsError(f"{folder} exists and is not empty")
    merged, tokenizer = merged_model(base, adapter)
    partial = folder.with_name(f".{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        merged.save_pretrained(str(partial), safe_serialization=True)
        tokenizer.save_pretrained(str(partial))
        template = getattr(tokenizer, "chat_template", None)
        if isinstance(template, str) and not (partial / CHAT_TEMPLATE_FILE).is_file():
            (partial / CHAT_TEMPLATE_FILE).write_text(template, encoding="utf-8")
        if folder.is_dir():  # an empty folder the user made for it
            folder.rmdir()
        os.replace(partial, folder)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    from whileai.kit import reply_format

    return MergedFolder(folder=str(folder), files=sorted(p.name for p in folder.iterdir()),
                        parameters=sum(p.numel() for p in merged.parameters()),
                        chat_template=(folder / CHAT_TEMPLATE_FILE).is_file(),
                        tool_format=reply_format(tokenizer))
