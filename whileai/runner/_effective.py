"""The values a spec's jobs will use: each null a method fills, resolved the way ``wai.train`` resolves it.

``validate`` and ``--cfg job`` print the spec with these values in place of its
nulls (each marked with a comment), so a reader sees the base model, the LoRA
rank, the batch size and every knob the method fills before anything runs. The
values come from ``wai.train``'s own ``resolve_config`` over ``TRAINING_KNOBS``
and ``TRAINING_HOST_KEYS`` (one source of defaults); a later stage inherits its
start's base and LoRA shape, as ``init_from`` does. The run itself still gets
the composed spec: what stays null is filled by ``wai.train``, not by the runner.

    filled, notes = effective(plain)     # notes: dotted key -> why it holds that value
    print(annotated_yaml(filled, notes))
"""

from __future__ import annotations

import copy
import re
from typing import Any

from whileai.simulations import defaults as sdk
from whileai.simulations.training import resolve_config

from .schema import EXPORT_KNOBS, HOST_KEYS, KNOBS, reads_export

__all__ = ["effective", "annotated_yaml"]

#: GRPO values wai.train reads from the dataset itself when left null (so validate cannot know them)
_FROM_DATA = {
    "generations": "null: the dataset's rollouts per task (its common group size), clipped to TRAINING_KNOBS' range",
    "temperature": "null: the rows' own sampling.temperature when they share one, else TRAINING_KNOBS' default",
}
#: the LoRA shape a stage inherits from the run it starts from (wai.train's init_from)
_LORA_SHAPE = ("lora_rank", "lora_alpha")


def _stages(plain: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(dotted prefix, node) per stage, earlier stages first; the root is the last stage."""
    stages = plain.get("stages") or {}
    return [(f"stages.{name}.", node) for name, node in stages.items() if isinstance(node, dict)] + [("", plain)]


def effective(plain: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """A copy of the validated spec ``plain`` with each null the job fills set to its value, and why per key."""
    filled = copy.deepcopy(plain)
    notes: dict[str, str] = {}
    export = plain.get("export") or {}
    target = (plain.get("target") or {}).get("name")
    previous: dict[str, Any] | None = None
    for prefix, node in _stages(filled):
        method = node.get("method")
        if method not in sdk.TRAIN_METHODS:
            continue
        base = node.get("base_model") or plain.get("base_model")
        if prefix and node.get("seed") is None and plain.get("seed") is not None:  # as the pipeline's stages take it
            node["seed"] = plain["seed"]
            notes[f"{prefix}seed"] = "the spec's seed (a stage without its own takes it)"
        knobs = {k: node.get(k) for k in KNOBS}
        knobs.update({k: export.get(k) for k in EXPORT_KNOBS if reads_export(k, method)})
        config = {k: node[k] for k in HOST_KEYS if node.get(k) is not None}
        why_base = "the kit's demo base (KIT_BASE_NAME)"
        if previous is not None:  # a later stage continues its start's adapter: same base, same LoRA shape
            base = previous["base_model"]
            why_base = "the base of the stage it starts from"
            config.update({k: previous[k] for k in _LORA_SHAPE if previous.get(k) is not None})
        resolved, _problems, _notes = resolve_config(method, knobs, config, base_model=base, target=target,
                                                     holdout=None)
        if node.get("base_model") is None:
            node["base_model"] = resolved["base_model"]
            notes[f"{prefix}base_model"] = why_base if previous is not None or not base else "the spec's base_model"
        for key in (*KNOBS, *HOST_KEYS):
            if node.get(key) is not None:
                continue
            if method == "grpo" and key in _FROM_DATA:
                node[key] = None
                notes[f"{prefix}{key}"] = _FROM_DATA[key]
            elif resolved.get(key) is not None:
                node[key] = resolved[key]
                inherited = previous is not None and key in _LORA_SHAPE
                notes[f"{prefix}{key}"] = ("inherited from the stage it starts from" if inherited
                                           else f"{method}'s default (wai.train fills it)")
        previous = resolved
    return filled, notes


_KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][\w]*):(?P<rest>.*)$")


def annotated_yaml(filled: dict[str, Any], notes: dict[str, str]) -> str:
    """``filled`` as YAML (OmegaConf's layout) with ``# why`` after every line whose key ``notes`` names."""
    from omegaconf import OmegaConf

    text = OmegaConf.to_yaml(OmegaConf.create(filled))
    out: list[str] = []
    path: list[tuple[int, str]] = []  # (indent, key) of the mappings above this line
    for line in text.splitlines():
        match = _KEY_LINE.match(line)
        if match is None:
            out.append(line)
            continue
        indent = len(match["indent"])
        while path and path[-1][0] >= indent:
            path.pop()
        path.append((indent, match["key"]))
        note = notes.get(".".join(key for _, key in path))
        out.append(f"{line}  # {note}" if note and match["rest"].strip() else line)
    return "\n".join(out) + "\n"
