"""The MLflow mirror: one MLflow run per whileai run, in MLFLOW_TRACKING_URI or a SQLite file under the data root."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any

from whileai.core.paths import data_root

from .. import defaults

#: whileai's final status -> MLflow's run status
_STATUS = {"done": "FINISHED", "failed": "FAILED", "stopped": "KILLED"}
#: params per log_batch call (MLflow's limit is 100)
_PARAMS_PER_BATCH = 100


def tracking_uri() -> str:
    """The user's MLFLOW_TRACKING_URI, else ``sqlite:///<data root>/mirrors/mlflow.db`` (MLflow's file store is in
    maintenance mode and refuses to open without MLFLOW_ALLOW_FILE_STORE; SQLite is what MLflow recommends)."""
    chosen = os.environ.get("MLFLOW_TRACKING_URI")
    if chosen:
        return chosen
    folder = data_root() / "mirrors"
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'mlflow.db'}"


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

    def __init__(self, client: Any, run_id: str, where: str):
        self.client = client
        self.run_id = run_id
        self.where = where
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


def open_mlflow(*, run_id: str, name: str, url: str, config: Mapping[str, Any]) -> MlflowSink:
    from mlflow.entities import Param
    from mlflow.tracking import MlflowClient

    uri = tracking_uri()
    client = MlflowClient(tracking_uri=uri)
    experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME") or defaults.MIRROR_PROJECT
    found = client.get_experiment_by_name(experiment)
    if found is None:
        try:
            experiment_id = client.create_experiment(experiment)
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
    return MlflowSink(client, run.info.run_id, f"{uri} (experiment {experiment}, run {run.info.run_id})")
