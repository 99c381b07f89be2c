"""Reading and writing run specs: a config validated once into its method's model (:func:`parse_spec`,
:func:`read_spec`, :func:`read_job_spec`), every problem worded (:func:`spec_problems`) or the knobs it lacks named
(:func:`missing_keys`), the one "same run" rule (:func:`same_run`), the JSON edge (:func:`spec_json`,
:func:`job_json`), the one way a frozen spec changes (:func:`updated`), and the tables read off the declarations
(:func:`knob_table`, :data:`NOT_KNOBS`). ``whileai.core.spec`` re-exports the public names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from whileai.core import defaults as d
from whileai.core._knob import KnobRow, Surface, _unset, knob_fields, knob_of
from whileai.core._spec_models import SPEC_MODELS, RunSpec
from whileai.core._spec_versions import RETIRED, SPEC_VERSION, canonical
from whileai.core.runnerrecord import RunnerRecord

__all__ = [
    "NOT_KNOBS",
    "BOOKKEEPING",
    "BESIDE",
    "JOB_ROW_KEYS",
    "knob_table",
    "parse_spec",
    "spec_problems",
    "missing_keys",
    "read_spec",
    "same_run",
    "read_job_spec",
    "spec_json",
    "job_json",
    "updated",
]

#: The spec's fields that are not knobs (identity, placement, bookkeeping), read from the declarations: a field of
#: a method's model declared without :func:`knob`.
NOT_KNOBS = tuple(dict.fromkeys(name for model in SPEC_MODELS.values() for name in model.model_fields
                                if name not in knob_fields(model)))
#: Fields no user writes: the record's version, and what the launcher sets on the job's own copy (which run and
#: dataset, the start adapter's folder). Left out of the settings a refusal offers and of what a submit compares.
BOOKKEEPING = ("spec_version", "run_id", "dataset", "init_adapter")
#: Fields a submit writes beside a resolved spec it sends as it is, rather than on a second, validated spec object:
#: the held-out set it names and the runner's record. No rule of the spec reads them (its validators read the knobs),
#: so each is checked by its own type alone (:func:`spec_json` writes them; the launch route reads the whole).
BESIDE = ("holdout", "runner")
#: Keys only the platform writes on a job row beside the spec (where the job runs, logs and reports, the judges it
#: resolved, where a python: reward is imported from, its process's start time); a launch may not send them and the
#: worker reads past them.
JOB_ROW_KEYS = ("log", "key_hash", "host", "launched_at", "pulled", "pid", "pid_started", "call_id", "gold",
                "reward_rm", "reward_path")


def knob_table(*surfaces: Surface) -> dict[str, dict[str, KnobRow]]:
    """knob -> method -> row (range or choices, default, paper, source, reason, help), from the declarations.

    ``surfaces`` keeps the knobs given there (all when empty): ``argument`` and ``export`` are
    ``wai.train``'s keyword arguments, ``config`` its ``config=`` keys.
    """
    table: dict[str, dict[str, KnobRow]] = {}
    for method, model in SPEC_MODELS.items():
        for name in knob_fields(model):
            meta = knob_of(model, name)
            if surfaces and meta.surface not in surfaces:
                continue
            table.setdefault(name, {})[method] = meta.row()
    return table


def _model(config: Mapping[str, Any]) -> type[RunSpec]:
    method = config.get("method")
    if not isinstance(method, str) or method not in SPEC_MODELS:  # a list or an object is no method either
        raise ValueError(f"method={_shown(method)} is not a training method; pass one of {', '.join(SPEC_MODELS)}")
    return SPEC_MODELS[str(method)]


def parse_spec(config: Mapping[str, Any]) -> tuple[RunSpec | None, list[str]]:
    """``config`` validated once as a run spec of its method: ``(spec, [])``, or ``(None, every problem)``.

    Any version reads, aliases renamed; each problem (unknown keys, wrong types, out of range) names the fix.
    """
    fields = {k: v for k, v in canonical(config).items() if k not in RETIRED}
    try:
        model = _model(fields)
    except ValueError as exc:
        return None, [str(exc)]
    fields.setdefault("spec_version", SPEC_VERSION)
    try:
        return model.model_validate(fields), []
    except ValidationError as exc:
        return None, _worded(exc, model, str(fields["method"]))


def _worded(exc: ValidationError, model: type[RunSpec], method: str) -> list[str]:
    """Each problem once, every value cut to SPEC_SHOWN_CHARS; the unknown keys together, in one line."""
    out, unknown = [], []
    for error in exc.errors():
        key = ".".join(str(p) for p in error["loc"])
        if error["type"] == "extra_forbidden":
            unknown.append(key)
        elif not key:  # the range check: every knob's problem, already worded
            out.extend(str(error.get("ctx", {}).get("error", error["msg"])).split("\n"))
        else:
            out.append(f"{_cut(key)}={_shown(error.get('input'))}: {error['msg']}")
    if unknown:
        known = ", ".join(sorted(f for f in model.model_fields if f not in BOOKKEEPING))
        names = _cut(", ".join(unknown))
        out.insert(0, f"{names} {'is' if len(unknown) == 1 else 'are'} not {'a ' if len(unknown) == 1 else ''}"
                      f"{method} setting{'' if len(unknown) == 1 else 's'}; use one of: {known}")
    return out


def _cut(text: str) -> str:
    """``text`` cut to SPEC_SHOWN_CHARS, saying how long it was: a refusal echoes what it was sent, never all of it."""
    return text if len(text) <= d.SPEC_SHOWN_CHARS else text[:d.SPEC_SHOWN_CHARS] + f"... ({len(text):,} characters)"


def _shown(value: Any) -> str:
    """``value``'s repr as a message shows it (:func:`_cut`)."""
    return _cut(repr(value))


def spec_problems(config: Mapping[str, Any]) -> list[str]:
    """Every problem with ``config`` as a run spec (unknown keys, wrong types, out of range), each naming the fix."""
    return parse_spec(config)[1]


def missing_keys(config: Mapping[str, Any]) -> list[str]:
    """The knobs of ``config``'s method it does not name: a spec that is not fully resolved lacks some."""
    fields = canonical(config)
    try:
        model = _model(fields)
    except ValueError:
        return ["method"]
    return [name for name in ("base_model", *knob_fields(model)) if name not in fields or (fields[name] is None
                                                                                          and _unset(model, name))]


def read_spec(config: Mapping[str, Any]) -> RunSpec:
    """The typed spec of a run's ``config``: any version, aliases accepted, the method's model picked.

    Raises ``ValueError`` naming every problem when the config is not a spec of its method. A key
    an older record left None takes the declared default.
    """
    spec, problems = parse_spec(config)
    if spec is None:
        raise ValueError("not a run spec: " + "; ".join(problems))
    return spec


#: What a submit compares against a recorded run: not the bookkeeping, nor where each value came from.
_NOT_COMPARED = (*BOOKKEEPING, "provenance")


def same_run(existing: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether a submit of ``wanted`` is answered by the run recorded with ``existing`` (the one rule).

    The two specs are compared in canonical form; a ``target`` left None on the submit means
    "the platform's default", which the launcher writes into the recorded spec, so it matches
    whatever target the recorded run got.
    """
    a, b = canonical(existing), canonical(wanted)
    for key in _NOT_COMPARED:
        a.pop(key, None)
        b.pop(key, None)
    if b.get("target") is None:
        a.pop("target", None)
        b.pop("target", None)
    return a == b


def read_job_spec(row: Mapping[str, Any]) -> RunSpec:
    """The typed spec of a job row's ``spec`` (:func:`read_spec`), past the keys only the platform writes there."""
    return read_spec({k: v for k, v in row.items() if k not in JOB_ROW_KEYS})


def spec_json(spec: RunSpec, *, holdout: str | None = None, runner: RunnerRecord | None = None) -> dict[str, Any]:
    """``spec`` as JSON, for the HTTP request, the run's config and the job row: the one place a spec becomes a dict.

    The fields its resolution set, and only those, so a record reads back (:func:`read_spec`) as the same spec.
    ``holdout`` and ``runner`` are what a submit writes beside a resolved spec it sends as it is (:data:`BESIDE`):
    each over the spec's own, in the spec's field order, as a spec validated with them would read.
    Raises ``TypeError`` naming a value a user kept in ``extra`` that has no JSON form.
    """
    out = spec.model_dump(mode="json", exclude_unset=True, fallback=_json_value)
    if holdout is None and runner is None:
        return out
    if holdout is not None:
        out["holdout"] = holdout
    if runner is not None:
        out["runner"] = runner.model_dump(mode="json", exclude_unset=True, fallback=_json_value)
    return {name: out[name] for name in type(spec).model_fields if name in out}


def _json_value(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy and torch scalars and arrays a user's config may carry
        return value.tolist()
    raise TypeError(f"{value!r} ({type(value).__name__}) in a run spec has no JSON form; pass numbers, strings, "
                    "lists or dicts of them (str(...) it first if it is a label)")


def job_json(spec: RunSpec, run_id: str, dataset: str | None, *, holdout: str | None = None,
             runner: RunnerRecord | None = None) -> dict[str, Any]:
    """The job's own copy of ``spec`` as JSON (:func:`spec_json`, with what the submit wrote beside it), naming its
    run and dataset: the launch's body.

    ``run_id`` and ``dataset`` are bookkeeping the platform reads (:data:`BOOKKEEPING`), written at the JSON edge
    rather than on a second spec object; the launch route reads the whole body into the method's model."""
    return {**spec_json(spec, holdout=holdout, runner=runner), "run_id": run_id, "dataset": dataset}


_Model = TypeVar("_Model", bound=BaseModel)


def updated(model: _Model, **changes: Any) -> _Model:
    """``model`` (a frozen run spec, the runner's recipe spec, or a job row's platform fields) with ``changes`` applied,
    validated again.

    The one way a validated spec changes: every field it was given, with the changes over them, read by its own
    model, so a change is checked as the original was (ranges, the knobs together) and the result records the same
    given fields (:func:`spec_json`). Raises pydantic's ``ValidationError`` naming each problem.

        spec = updated(spec, init_from="run_...", holdout="ds_...")
    """
    given = {name: getattr(model, name) for name in model.model_fields_set}
    return type(model).model_validate({**given, **changes})
