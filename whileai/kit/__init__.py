"""The local chat-model kit: everything a test or demo needs without the model hub.

- ``build_tokenizer(seed=0)``: a byte-level BPE trained in code, with the chat template.
- ``tiny_model(tokenizer, seed=0, **overrides)``: a randomly initialised tiny Llama.
- ``demo_base()`` / ``load_base(name_or_path)`` / ``KIT_BASE_NAME``: the cached
  pre-trained tiny base that learns the sample task with LoRA.
- ``weights_digest(folder)``: the SHA-256 of a saved model's weights (what a run records of its base).
- ``tiny_model_dir(seed=0)``: a cached saved (tokenizer, random tiny model) pair for plumbing tests.
- ``parse_tool_calls(text)``: generated text back to OpenAI wire tool calls.
- ``import_gguf(name)`` / ``gguf_record(name)``: a GGUF file (or ``smollm2-135m``) as a base, imported once.
- ``use_tool_format(tokenizer, tool_format)`` / ``template_renders_tools(tokenizer)``: tools reach the model
  whatever its chat template (the ``hermes`` convention where it drops them).
- ``sample_task`` / ``load_sample()``: the simulated tool-use task and its shipped dataset.

Names resolve lazily, so ``import whileai.kit`` does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "KIT_BASE_NAME",
    "KIT_PRE_TOKENIZER",
    "KIT_SPLIT_PATTERN",
    "build_tokenizer",
    "chat_template",
    "demo_base",
    "demo_base_built",
    "demo_base_trains",
    "format_tool_call",
    "gguf_imported",
    "gguf_problem",
    "gguf_record",
    "import_gguf",
    "is_gguf_base",
    "load_base",
    "load_gguf",
    "load_sample",
    "parse_tool_calls",
    "reply_format",
    "sample_task",
    "template_renders_tools",
    "tiny_model",
    "tiny_model_dir",
    "use_tool_format",
    "weights_digest",
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
    "demo_base_trains": "whileai.kit._base",
    "load_base": "whileai.kit._base",
    "tiny_model_dir": "whileai.kit._base",
    "weights_digest": "whileai.kit._base",
    "load_sample": "whileai.kit.sample_task",
    "import_gguf": "whileai.kit._gguf",
    "load_gguf": "whileai.kit._gguf",
    "KIT_PRE_TOKENIZER": "whileai.kit._gguf",
    "KIT_SPLIT_PATTERN": "whileai.kit._tokenizer",
    "gguf_record": "whileai.kit._gguf",
    "gguf_problem": "whileai.kit._gguf",
    "gguf_imported": "whileai.kit._gguf",
    "is_gguf_base": "whileai.kit._gguf",
    "use_tool_format": "whileai.kit._toolformat",
    "reply_format": "whileai.kit._toolformat",
    "template_renders_tools": "whileai.kit._toolformat",
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
