"""A GRPO reward of your own: ``reward=python:my_rewards:brevity`` (with this folder on the import path).

    PYTHONPATH=docs/examples python -m whileai run recipe=grpo_tooluse reward=python:my_rewards:brevity

TRL calls a reward once per batch of sampled completions, with keyword arguments; each is a list with one entry
per completion, in the same order:

- ``prompts``: ``list[list[dict]]``, each the prompt's chat messages (``{"role", "content"}``, the tool results
  and earlier tool calls included) up to the turn the model answers;
- ``completions``: ``list[list[dict]]``, each ``[{"role": "assistant", "content": str}]``: the sampled reply as
  text, tool calls written in the run's tool convention (``<tool_call>{...}</tool_call>``);
- ``completion_ids``: ``list[list[int]]`` (the reply's token ids, for a length or a truncation rule), or None;
- ``gold``: ``list[str]``, each the task's gold first action as JSON: ``{"name", "arguments"}`` for a tool call,
  ``{"answer"}`` for a reply in words;
- ``task``: ``list[str]``, the task's key (its ``task_id``);
- ``row_tools``: ``list[str]``, each the prompt's tool schemas (OpenAI's ``{"type": "function", ...}``) as JSON;
- ``**kwargs``: whatever else TRL adds (``trainer_state``, ...); take it and ignore what you do not use.

Return ``list[float]``, one finite number per completion (``None`` skips a completion). ``validate`` calls the
function on two sample rows with exactly these types before a run exists.
"""

from __future__ import annotations

import json
from typing import Any

from whileai.core.toolcalls import parse_tool_calls

#: what each word beside the call costs: ten words cost as much as the call earns
WORD_COST = 0.1


def brevity(prompts: list[list[dict[str, Any]]], completions: list[list[dict[str, Any]]],
            completion_ids: list[list[int]] | None = None, gold: list[str] | None = None, **kwargs: Any) -> list[float]:
    """1.0 for a reply whose first tool call names the gold tool with nothing else said, less per extra word."""
    out = []
    for i, completion in enumerate(completions):
        text = completion[-1]["content"]
        want = json.loads(gold[i]) if gold is not None else {}
        content, calls = parse_tool_calls(text)  # the text beside the calls, and the calls in OpenAI's shape
        named = bool(calls) and calls[0]["function"]["name"] == want.get("name")
        out.append(max(0.0, float(named) - WORD_COST * len((content or "").split())))
    return out
