"""A user's reward for the start filter's tests: named ``python:_filter_rewards:odd_length`` in a spec."""

from __future__ import annotations

from typing import Any


def odd_length(prompts: list[Any], completions: list[Any], **_columns: Any) -> list[float]:
    """Pays an episode 1.0 when its sampled messages' text has an odd length: groups that differ by chance."""
    return [float(len(str(c)) % 2) for c in completions]
