"""A spec record of any version: the version this code writes (:data:`SPEC_VERSION`), the older spellings it reads
(:data:`ALIASES`, renamed by :func:`canonical`) and the keys earlier versions wrote that nothing reads
(:data:`RETIRED`). ``whileai.core.spec`` re-exports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["SPEC_VERSION", "ALIASES", "RETIRED", "canonical"]

#: 3: fully resolved (every knob holds its value), provenance typed; 2: snake_case keys and
#: ``spec_version``, None for "the default"; 1: camelCase host keys, no version field.
SPEC_VERSION = 3

#: Older spellings (the reference's host keys, version-1 records) -> the canonical name.
ALIASES: dict[str, str] = {
    "loraRank": "lora_rank",
    "loraAlpha": "lora_alpha",
    "batchSize": "batch_size",
    "holdoutRows": "holdout_rows",
    "epsilonHigh": "epsilon_high",
    "scaleRewards": "scale_rewards",
    "goldJudge": "gold_judge",
}

#: Keys earlier versions wrote and nothing reads (dropped when an old record is read): a copy of
#: TRL's defaults that nothing compared against, and a flag derived from ``truncated``.
RETIRED = ("trl_defaults_overridden", "mask_truncated_completions")


def canonical(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with every alias renamed to its canonical key.

    A key given both ways keeps the canonical spelling's value unless that value is None
    (a root config's unset default beside a recipe's old spelling): then the alias's value counts.
    """
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = ALIASES.get(key, key)
        if name != key and config.get(name) is not None:
            continue  # both spellings, the canonical one set: it wins
        if name == key and key in out:
            continue  # the alias came first and set it; a None canonical value does not undo that
        out[name] = value
    return out
