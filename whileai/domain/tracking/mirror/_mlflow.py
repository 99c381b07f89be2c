"""The MLflow mirror: one MLflow run per whileai run, in MLFLOW_TRACKING_URI or the account's SQLite store.

The account's store is ``mlflow.db`` in its mirrors folder, with the experiment's artifacts beside it
(``mlflow-artifacts``) rather than MLflow's default ``./mlruns`` in whatever folder the job runs in.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from whileai.domain import defaults

#: whileai's final status -> MLflow's run status
_STATUS = {"done": "FINISHED", "failed": "FAILED", "stopped": "KILLED"}
#: params per log_batch call (MLflow's limit is 100)
_PARAMS_PER_BATCH = 100


#: the account's MLflow store and its artifacts, in the account's mirrors folder
STORE_FILE = "mlflow.db"
ARTIFACTS = "mlflow-artifacts"


def store_uri(folder: Path) -> str:
    """``sqlite:///<folder>/mlflow.db``: MLflow's file store is in maintenance mode and refuses to open without
    MLFLOW_ALLOW_FILE_STORE; SQLite is what MLflow recommends."""
    return f"sqlite:///{folder / STORE_FILE}"


def tracking_uri(folder: Path) -> str:
    """The user's MLFLOW_TRACKING_URI (a tracker the user named), else the account's store in ``folder``."""
    return os.environ.get("MLFLOW_TRACKING_URI") or store_uri(folder)


def flat_params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """``config`` as MLflow params: nested keys joined with dots, values as text cut at MIRROR_PARAM_MAX_CHARS."""
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flat_params(value, f"{name}."))
            continue
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        cap = defaults.MIRROR_PARAM_MAX_CHARS
        out[name] = text if len(text) <= cap else text[: cap - 3] + "..."
    return out


class MlflowSink:
    name = "mlflow"

    def __init__(self, client: Any, run_id: str, where: str, location: str):
        self.client = client
        self.run_id = run_id
        self.where = where
        self.location = location
        self.last_step = 0

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.last_step = max(self.last_step, step)
        self.client.log_batch(self.run_id, metrics=[Metric(k, float(v), now, step) for k, v in metrics.items()])

    def finish(self, status: str, final: Mapping[str, Any]) -> None:
        from mlflow.entities import Metric, RunTag

        now = int(time.time() * 1000)
        numbers = [Metric(k, float(v), now, self.last_step) for k, v in final.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)]
        tags = [RunTag(k, str(v)) for k, v in final.items() if isinstance(v, str)]
        self.client.log_batch(self.run_id, metrics=numbers, tags=tags)
        self.client.set_terminated(self.run_id, _STATUS.get(status, "FAILED"))


def open_mlflow(*, run_id: str, name: str, url: str, config: Mapping[str, Any], folder: Path) -> MlflowSink:
    from mlflow.entities import Param
    from mlflow.tracking import MlflowClient

    uri = tracking_uri(folder)
    ours = uri == store_uri(folder)
    client = MlflowClient(tracking_uri=uri)
    experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME") or defaults.MIRROR_PROJECT
    found = client.get_experiment_by_name(experiment)
    if found is None:
        try:
            experiment_id = client.create_experiment(
                experiment, artifact_location=(folder / ARTIFACTS).as_uri() if ours else None)
        except Exception:  # noqa: BLE001 - another job created it first: read it back
            found = client.get_experiment_by_name(experiment)
            if found is None:
                raise
            experiment_id = found.experiment_id
    else:
        experiment_id = found.experiment_id
    run = client.create_run(experiment_id, run_name=name, tags={"whileai.run_id": run_id, "whileai.url": url})
    params = [Param(k, v) for k, v in flat_params(config).items()]
    for start in range(0, len(params), _PARAMS_PER_BATCH):
        client.log_batch(run.info.run_id, params=params[start:start + _PARAMS_PER_BATCH])
    return MlflowSink(client, run.info.run_id, f"{uri} (experiment {experiment}, run {run.info.run_id})", uri)


def forget_mlflow(folder: Path, run_ids: list[str]) -> None:
    """Delete for good (rows and artifacts) the MLflow runs tagged with ``run_ids`` in the account's store.

    MLflow's own delete only marks a run deleted; ``mlflow gc`` removes its rows with the store's hard delete,
    which is what runs here. A store the user named (MLFLOW_TRACKING_URI) is theirs and is left alone.
    """
    if not (folder / STORE_FILE).is_file() or not run_ids:
        return
    from mlflow.entities import ViewType
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from mlflow.tracking import MlflowClient

    uri = store_uri(folder)
    client = MlflowClient(tracking_uri=uri)
    experiments = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ALL)]
    found = [run for run_id in run_ids if experiments
             for run in client.search_runs(experiments, filter_string=f"tags.`whileai.run_id` = '{_quoted(run_id)}'",
                                           run_view_type=ViewType.ALL)]
    store = SqlAlchemyStore(uri, (folder / ARTIFACTS).as_uri())
    try:
        for run in found:
            store._hard_delete_run(run.info.run_id)
            artifacts = _local_path(run.info.artifact_uri)
            if artifacts is not None and folder in artifacts.parents:
                shutil.rmtree(artifacts, ignore_errors=True)
    finally:
        store.engine.dispose()


def _quoted(text: str) -> str:
    return text.replace("\\", "").replace("'", "")


def _local_path(uri: str | None) -> Path | None:
    if not uri or not uri.startswith("file://"):
        return None
    from urllib.parse import unquote, urlparse

    return Path(unquote(urlparse(uri).path))
