"""The shapes of what the store answers: a record per table row, and the small answers of its actions.

Each is a plain dict at run time (the API sends it as JSON, the pages render it, tests compare it), so each is a
``TypedDict`` whose keys stand in the order the record is built: the JSON the API answers keeps that order.
A run's ``config`` and ``summary`` and a job's ``spec`` and ``platform`` are JSON their writers chose, kept as sent.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from whileai.platform.store.values import CostBasis

__all__ = ["SeriesPoint", "RunRecord", "JobRecord", "DatasetRecord", "ModelRecord", "AccountRecord",
           "AccountListing", "KeyListing", "JobKeyScope", "RunDeleted", "DatasetDeleted", "ModelDeleted",
           "PointsAccepted"]


class SeriesPoint(TypedDict):
    """One logged point of a run as read back: its step (None when it had none), when, and its metrics."""

    step: int | None
    ts: float
    metrics: dict[str, Any]  #: metric name to value, as logged


class RunRecord(TypedDict):
    """A run as the store answers it (``tables.run_record``), with its cost worked out from its summary."""

    id: str
    name: str | None
    status: str  #: as read: ``crashed`` for a running run whose writer went silent
    kind: str | None
    dataset: str | None
    after_dataset: str | None
    config: Any  #: any JSON value, as the run's creator sent it
    summary: dict[str, Any]  #: the JSON object the run's writers merged in, key by key
    error: str | None
    step: int
    total_steps: int | None
    created_at: float
    updated_at: float
    finished_at: float | None
    cost_usd: float | None
    cost_basis: CostBasis | None
    series: NotRequired[list[SeriesPoint]]  #: its points, oldest first, where ``get_run`` was asked for them
    url: NotRequired[str]  #: the run's page, added by the API before it answers


class JobRecord(TypedDict):
    """A hosted job's row as the store answers it (``tables._job_record``)."""

    id: str
    run_id: str | None
    kind: str | None
    target: str | None
    status: str
    pid: int | None
    call_id: str | None
    spec: Any  #: the run spec's own JSON (``whileai.core.spec.spec_json``), or what a refused resume was sent
    platform: dict[str, Any]  #: ``whileai.core.jobrow.JobPlatform``'s JSON: only the fields that are set
    heartbeat_at: float | None
    error: str | None
    created_at: float
    updated_at: float
    finished_at: float | None


class DatasetRecord(TypedDict):
    """A dataset as the store answers it, without its rows (``tables._dataset_record``)."""

    id: str
    name: str | None
    rows: int  #: how many rows it holds
    content_hash: str
    split: str | None
    sibling: str | None
    created_at: float
    updated_at: float


class ModelRecord(TypedDict):
    """A served name in the model registry (``tables._model_record``): what it serves, and its version."""

    name: str
    baseModel: str | None  #: the keys are the OpenAI-style names the API answers
    adapter: str | None
    adapterRunId: str | None
    version: int
    created_at: float
    updated_at: float
    endpoint: NotRequired[str]  #: the OpenAI-compatible base URL, added by the API before it answers


class AccountRecord(TypedDict):
    """An account as ``get_account`` answers it."""

    account_id: str
    name: str
    created_at: float


class AccountListing(AccountRecord):
    """An account as ``list_accounts`` lists it: its live account keys counted, and whether it is the local one."""

    keys: int
    local: bool


class KeyListing(TypedDict):
    """A live key as ``list_keys`` lists it: its name and when it was made (never the key, nor its prefix)."""

    name: str | None
    created_at: float


class JobKeyScope(TypedDict):
    """What a job's key reaches (``job_key_scope``): its job, the job's run, and what the job reads."""

    account_id: str
    job_id: str
    run_id: str | None
    datasets: tuple[str, ...]  #: the spec's ``dataset`` and ``holdout``
    reads: tuple[str, ...]  #: the other runs the spec names for the job to read (its ``gold_judge``)


class RunDeleted(TypedDict):
    """``delete_run``'s answer: the run's id, and the jobs and served models that went with it."""

    id: str
    deleted: bool
    jobs: list[str]
    models: list[str]


class DatasetDeleted(TypedDict):
    """``delete_dataset``'s answer."""

    id: str
    deleted: bool


class ModelDeleted(TypedDict):
    """``delete_model``'s answer."""

    name: str
    deleted: bool


class PointsAccepted(TypedDict):
    """``add_points``' answer: how many points were stored, and whether the batch was a resend stored before."""

    accepted: int
    duplicate: bool
