"""A job's row as typed objects: the run's spec as its own model, and what the platform writes beside it.

The platform writes a job's row when it launches the run (``whileai/platform/launcher/jobs.py``); the job reads it
back (``whileai/jobs/worker.py`` through ``GET /jobs/{id}``, ``whileai/jobs/modal_app.py`` from its payload). The
row keeps two things apart:

- ``spec``: the validated run spec, stored as the spec's own JSON (:func:`whileai.core.spec.spec_json`) and read
  back with :func:`whileai.core.spec.read_spec`;
- ``platform``: :class:`JobPlatform`, the platform's bookkeeping: where the job's process runs and when it started,
  what the launch resolved (the gold judge and the reward model, :class:`ResolvedJudge`: adapter folder, base,
  threshold, span), where a ``python:`` reward is imported from, how far a Modal job's progress was replayed.

Rows written before the split kept both in one dict (``spec``); the store's revision ``0006_job_platform_fields``
moves the platform's keys out when the store is upgraded (``whileai/platform/store/migrations/versions``), so an
upgraded store's rows read here. A record with no ``platform`` entry is refused naming that upgrade.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, NonNegativeInt, ValidationError, field_serializer, field_validator

from whileai.core.spec import RMSpec, RunSpec, knob_of, read_spec, spec_json

__all__ = ["ResolvedJudge", "JobPlatform", "JobRow", "read_platform", "platform_of", "platform_json", "read_job_row",
           "PLATFORM_FIELDS", "UPGRADE_HINT"]

#: How a store whose job rows predate the split is brought up to date (its rows keep the platform's keys in spec)
UPGRADE_HINT = "python -m whileai platform upgrade (or open the store with this whileai, which upgrades it)"


class ResolvedJudge(BaseModel):
    """A finished ``rm`` run the platform resolved at launch for a GRPO job: its gold judge (``gold_judge``) or
    the reward model ``reward=rm`` optimises (``reward_model``). The job loads exactly this, never what the run's
    summary says (``whileai/platform/launcher/jobs.py``, ``_reward_model_run``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    run_id: str
    #: the adapter folder the rm run's own job saved (on Modal: its copy on the adapters Volume)
    adapter: str
    #: the rm run's base, passed by the launch's base rule
    base_model: str
    #: the rm run's decision threshold (its summary's ``training.threshold``)
    threshold: float
    #: what the reward model scores (RMSpec ``reward_span``); a run of before the knob reads the declared default
    span: str = knob_of(RMSpec, "reward_span").default

    @field_validator("threshold")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError(f"threshold={value!r} is not a finite number")
        return value

    @field_validator("span", mode="before")
    @classmethod
    def _span(cls, value: Any) -> Any:
        declared = knob_of(RMSpec, "reward_span")
        if value is None:
            return declared.default
        if value not in (declared.choices or ()):
            raise ValueError(f"span={value!r} is not one of {', '.join(map(repr, declared.choices or ()))}")
        return value


class JobPlatform(BaseModel):
    """What the platform writes on a job's row beside its spec; a launch may not send any of it."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    #: the machine a local job's worker runs on: only that machine signals it or reads its process
    host: str | None = None
    #: when the worker was started or the Modal call spawned (the start grace counts from it)
    launched_at: float | None = None
    #: the worker process's start time (``_pids.start_time``): with the row's ``pid``, the process it names
    pid_started: str | None = None
    #: how many of a Modal job's recorded requests were replayed on its run
    pulled: NonNegativeInt | None = None
    #: the gold judge a GRPO job's monitor scores with (``gold_judge``), resolved at launch
    gold: ResolvedJudge | None = None
    #: the reward model a GRPO job with ``reward=rm`` optimises (``reward_model``), resolved at launch
    reward_rm: ResolvedJudge | None = None
    #: where the embedded platform's job imports a ``python:`` reward from (the launching user's directory)
    reward_path: str | None = None
    #: the key hash of a job launched before job keys had a table of their own (revoked when the job ends)
    key_hash: str | None = None

    def judge(self, field: str) -> ResolvedJudge | None:
        """The resolution of spec field ``field`` (``gold_judge`` -> ``gold``, ``reward_model`` -> ``reward_rm``)."""
        return {"gold_judge": self.gold, "reward_model": self.reward_rm}[field]


#: the keys of a job row's ``platform`` entry
PLATFORM_FIELDS = tuple(JobPlatform.model_fields)


def platform_json(platform: JobPlatform) -> dict[str, Any]:
    """``platform`` as JSON, for the store's column and a Modal job's payload: the one place the platform's fields
    become a dict. Only what is set, so a row names what the platform wrote."""
    return platform.model_dump(mode="json", exclude_none=True)


def read_platform(fields: Any, where: str) -> JobPlatform:
    """``fields`` (a :class:`JobPlatform`, or its JSON) as the model; ``ValueError`` naming every bad entry of
    ``where`` (e.g. ``job job_1``), what is accepted, and the fix."""
    if isinstance(fields, JobPlatform):
        return fields
    if not isinstance(fields, Mapping):
        raise ValueError(f"{where}: its platform fields are {type(fields).__name__}, not an object of "
                         f"{', '.join(PLATFORM_FIELDS)}; launch the run again (python -m whileai resume RUN_ID)")
    try:
        return JobPlatform.model_validate(dict(fields))
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc'])}={_shown(e.get('input'))}: {e['msg']}" for e in exc.errors()]
    raise ValueError(f"{where}: its platform fields are not the platform's ({'; '.join(problems)}); they take "
                     f"{', '.join(PLATFORM_FIELDS)}, which only the platform's launch writes: launch the run again "
                     "(python -m whileai resume RUN_ID) rather than editing the row")


def platform_of(job: Mapping[str, Any]) -> JobPlatform:
    """The typed ``platform`` entry of a job record (the store's, or ``GET /jobs/{id}``'s answer)."""
    where = f"job {job.get('id', '(no id)')}"
    if "platform" not in job:
        raise ValueError(f"{where} has no platform fields: its record was written by a whileai older than the "
                         f"typed job row, which kept them in its spec; upgrade the store ({UPGRADE_HINT})")
    return read_platform(job["platform"], where)


class JobRow(BaseModel):
    """A job as the job itself reads it: which job and run, its spec as its method's model, and the platform's
    fields. The record's other columns (pid, status times, error) are the platform's and not read here."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str
    run_id: str | None = None
    kind: str | None = None
    target: str | None = None
    spec: RunSpec
    platform: JobPlatform = JobPlatform()

    @field_validator("spec", mode="before")
    @classmethod
    def _spec(cls, value: Any) -> Any:
        return read_spec(value) if isinstance(value, Mapping) else value

    @field_serializer("spec")
    def _spec_json(self, spec: RunSpec) -> dict[str, Any]:
        return spec_json(spec)  # the spec's own model: its method's fields, as set


def read_job_row(record: Mapping[str, Any]) -> JobRow:
    """The typed job of a job record: ``ValueError`` naming the problem when its spec is no run spec of its method
    (:func:`whileai.core.spec.read_spec`'s wording) or its platform fields are not the platform's."""
    spec = record.get("spec")
    if not isinstance(spec, Mapping):
        raise ValueError(f"job {record.get('id', '(no id)')}'s spec is {type(spec).__name__}, not a run spec; "
                         "launch the run again (python -m whileai resume RUN_ID)")
    platform = platform_of(record)
    typed = read_spec(spec)
    ident, run_id = record.get("id"), record.get("run_id")
    if not isinstance(ident, str) or not (run_id is None or isinstance(run_id, str)):
        raise ValueError(f"job record id={_shown(ident)}, run_id={_shown(run_id)}: ids are strings; read the job "
                         "with GET /jobs/{id}")
    return JobRow(id=ident, run_id=run_id, kind=_text(record.get("kind")), target=_text(record.get("target")),
                  spec=typed, platform=platform)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."
