"""The local chat-model kit: everything a test or demo needs without the model hub.

- ``build_tokenizer(seed=0)``: a byte-level BPE trained in code, with the chat template.
- ``tiny_model(tokenizer, seed=0, **overrides)``: a randomly initialised tiny Llama.
- ``demo_base()`` / ``load_base(name_or_path)`` / ``KIT_BASE_NAME``: the cached
  pre-trained tiny base that learns the sample task with LoRA.
- ``tiny_model_dir(seed=0)``: a cached saved (tokenizer, random tiny model) pair for plumbing tests.
- ``parse_tool_calls(text)``: generated text back to OpenAI wire tool calls.
- ``sample_task`` / ``load_sample()``: the simulated tool-use task and its shipped dataset.

Names resolve lazily, so ``import whileai.kit`` does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "KIT_BASE_NAME",
    "build_tokenizer",
    "chat_template",
    "demo_base",
    "demo_base_built",
    "format_tool_call",
    "load_base",
    "load_sample",
    "parse_tool_calls",
    "sample_task",
    "tiny_model",
    "tiny_model_dir",
]

_LAZY = {
    "build_tokenizer": "whileai.kit._tokenizer",
    "chat_template": "whileai.kit._tokenizer",
    "tiny_model": "whileai.kit._model",
    "parse_tool_calls": "whileai.core.toolcalls",
    "format_tool_call": "whileai.core.toolcalls",
    "KIT_BASE_NAME": "whileai.kit._base",
    "demo_base": "whileai.kit._base",
    "demo_base_built": "whileai.kit._base",
    "load_base": "whileai.kit._base",
    "tiny_model_dir": "whileai.kit._base",
    "load_sample": "whileai.kit.sample_task",
}


def __getattr__(name: str) -> Any:
    if name == "sample_task":
        return importlib.import_module("whileai.kit.sample_task")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'whileai.kit' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)
