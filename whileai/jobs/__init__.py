"""Training jobs: the bodies (sft, grpo, dpo, rm) that the platform launches by module name, the local worker and the Modal app."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["distinct_prompts"]

#: the names other packages may use, each from its private module (imported on first use: a job's start stays light)
_LAZY = {"distinct_prompts": "whileai.jobs._evaluation"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'whileai.jobs' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
