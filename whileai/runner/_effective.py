"""The values a spec's jobs will use: each null a method fills, resolved by the one resolution ``wai.train`` runs.

``validate`` and ``--cfg job`` print the spec with these values in place of its
nulls (each marked with a comment saying where the value comes from), so a reader
sees the base model, the LoRA rank, the batch size and every knob the method fills
before anything runs. Each stage goes through the stage rules (``stages.plan_stages``)
and the same ``train_spec`` that ``wai.train`` calls with what the pipeline passes it
(``stages.stage_inputs``), so what is printed is what the jobs get.

    filled, notes = effective(spec)      # spec: schema.recipe_spec(plain); notes: dotted key -> why it holds that value
    print(annotated_yaml(filled, notes))
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from whileai.simulations import defaults as sdk
from whileai.simulations.training import FROM_DATA, Resolved, train_spec

from .schema import HOST_KEYS, KNOBS, Problem, RecipeSpec
from .stages import Stage, plan_stages, stage_inputs

__all__ = ["effective", "annotated_yaml", "resolve_stages", "resolution_problems", "validated"]


def resolve_stages(spec: RecipeSpec, origin: Callable[[str], str] | None = None,
                   data: Mapping[str, Any] | None = None) -> list[tuple[Stage, Resolved]]:
    """Each stage of ``spec`` with what ``wai.train`` resolves it to (no dataset facts unless ``data``); a stage
    that continues another starts from that one's resolved values."""
    resolved: dict[str, Resolved] = {}
    out = []
    for stage in plan_stages(spec):
        if stage.method not in sdk.TRAIN_METHODS:
            continue
        kwargs, config = stage_inputs(stage, spec, origin=origin or (lambda key: ""))
        start = resolved[stage.start].values if stage.start is not None else None
        result = train_spec(stage.method, kwargs, config, base_model=stage.settings.get("base_model"),
                            target=spec.target.name,
                            holdout=None, start=start, start_label=f"the {stage.start} stage" if start else None,
                            data=data)
        resolved[stage.name] = result
        out.append((stage, result))
    return out


def resolution_problems(spec: RecipeSpec, origin: Callable[[str], str] | None = None) -> list[Problem]:
    """What ``wai.train`` would refuse in a spec the schema accepts: rules between knobs (``near_misses`` needs
    ``reward_span=first_action``, ...), checked by the same resolution, each named with the stage's key."""
    where = origin or (lambda key: "")
    out = []
    for stage, result in resolve_stages(spec, origin):
        for problem in result.problems:
            key = _problem_key(stage, problem)
            out.append(Problem(key, f"{stage.prefix or 'the spec: '}{problem}", where(key)))
    return out


_NAMED = re.compile(r"^(?P<name>[a-z_]+)=")


def _problem_key(stage: Stage, problem: str) -> str:
    """The spec key a resolution problem is about, so that its origin is where that key was set (``base_model=``
    typed on the command line is the command line's, not the recipe's): the key the message opens with
    (``base_model='...' does not exist``), else the stage itself."""
    named = _NAMED.match(problem)
    name = named["name"] if named else None
    if name is not None and name in stage.from_spec:
        return stage.from_spec[name]
    if name is not None and name in (*KNOBS, *HOST_KEYS, "base_model", "check"):
        return f"{stage.prefix}{name}"
    return f"{stage.prefix}{stage.method}" if not stage.prefix else stage.prefix.rstrip(".")


def validated(plain: dict[str, Any], origin: Callable[[str], str] | None = None) -> tuple[RecipeSpec | None, list[Problem]]:
    """``(the typed spec, [])`` for a composed ``plain`` dict, or ``(None, every problem)``: the schema's
    (:func:`schema.check`), then, on a spec it accepts, the rules between knobs (:func:`resolution_problems`)."""
    from .schema import check, recipe_spec

    problems = check(plain, origin)
    if problems:
        return None, problems
    spec = recipe_spec(plain)
    problems = resolution_problems(spec, origin)
    return (None if problems else spec), problems


def effective(spec: RecipeSpec) -> tuple[dict[str, Any], dict[str, str]]:
    """The spec's keys (:meth:`RecipeSpec.plain`) with each null the job fills set to its value, and why per key."""
    filled = spec.plain()
    notes: dict[str, str] = {}
    for stage, result in resolve_stages(spec):
        node = filled["stages"][stage.name] if stage.prefix else filled
        for key, taken in stage.from_spec.items():
            if key in ("seed",) and node.get(key) is None:
                node[key] = stage.settings[key]
                notes[f"{stage.prefix}{key}"] = f"the spec's {taken} (a stage without its own takes it)"
        if node.get("base_model") is None:
            node["base_model"] = result.values.get("base_model")
            notes[f"{stage.prefix}base_model"] = result.provenance.get("base_model", "")
        for key in (*KNOBS, *HOST_KEYS):
            if node.get(key) is not None or key not in result.values:
                continue
            if stage.method == "grpo" and key in FROM_DATA:
                node[key] = None
                notes[f"{stage.prefix}{key}"] = FROM_DATA[key]
            elif result.values.get(key) is not None:
                node[key] = result.values[key]
                notes[f"{stage.prefix}{key}"] = result.provenance.get(key, "")
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
