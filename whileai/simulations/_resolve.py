"""One resolution: what a user gave, turned into the frozen, fully filled spec that runs, with where each value came from.

``wai.train``, the runner's ``validate`` and ``--cfg job``, the pipeline's stages and the
launch route's caller all go through :func:`resolve_spec`. Its inputs are what was given
(``wai.train``'s arguments and ``config=`` keys, or a recipe's and command line's values), where
each given value came from, the run a stage starts from, and the dataset facts GRPO reads its
group size and temperature from. Its output is the method's spec object (``whileai.core.spec``)
with every knob set, and ``provenance``: knob -> ``typed on the command line``,
``recipes/x.yaml:12``, ``inherited from ...``, ``default (reason)``.

Nothing here loads a model or reads the platform.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from pydantic import ValidationError

from whileai.core.knobs import check_knob, many_value
from whileai.core.spec import BOOKKEEPING, SPEC_MODELS, SPEC_VERSION, RunSpec, canonical, is_whole, knob_fields, \
    knob_of, spec_problems

from whileai.domain import defaults
from whileai.kit import defaults as kit_defaults
from whileai.simulations._basecheck import base_problems

__all__ = ["Resolved", "resolve_spec", "is_resolved", "standing_problems", "data_facts", "DataFacts", "LORA_SHAPE", "INHERITED",
           "FROM_DATA", "KIT_SFT"]

#: the LoRA shape a run started from another inherits (the adapter keeps its shape)
LORA_SHAPE = ("lora_rank", "lora_alpha")
#: how the provenance of a value taken from the run (or stage) this one continues begins
INHERITED = "inherited from "
#: GRPO knobs the dataset decides when left unset (so ``validate``, which reads no data, cannot know them), with how
FROM_DATA = {
    "generations": "null: the dataset's rollouts per task (its common group size), clipped to the knob's range",
    "temperature": "null: the rows' own sampling.temperature when they share one, else the knob's default",
}
#: the kit demo base's proven LoRA SFT recipe (benchmarks/kit_lora_sft.py), by knob
KIT_SFT = {"learning_rate": "KIT_SFT_LR", "steps": "KIT_SFT_STEPS", "batch_size": "KIT_SFT_BATCH",
           "lora_rank": "KIT_SFT_LORA_R", "lora_alpha": "KIT_SFT_LORA_ALPHA"}


@dataclass(frozen=True)
class Resolved:
    """What :func:`resolve_spec` made: the spec (None when there are problems), its values, and why each."""

    spec: RunSpec | None
    values: dict[str, Any]
    provenance: dict[str, str]
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _default(method: str, name: str, base: str, model: type[RunSpec]) -> tuple[Any, str]:
    if base == kit_defaults.KIT_BASE_NAME and method == "sft" and name in KIT_SFT:
        return getattr(kit_defaults, KIT_SFT[name]), f"the kit base's measured SFT recipe ({KIT_SFT[name]})"
    meta = knob_of(model, name)
    return meta.default, f"{method}'s default" + (f" ({meta.reason})" if meta.reason else "")


class DataFacts(TypedDict):
    """The dataset facts GRPO fills its unset group size and temperature from: the common rollouts per task (None
    for no rows) and the rows' distinct sampling temperatures, in order."""

    repeats: int | None
    temperatures: list[float]


def data_facts(profile: Mapping[str, Any]) -> DataFacts:
    """What GRPO fills its unset group size and temperature from (``resolve_spec``'s ``data``), read off the
    profile of the rows it trains on (``datasets.profile``): the common rollouts per task and the distinct
    sampling temperatures."""
    return {"repeats": (profile.get("repeats") or {}).get("common"),
            "temperatures": [float(t) for t in profile.get("temperatures") or []]}


def _from_data(name: str, data: DataFacts) -> tuple[Any, str] | None:
    """GRPO's group size and temperature as the dataset gives them, or None when it does not."""
    repeats = data.get("repeats")
    if name == "generations" and repeats:
        lo, hi = defaults.TRAINING_KNOBS["generations"]["grpo"]["range"]
        return min(max(int(repeats), int(lo)), int(hi)), "the dataset's rollouts per task (clipped to range)"
    temps = [float(t) for t in data.get("temperatures") or []]
    if name == "temperature" and len(temps) == 1:
        return temps[0], "the rows' own sampling.temperature (like for like)"
    return None


@dataclass
class _Draft:
    """A resolution under way: the values so far, why each, and what is wrong or worth saying."""

    method: str
    model: type[RunSpec]
    values: dict[str, Any]
    provenance: dict[str, str]
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def resolve_spec(method: str, given: Mapping[str, Any], *, origin: Mapping[str, str] | None = None,
                 base_model: str | None = None, target: str | None = None, holdout: str | None = None,
                 start: RunSpec | Mapping[str, Any] | None = None, start_label: str | None = None,
                 data: DataFacts | Callable[[], DataFacts | None] | None = None,
                 given_label: str = "given", init_from: str | None = None, data_later: bool = False) -> Resolved:
    """The spec ``method`` runs with, from ``given`` (knobs and config keys, None = unset), every problem at once.

    ``origin`` names where each given key came from (``given_label`` otherwise); ``start`` is the
    spec of the stage this one continues, or the config of the run it continues, whose base and LoRA
    shape it inherits, and ``init_from`` its id, recorded on the spec; ``data`` holds the dataset facts
    GRPO fills its unset group size and temperature from (``repeats``: the common rollouts per task,
    ``temperatures``: the rows' distinct ones), or is a function that reads them, called only when a
    fact is wanted and nothing else is wrong. ``data_later`` (with no ``data``) leaves those two unset
    on the spec, for the submit that reads the dataset (``wai.train(spec=...)``) to fill; ``values``
    holds their defaults meanwhile.
    """
    if method not in SPEC_MODELS:
        return Resolved(None, {}, {}, [f"method={method!r} is not a training method; pass one of "
                                       f"{', '.join(SPEC_MODELS)}"])
    origin, given, start_config = origin or {}, canonical(given), _start_shape(start)
    started = start_label or "the run it starts from"
    base, why = _base(start_config, base_model, started, origin.get("base_model", given_label))
    draft = _Draft(method, SPEC_MODELS[method], {"spec_version": SPEC_VERSION, "method": method, "base_model": base,
                                                 "target": target, "holdout": holdout}, {"base_model": why})
    if init_from is not None:
        draft.values["init_from"] = init_from
    draft.problems += base_problems(base)  # a path on this machine that holds no model: refused before any run exists
    wanted = _fill_knobs(draft, given, origin, given_label, start_config, started)
    _one_length(draft, given)
    _other_keys(draft, given)
    _method_problems(draft)
    if wanted and data is not None and not draft.problems:
        _fill_from_data(draft, wanted, data() if callable(data) else data)
    draft.values["provenance"] = draft.provenance
    spec = None
    if not draft.problems:
        later = wanted if data is None and data_later else []
        try:
            spec = draft.model.model_validate({k: v for k, v in draft.values.items() if k not in later})
        except ValidationError:
            draft.problems += spec_problems(draft.values)
    return Resolved(spec, draft.values, draft.provenance, draft.problems, draft.notes)


def is_resolved(spec: RunSpec) -> bool:
    """Whether ``spec`` is what :func:`resolve_spec` makes, so that resolving it again with nothing beside it gives
    the same spec: this version's, its base and every knob set, each with where it came from (none left for the
    dataset to decide), no user's notes under ``extra`` (a resolution says each again), and none of the launcher's
    bookkeeping (a job's own copy names its run, dataset and start adapter; a resolution drops them)."""
    knobs = knob_fields(type(spec))
    return (spec.spec_version == SPEC_VERSION and not spec.extra and bool(spec.base_model)
            and set(spec.provenance or {}) == {"base_model", *knobs}
            and all(name in spec.model_fields_set for name in knobs)
            and all(getattr(spec, name) is None for name in BOOKKEEPING if name != "spec_version"))


def standing_problems(spec: RunSpec) -> list[str]:
    """What a resolution checks beyond the spec's model, asked again of a resolved ``spec`` a submit sends as it is:
    the base on this machine (a path that holds no model) and the rules between knobs that read more than the
    knobs (a ``python:`` reward imported and tried, ...)."""
    model = type(spec)
    draft = _Draft(spec.method, model, {name: getattr(spec, name) for name in model.model_fields}, {})
    draft.problems += base_problems(spec.base_model)
    _method_problems(draft)
    return draft.problems


def _start_shape(start: RunSpec | Mapping[str, Any] | None) -> dict[str, Any]:
    """What a run takes from the one it continues: its base and LoRA shape, from a stage's spec or a run's config."""
    if isinstance(start, RunSpec):
        return {"base_model": start.base_model, **{name: getattr(start, name, None) for name in LORA_SHAPE}}
    return canonical(start or {})


def _base(start: Mapping[str, Any], base_model: str | None, started: str, given_as: str) -> tuple[str, str]:
    """The base the run trains on, and why: the start run's, the one named, or the kit's demo base."""
    if start.get("base_model"):
        return str(start["base_model"]), f"{INHERITED}{started}"
    if base_model:
        return base_model, given_as
    return kit_defaults.KIT_BASE_NAME, "default (the kit's demo base, KIT_BASE_NAME)"


def _fill_knobs(draft: _Draft, given: Mapping[str, Any], origin: Mapping[str, str], given_label: str,
                start: Mapping[str, Any], started: str) -> list[str]:
    """Every knob of the method: as given (checked), the start run's LoRA shape, or the default. Returns the
    knobs left for the dataset to decide (GRPO's FROM_DATA, unset), which hold their defaults meanwhile."""
    method, model, wanted = draft.method, draft.model, []
    table = {**defaults.TRAINING_KNOBS, **defaults.TRAINING_HOST_KEYS}
    for name in knob_fields(model):
        value = given.get(name)
        if value is not None:
            problem = check_knob(name, value, method, table[name], whole=is_whole(model, name))
            if problem:
                draft.problems.append(problem)
                continue
            if table[name][method].get("many"):  # a list knob given as a comma string is recorded as its list
                value = many_value(value, numbers="range" in table[name][method])
            draft.values[name], draft.provenance[name] = value, origin.get(name, given_label)
        elif name in LORA_SHAPE and start.get(name) is not None:
            draft.values[name], draft.provenance[name] = start[name], f"{INHERITED}{started} (its adapter's shape)"
        else:
            draft.values[name], draft.provenance[name] = _default(method, name, str(draft.values["base_model"]), model)
            if method == "grpo" and name in FROM_DATA:
                wanted.append(name)
    return wanted


def _one_length(draft: _Draft, given: Mapping[str, Any]) -> None:
    """SFT: one of steps and epochs decides the length; the other is recorded None (not read)."""
    if draft.method != "sft":
        return
    values, provenance = draft.values, draft.provenance
    if given.get("steps") is None and given.get("epochs") is not None:
        values["steps"], provenance["steps"] = None, "none: the epochs given decide the length"
    elif values.get("steps") is not None and given.get("epochs") is None:
        values["epochs"], provenance["epochs"] = None, "none: a step count decides the length"


def _other_keys(draft: _Draft, given: Mapping[str, Any]) -> None:
    """Given keys that are not this method's knobs: another method's knob (refused unless it is the exporter's
    own value), a GRPO-only config key, or a user's note kept under ``extra``."""
    method, model, values = draft.method, draft.model, draft.values
    table = {**defaults.TRAINING_KNOBS, **defaults.TRAINING_HOST_KEYS}
    names = knob_fields(model)
    for name, value in given.items():
        if name in names or name in values or value is None and name not in defaults.TRAINING_CONFIG_KEYS:
            continue
        if name in table:  # a knob another method reads
            if name in defaults.TRAIN_EXPORT_DEFAULTS and value == defaults.TRAIN_EXPORT_DEFAULTS[name] \
                    and type(value) is type(defaults.TRAIN_EXPORT_DEFAULTS[name]):
                continue  # the exporter's own value: a no-op for a method that does not export
            draft.problems.append(check_knob(name, value, method, table[name]) or f"{name} does not apply to {method}")
        elif name in defaults.TRAINING_CONFIG_KEYS and name in model.model_fields:
            if value is not None:
                values[name] = value
        elif name in defaults.TRAINING_CONFIG_KEYS:
            readers = " and ".join(m for m, spec_model in SPEC_MODELS.items() if name in spec_model.model_fields)
            draft.problems.append(f"{name}={value!r} does not apply to {method} (it is read by {readers}); leave it out")
        else:
            values.setdefault("extra", {})[name] = value
            readers = ", ".join(k for k, v in defaults.TRAINING_HOST_KEYS.items() if method in v)
            draft.notes.append(f"config key {name!r} is kept on the run but not read by the {method} trainer (it "
                               f"reads {readers})")


def _method_problems(draft: _Draft) -> None:
    """What only the knobs together say: GRPO's rewards (weights per reward, rm's run, a python: function that
    works, what an environment reads of them), a reward model's near misses against its span. Reported beside
    every knob's own problem, so one refusal names them all."""
    if draft.method == "grpo":
        import os

        from whileai.core.spec import environment_reward_problems
        from whileai.domain.judges.rewards import reward_problems

        draft.problems += reward_problems(draft.values, search_path=os.getcwd())  # where the embedded job imports it
        draft.problems += environment_reward_problems(draft.values)
    if draft.method == "rm":
        from whileai.domain.judges.reward_model import near_miss_problem

        problem = near_miss_problem(draft.values.get("near_misses"), draft.values.get("reward_span"))
        if problem:
            draft.problems.append(problem)


def _fill_from_data(draft: _Draft, wanted: list[str], data: DataFacts | None) -> None:
    """GRPO's unset group size and temperature from the dataset facts, where the dataset gives them."""
    for name in wanted:
        found = _from_data(name, data) if data is not None else None
        if found:
            draft.values[name], draft.provenance[name] = found
