"""Runs on the platform: track a fine-tune, read it back, and put its results on its page.

    import whileai.simulations as wai

    run = wai.training_run(dataset="ds_...", config={"lr": 2e-4})
    trainer.add_callback(wai.TrainerCallback(run))
    trainer.train()          # the callback logs every step and finishes the run
    print(run)               # run_... done, step 40/40, http://127.0.0.1:8470/runs/run_...

The run handle, :class:`TrainingRun`, and the sending machinery (buffer,
background flush, retries, the spool, offline runs) live in :mod:`.tracking`;
``train`` in :mod:`._hosting`. This module is the surface
people call, and every training name is importable from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from whileai.domain.client import Client, get_client
from whileai.core.statuses import RUN_STATUSES

from whileai.domain.tracking import TrainingRun, create_run, holdout_fields, jsonable

if TYPE_CHECKING:
    from whileai.domain.report import DeltaReport

__all__ = [
    "TrainingRun",
    "TrainerCallback",  # noqa: F822 (built on first use by the module __getattr__ below)
    "training_run",
    "get_run",
    "list_runs",
    "delete_run",
    "resume",
    "attach_holdout",
    "attach_delta",
]


def _id_of(value: Any, prefix: str, what: str) -> str:
    """The id in ``value``: an id string, a record with "id", or a handle with ``.id``."""
    found = value.get("id") if isinstance(value, dict) else getattr(value, "id", value)
    if not isinstance(found, str) or not found:
        raise ValueError(f"{what}={value!r} is not a {prefix}... id; pass the id string or the handle that carries it")
    return found


def _client_of(value: Any, api_key: str | None) -> Client:
    if api_key is None and isinstance(value, TrainingRun):
        return value._client
    return get_client(api_key=api_key)


# ---------------------------------------------------------------------------
# Functions over runs by id
# ---------------------------------------------------------------------------


def training_run(
    dataset: Any = None,
    after_dataset: Any = None,
    config: Any = None,
    api_key: str | None = None,
    name: str | None = None,
) -> TrainingRun:
    """Create a run on the platform (status running) and return the handle to log into.

    ``dataset`` is the ``ds_...`` set trained on and ``after_dataset`` the
    post-training rollouts, when there are some (ids or the handles ``push``
    returns). ``config`` is anything JSON-shaped, shown on the page as given.
    A run the process never finishes is marked stopped when the process exits
    (failed, with the exception, when an uncaught exception ended it).

    The platform being down never stops the script: when it cannot be reached
    (or MODE_ENV is "offline") the run names itself, says so once on stderr,
    logs into the spool, and the next send that reaches the platform (offline:
    ``python -m whileai sync``) creates it under the same id with every point.

        with wai.training_run(dataset="ds_...", config={"lr": 2e-4}) as run:
            for step in range(100):
                run.log(step=step, loss=train_step())
    """
    body: dict[str, Any] = {"name": name}
    if dataset is not None:
        body["dataset"] = _id_of(dataset, "ds_", "dataset")
    if after_dataset is not None:
        body["after_dataset"] = _id_of(after_dataset, "ds_", "after_dataset")
    if config is not None:
        body["config"] = jsonable(config, "config")
    body = {k: v for k, v in body.items() if v is not None}
    client = get_client(api_key=api_key)
    record, deferred, offline = create_run(client, body)
    run = TrainingRun(record, client)
    if deferred is not None:
        run._tracker.defer_create(deferred, offline)
    run._tracker.own()
    return run


def get_run(run_id: Any, api_key: str | None = None) -> dict[str, Any]:
    """The run's record with its summary, its ``series`` (points, oldest first) and its cost.

    ``cost_usd`` is seconds / 3600 x GPU_USD_PER_HOUR[gpu] when the summary
    names the GPU, with ``cost_basis`` saying which price and when it was read.
    """
    return _client_of(run_id, api_key).request("GET", f"/runs/{_id_of(run_id, 'run_', 'run_id')}")


def resume(run: Any, api_key: str | None = None) -> TrainingRun:
    """Continue a stopped, failed or crashed hosted run from its last checkpoint; returns its handle, running.

    The platform starts a new job of the same run from the checkpoint its interrupted job saved
    (every ``save_steps``): the trainer's weights, optimizer, scheduler and data position come back, the
    held-out "before" is kept, and no point is stored twice. Raises ``PlatformError`` (409) saying why when
    there is nothing to resume: the run is done or still running, or it saved no checkpoint.

        run = wai.resume("run_0123abcd...")
        run.wait()               # "done"
    """
    run_id = _id_of(run, "run_", "run")
    client = _client_of(run, api_key)
    answer = client.request("POST", f"/runs/{run_id}/resume")
    return TrainingRun(answer["run"], client)


def list_runs(
    status: str | None = None,
    dataset: Any = None,
    name: str | None = None,
    limit: int | None = None,
    api_key: str | None = None,
) -> list[dict[str, Any]]:
    """The account's runs, newest first, filtered by status, dataset and name (the platform's limit when None)."""
    if status is not None and status not in RUN_STATUSES:
        raise ValueError(f"status={status!r} is not a run status; accepted: {', '.join(map(repr, RUN_STATUSES))}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit={limit!r} is not a positive int; pass e.g. limit=20, or None for the default")
    params = {
        "status": status,
        "dataset": None if dataset is None else _id_of(dataset, "ds_", "dataset"),
        "name": name,
        "limit": limit,
    }
    return get_client(api_key=api_key).request("GET", "/runs", params=params)["runs"]


def delete_run(run_id: Any, api_key: str | None = None) -> dict[str, Any]:
    """Delete a run and its points. Returns ``{"id": ..., "deleted": True}``."""
    return _client_of(run_id, api_key).request("DELETE", f"/runs/{_id_of(run_id, 'run_', 'run_id')}")


def attach_holdout(
    run_id: Any, before: float, after: float, metric: str = "pass_rate", api_key: str | None = None
) -> dict[str, Any]:
    """Put the held-out before/after on a run that has already finished; returns the updated record.

    Pass rates are 0 to 1; ``metric="loss"`` sends held-out loss (lower is
    better). The status is left as it is; sending again is a correction.

        wai.attach_holdout("run_...", before=0.42, after=0.58)
    """
    fields = holdout_fields(before, after, metric)
    if isinstance(run_id, TrainingRun):
        run_id.summary.update(fields)
    return _client_of(run_id, api_key).request(
        "PATCH", f"/runs/{_id_of(run_id, 'run_', 'run_id')}", json={"summary": fields}
    )


def attach_delta(
    run_id: Any, before: Any, after: Any, by: str | None = None, proxy: str | None = None, api_key: str | None = None
) -> DeltaReport:
    """Compute ``delta_report(before, after, by=, proxy=)`` and put it on a finished run's page.

    The summary is sent again with ``delta`` added and the status unchanged.
    Returns the report.
    """
    from whileai.domain.report import delta_report

    identifier = _id_of(run_id, "run_", "run_id")
    report = delta_report(before, after, by=by, proxy=proxy)
    fields = {"delta": jsonable(report, "delta_report(...)")}
    if isinstance(run_id, TrainingRun):
        run_id.summary.update(fields)
    _client_of(run_id, api_key).request("PATCH", f"/runs/{identifier}", json={"summary": fields})
    return report


# resolve_spec: the one resolution of what was given into the spec that runs (the runner's validate shows it)
from whileai.simulations._hosting import train, train_spec  # noqa: E402,F401
from whileai.simulations._resolve import FROM_DATA, DataFacts, Resolved, data_facts, resolve_spec  # noqa: E402,F401
from whileai.simulations.serving import chat_completion, delete_model, models, reward_model, serve, unserve  # noqa: E402,F401
