"""A run's name: what ran, in words (``grpo_tooluse · grpo · beta=0.04 seed=1``).

Four rules, so that two runs that trained differently never share a name:

- a knob typed at the spec's root is the last stage's (``stages.plan_stages``), so only the last stage's name
  carries it; an earlier stage carries the knobs typed for it (``stages.sft.steps=5`` names the SFT stage
  ``steps=5``) and the spec-wide keys it takes (``seed``, ``base_model``, ``check``, ``stages.SPEC_WIDE``);
- of those, only the knobs the stage's method reads (an SFT stage is not named ``beta=0.04``);
- a typed ``base_model=`` is named, a local file or folder by its own name (``base_model=merged.gguf``);
- a reproduction says so (``· reproduces run_...``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from whileai.runner.stages import SPEC_WIDE, STAGE_REF

__all__ = ["run_label", "base_words"]


def base_words(value: str) -> str:
    """``base_model=VALUE`` as a name shows it: a local path by its last part, a hub id or a kit name as typed."""
    path = Path(value).expanduser()
    shown = path.name if (value.startswith(("/", ".", "~")) or path.exists()) and path.name else value
    return f"base_model={shown}"


def _stage_words(words: list[str], stage_name: str, last: bool, takes: set[str] | None) -> list[str]:
    """The words that describe this stage: its own ``stages.NAME.`` keys (without the prefix), the root's knobs
    when it is the last stage, and the spec-wide keys and groups (``dataset.holdout``) it shares."""
    from whileai.runner.schema import HOST_KEYS, KNOBS

    own = f"{STAGE_REF}{stage_name}."
    out = []
    for word in words:
        key = word.split("=", 1)[0].lstrip("+~")
        if key.startswith(own):
            out.append(word.lstrip("+~")[len(own):])
        elif key.startswith(STAGE_REF):
            continue  # another stage's knob
        elif key in SPEC_WIDE:
            if last or takes is None or key in takes:  # a stage with its own seed is not named by the root's
                out.append(base_words(word.split("=", 1)[1]) if key == "base_model" else word)
        elif key in KNOBS or key in HOST_KEYS:
            if last:
                out.append(word)
        else:
            out.append(word)
    return out


def run_label(context: Any, stage_name: str, method: str, last: bool,
              takes: set[str] | None = None) -> str:
    """What a run is, as its title: ``grpo_tooluse · grpo · beta=0.04 seed=1`` (recipe, stage, method, knobs).

    An earlier stage says so (``grpo_tooluse · sft stage``). The knobs are a sweep's swept ones (each job's own
    values, so names differ within a sweep), else the knobs typed on the command line, placed by the module's
    rules; ``takes`` is the spec-wide keys the stage takes from the spec (``Stage.from_spec``; None: all).
    """
    from whileai.core.spec import SPEC_MODELS, knob_fields

    parts = [context.recipe or "no recipe"]
    if last:
        parts.append(method)
    else:
        parts.append(f"{stage_name} stage" + (f" · {method}" if stage_name != method else ""))
    every = {name for model in SPEC_MODELS.values() for name in knob_fields(model)}
    reads = set(knob_fields(SPEC_MODELS[method])) if method in SPEC_MODELS else every
    words = [w for w in _stage_words(context.label, stage_name, last, takes)
             if w.split("=", 1)[0] not in every - reads]
    if any("=" in w for w in words):  # the knobs as typed, one part; a bare word (quick) is a part of its own
        parts.append(" ".join(w for w in words if "=" in w))
    parts += [w for w in words if "=" not in w]
    if context.reproduces:
        parts.append(f"reproduces {context.reproduces}")
    return " · ".join(parts)
