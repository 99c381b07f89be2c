"""The task key of a rollout row (the row contract's, docs/architecture.md): which task a row belongs to.

``rows`` re-exports these names; they sit in their own module so that the
scoring core (``_scoring``) and the row sources (``rowsource``) can group rows
by task without importing the row contract that uses them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["prompt_messages", "prompt_hash", "task_key"]


def _before_first_assistant(messages: Any) -> list[Mapping[str, Any]]:
    out = []
    for message in messages or []:
        if message.get("role") == "assistant":
            break
        out.append(message)
    return out


def prompt_messages(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The messages before the row's first assistant turn, copied: the prompt the policy saw (and is asked again)."""
    return [dict(message) for message in _before_first_assistant(row.get("messages"))]


def prompt_hash(messages: list[Mapping[str, Any]]) -> str:
    """A short stable hash of the prompt: the messages before the first assistant turn.

    Canonical JSON (keys sorted, compact separators, ASCII escapes, null-valued
    keys dropped), sha256, the first ``defaults.PROMPT_HASH_HEX_CHARS`` hex characters.

        >>> prompt_hash([{"role": "user", "content": "Weather in Paris?"}]) == prompt_hash(
        ...     [{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": "18"}])
        True
    """
    from whileai.domain.defaults import PROMPT_HASH_HEX_CHARS

    prefix = [{k: v for k, v in message.items() if v is not None} for message in _before_first_assistant(messages)]
    text = json.dumps(prefix, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:PROMPT_HASH_HEX_CHARS]


def task_key(row: Mapping[str, Any]) -> str:
    """The row's task: ``task_id`` when present, else its stored ``prompt_hash``, else ``prompt_hash(messages)``."""
    task_id = row.get("task_id")
    if task_id is not None and task_id != "":
        return str(task_id)
    stored = row.get("prompt_hash")
    if stored:
        return str(stored)
    return prompt_hash(row.get("messages") or [])
