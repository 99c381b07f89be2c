"""The values a spec's jobs will use: each null a method fills, resolved by the one resolution ``wai.train`` runs.

``validate`` and ``--cfg job`` print the spec with these values in place of its
nulls (each marked with a comment saying where the value comes from), so a reader
sees the base model, the LoRA rank, the batch size and every knob the method fills
before anything runs. Each stage goes through the stage rules (``stages.plan_stages``)
and the same ``train_spec`` that ``wai.train`` calls, once (``validated_stages``): the
frozen spec it makes is what the pipeline hands ``wai.train``, so what is printed is
what the jobs get.

    filled, notes = effective(spec)      # spec: schema.recipe_spec(plain); notes: dotted key -> why it holds that value
    print(annotated_yaml(filled, notes))
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from whileai.core.spec import RunSpec
from whileai.core import defaults as core_defaults
from whileai.simulations.training import FROM_DATA, DataFacts, Resolved, train_spec

from whileai.runner.schema import HOST_KEYS, KNOBS, Problem, RecipeSpec
from whileai.runner.stages import Stage, plan_stages, stage_check, stage_inputs

#: the dataset facts a stage starting from no other reads (``_rundata.RunData.facts``): of the spec's train side, or
#: of a stage's ``train_tasks`` share of it
Facts = Callable[[RecipeSpec, tuple[float, float] | None], DataFacts | None]

__all__ = ["effective", "annotated_yaml", "resolve_stages", "stage_specs", "resolution_problems", "validated",
           "validated_stages"]


def resolve_stages(spec: RecipeSpec, origin: Callable[[str], str] | None = None,
                   data: DataFacts | None = None,
                   facts: Facts | None = None,
                   ) -> list[tuple[Stage, Resolved]]:
    """Each stage of ``spec`` with what ``wai.train`` resolves it to, once: a stage that continues another starts
    from that one's spec. The knobs the dataset decides come from ``data``, else, for a stage that starts from no
    other, from ``facts(spec)`` (a run's own rows, read only when a stage wants them and nothing else is wrong with
    it); otherwise they are left unset on the spec, for the submit to fill (``resolve_spec``'s ``data_later``)."""
    resolved: dict[str, Resolved] = {}
    out = []
    for stage in plan_stages(spec):
        if stage.method not in core_defaults.TRAIN_METHODS:
            continue
        kwargs, config = stage_inputs(stage, spec, origin=origin or (lambda key: ""))
        before = resolved[stage.start] if stage.start is not None else None
        start = None if before is None else before.spec if before.spec is not None else before.values
        read, later = _data_of(stage, spec, data, facts)
        result = train_spec(stage.method, kwargs, config, base_model=stage.settings.get("base_model"),
                            target=spec.target.name,
                            holdout=None, start=start, start_label=f"the {stage.start} stage" if start else None,
                            data=read, data_later=later)
        resolved[stage.name] = result
        out.append((stage, result))
    return out


def _data_of(stage: Stage, spec: RecipeSpec, data: DataFacts | None,
             facts: Facts | None,
             ) -> tuple[DataFacts | Callable[[], DataFacts | None] | None, bool]:
    """``(what the stage's resolution reads the dataset facts from, whether they are left for the submit)``.

    A stage that continues another is resolved again at its submit (its start run is filled in there), which
    reads the facts; one that starts from no other is sent as it is, so it takes them now: from the run's own rows
    (``facts``), or none at all where its selection gate is off (``wai.train`` reads none then: the defaults)."""
    if data is not None:
        return data, False
    if stage.start is not None or facts is None:
        return None, True
    if stage_check(stage, spec) == "off":
        return None, False
    return (lambda: facts(spec, stage.tasks)), False


def stage_specs(results: list[tuple[Stage, Resolved]],
                origin: Callable[[str], str] | None = None) -> tuple[list[tuple[Stage, RunSpec]], list[Problem]]:
    """``(each stage with its spec, [])`` from :func:`resolve_stages`' results, or ``([], every problem)``, each
    named with the stage's key and where it was set (``origin``)."""
    where = origin or (lambda key: "")
    problems = []
    for stage, result in results:
        for problem in result.problems:
            key = _problem_key(stage, problem)
            problems.append(Problem(key, f"{stage.prefix or 'the spec: '}{problem}", where(key)))
    if problems:
        return [], problems
    return [(stage, result.spec) for stage, result in results if result.spec is not None], []


def resolution_problems(spec: RecipeSpec, origin: Callable[[str], str] | None = None) -> list[Problem]:
    """What ``wai.train`` would refuse in a spec the schema accepts: rules between knobs (``near_misses`` needs
    ``reward_span=first_action``, ...), checked by the same resolution, each named with the stage's key."""
    return stage_specs(resolve_stages(spec, origin), origin)[1]


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
    (:func:`schema.checked`), then, on a spec it accepts, the rules between knobs (:func:`resolution_problems`)."""
    spec, _stages, problems = validated_stages(plain, origin)
    return spec, problems


def validated_stages(plain: dict[str, Any], origin: Callable[[str], str] | None = None,
                     rewrite: Callable[[RecipeSpec], RecipeSpec] | None = None,
                     facts: Facts | None = None,
                     ) -> tuple[RecipeSpec | None, list[tuple[Stage, RunSpec]], list[Problem]]:
    """``(the typed spec, each stage with its resolved spec, [])`` for a composed ``plain`` dict, or
    ``(None, [], every problem)``: the recipe validated once (:func:`schema.checked`), ``rewrite`` applied to it
    (a quick run's caps), and each stage resolved once (:func:`resolve_stages`, with ``facts``): the objects a run
    carries."""
    from whileai.runner.schema import checked

    spec, problems = checked(plain, origin)
    if spec is None or problems:
        return None, [], problems
    if rewrite is not None:
        spec = rewrite(spec)
    stages, problems = stage_specs(resolve_stages(spec, origin, facts=facts), origin)
    return (None if problems else spec), stages, problems


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
