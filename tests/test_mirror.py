"""``report_to``: a run mirrored to W&B, MLflow and trackio, each in its offline store, read back and compared.

One real SFT job on the kit's tiny model (a worker process, two steps) mirrors to all three; each store is
read back with the tracker's own reader where it has one (MLflow's ``MlflowClient``, trackio's
``SQLiteStorage``) and, for W&B, whose 0.2x+ SDK has no public reader of an offline run, the records of the
offline run file decoded with W&B's own protobuf messages. Each must hold the points the platform stores
(same names, steps and values), the resolved spec as its config, and the held-out result and status.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import time
import warnings
from pathlib import Path

import pytest

import whileai.simulations as wai
from whileai.core.spec import SFTSpec

TRACKERS = ["wandb", "mlflow", "trackio"]


def _wandb_records(path: Path):
    """The records of a W&B run file (``run-<id>.wandb``): LevelDB-log framing, one protobuf ``Record`` each."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B", path
    pos, pending, block = 7, b"", 32768
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind == 2:
            pending = chunk
        elif kind == 3:
            pending += chunk
        elif kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(pending + chunk if kind == 4 else chunk)
            pending = b""
            yield record
        else:
            break


def _key(item) -> str:
    return item.key or "/".join(item.nested_key)


def _wandb_run(folder: Path, run_id: str) -> dict:
    """config, history rows, summary and exit code of the offline W&B run ``run_id`` in its run folder."""
    path = folder / f"run-{run_id}.wandb"
    out: dict = {"config": {}, "history": [], "summary": {}, "exit": None}
    for record in _wandb_records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            out["config"].update({_key(i): json.loads(i.value_json) for i in record.run.config.update})
        elif kind == "config":
            out["config"].update({_key(i): json.loads(i.value_json) for i in record.config.update})
        elif kind == "history":
            out["history"].append({_key(i): json.loads(i.value_json) for i in record.history.item})
        elif kind == "summary":
            out["summary"].update({_key(i): json.loads(i.value_json) for i in record.summary.update})
        elif kind == "exit":
            out["exit"] = record.exit.exit_code
    return out


def _trackio_store(mirrored, monkeypatch):
    """trackio's reader, pointed at the folder the worker wrote to (the run's summary says which).

    trackio fixes its folder when first imported (``trackio.utils.TRACKIO_DIR``), so the reader is told explicitly."""
    from trackio import sqlite_storage

    monkeypatch.setattr(sqlite_storage, "TRACKIO_DIR", Path(mirrored["where"]["trackio"]))
    return sqlite_storage.SQLiteStorage


def _points(triples) -> list[tuple[str, int, float]]:
    return sorted((name, int(step), round(float(value), 12)) for name, step, value in triples)


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory, push_sample):
    """One SFT job with report_to all three trackers (offline stores in the account's folder under the data root;
    WANDB_DIR and TRACKIO_DIR are set to another folder, which the mirror does not use)."""
    from whileai.kit._base import tiny_model_dir

    elsewhere = tmp_path_factory.mktemp("not-the-mirrors")
    with pytest.MonkeyPatch.context() as mp:
        for name in ("WANDB_DISABLED", "WANDB_MODE", "WANDB_API_KEY", "MLFLOW_TRACKING_URI", "TRACKIO_SPACE_ID"):
            mp.delenv(name, raising=False)  # conftest disables W&B for every other test
        mp.setenv("WANDB_DIR", str(elsewhere / "wandb"))
        mp.setenv("WANDB_SILENT", "true")
        mp.setenv("TRACKIO_DIR", str(elsewhere / "trackio"))
        sets = push_sample("mirror", tasks=24)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = wai.train(sets["passes"], method="sft", steps=2, holdout=sets["holdout"],
                            base_model=str(tiny_model_dir()), wait=True,
                            config={"report_to": "wandb,mlflow,trackio", "holdout_rows": 4})
        record = wai.get_run(run.id)
        yield {"run": run, "record": record, "where": record["summary"]["mirrored_to"], "elsewhere": elsewhere}


def test_a_mirrored_run_is_done_and_says_where_it_went(mirrored):
    record = mirrored["record"]
    assert record["status"] == "done", record.get("error")
    assert record["config"]["report_to"] == TRACKERS  # the comma string, recorded as its list
    state = record["summary"]["mirrors"]
    assert sorted(state) == sorted(TRACKERS)
    for name, entry in state.items():
        assert entry["status"] == "closed" and entry["errors"] == 0 and entry["points"] > 0, (name, entry)
    from whileai.runner.runs import show_lines

    [line] = [line for line in show_lines(record) if line.startswith("mirrored")]  # python -m whileai show
    assert all(f"{name} (closed, {state[name]['points']} points)" in line for name in TRACKERS), line
    # every copy is in the account's folder under the data root, not where WANDB_DIR and TRACKIO_DIR point
    from whileai.core.paths import data_root

    where = mirrored["where"]
    assert sorted(where) == sorted(TRACKERS)
    assert all(Path(str(v).removeprefix("sqlite:///")).is_relative_to(data_root() / "mirrors") for v in where.values())
    assert not any(mirrored["elsewhere"].iterdir())


def test_each_store_holds_the_platforms_points(mirrored, monkeypatch):
    from mlflow.tracking import MlflowClient

    run_id, record = mirrored["run"].id, mirrored["record"]
    platform = _points((name, p["step"], v) for p in record["series"] for name, v in p["metrics"].items())
    names = {name for name, _, _ in platform}
    assert {"loss", "learning_rate"} <= names and len(platform) > 4

    w = _wandb_run(Path(mirrored["where"]["wandb"]), run_id)
    got = _points((k, row["whileai/step"], v) for row in w["history"] for k, v in row.items() if k in names)
    assert got == platform, "W&B"

    client = MlflowClient(tracking_uri=mirrored["where"]["mlflow"])
    [found] = client.search_runs([client.get_experiment_by_name("whileai").experiment_id],
                                 filter_string=f"tags.`whileai.run_id` = '{run_id}'")
    got = _points((n, m.step, m.value) for n in names for m in client.get_metric_history(found.info.run_id, n))
    assert got == platform, "MLflow"

    logs = _trackio_store(mirrored, monkeypatch).get_logs("whileai", run_id)
    got = _points((k, row["step"], v) for row in logs for k, v in row.items() if k in names)
    assert got == platform, "trackio"


def test_each_store_holds_the_spec_and_the_held_out_result(mirrored, monkeypatch):
    from mlflow.tracking import MlflowClient

    run_id, record = mirrored["run"].id, mirrored["record"]
    summary, spec = record["summary"], SFTSpec.model_validate({k: v for k, v in record["config"].items()
                                                              if k in SFTSpec.model_fields})
    stats = summary["training"]["stats"]
    knobs = spec.model_dump(mode="json", include=set(spec.knobs()))

    w = _wandb_run(Path(mirrored["where"]["wandb"]), run_id)
    assert {k: w["config"][k] for k in knobs} == knobs
    assert w["config"]["whileai_run_id"] == run_id and w["config"]["whileai_url"].endswith(f"/runs/{run_id}")
    assert w["summary"]["whileai/holdout_before"] == summary["holdout_before"]
    assert w["summary"]["whileai/holdout_after"] == summary["holdout_after"]
    assert w["summary"]["whileai/holdout_n"] == stats["n"]
    assert w["summary"]["whileai/holdout_after_ci95_low"] == stats["after"]["ci95"][0]
    assert w["summary"]["whileai/holdout_p"] == stats["paired"]["p"]
    assert w["summary"]["whileai/status"] == "done" and w["exit"] == 0

    client = MlflowClient(tracking_uri=mirrored["where"]["mlflow"])
    [found] = client.search_runs([client.get_experiment_by_name("whileai").experiment_id],
                                 filter_string=f"tags.`whileai.run_id` = '{run_id}'")
    params = found.data.params
    for key, value in knobs.items():
        assert params[key] == (value if isinstance(value, str) else json.dumps(value)), key
    assert found.info.status == "FINISHED" and found.data.tags["whileai/status"] == "done"
    assert found.data.metrics["whileai/holdout_after"] == summary["holdout_after"]
    assert found.data.metrics["whileai/holdout_n"] == stats["n"]

    store = _trackio_store(mirrored, monkeypatch)
    config = store.get_run_config("whileai", run_id)
    assert {k: config[k] for k in knobs} == knobs
    last = [row for row in store.get_logs("whileai", run_id) if "whileai/holdout_after" in row]
    assert last and last[-1]["whileai/holdout_after"] == summary["holdout_after"]
    [alert] = store.get_alerts("whileai", run_name=run_id, run_id=None)
    assert alert["title"] == "whileai run done" and f"run_id={run_id}" in alert["text"]


def test_a_missing_package_is_refused_before_training_naming_the_extra(push_sample, monkeypatch, tmp_path):
    from whileai.core.errors import TrainingConfigError
    from whileai.jobs.body import OtherRankRun, run_job
    from whileai.kit._base import tiny_model_dir

    monkeypatch.setitem(sys.modules, "trackio", None)  # import trackio now raises ImportError: not installed
    sets = push_sample("mirror-missing", tasks=4)
    before = len(wai.list_runs())
    with pytest.raises(TrainingConfigError) as caught:
        wai.train(sets["passes"], method="sft", steps=1, base_model=str(tiny_model_dir()),
                  config={"report_to": ["mlflow", "trackio"]})
    assert "pip install 'whileai[mirror]'" in str(caught.value) and "trackio" in str(caught.value)
    assert len(wai.list_runs()) == before  # refused at submit: no run, no job
    # the job refuses too (a job started elsewhere, or a Modal image without the package), before loading a model
    run = wai.training_run(name="mirror-refused")
    spec = SFTSpec(learning_rate=1e-4, base_model="/no/such/base", report_to=["trackio"], steps=1)
    with pytest.raises(TrainingConfigError, match=r"whileai\[mirror\]"):
        run_job(spec, [], None, run, tmp_path / "adapter", tmp_path / "job")
    run.fail("refused")
    # a rank past the first never mirrors (rank 0 does, once): it goes on to load the model, which is not there
    with pytest.raises(Exception) as other:
        run_job(spec, [], None, OtherRankRun(run.id), tmp_path / "adapter", tmp_path / "job")
    assert "whileai[mirror]" not in str(other.value) and "/no/such/base" in str(other.value)


def test_a_mirror_failing_mid_run_leaves_the_run_done_with_a_warning(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    from whileai.core.errors import MirrorWarning
    from whileai.domain.tracking.mirror import open_mirrors

    from whileai.domain.tracking.mirror._offline import QUIET_ENV, WANDB_LOCAL_ENV

    for name, value in {**QUIET_ENV, **WANDB_LOCAL_ENV}.items():  # the mirror sets them here: restored after
        monkeypatch.setenv(name, os.environ.get(name) or value)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = wai.training_run(name="mirror-breaks")
    mirrors = open_mirrors(["mlflow"], run_id=run.id, name=run.name, url=run.url, config={"lr": 1e-3},
                           note=lambda state: run.note(mirrors=state))
    run.mirror_to(mirrors)
    for step in range(3):
        run.log(step=step, loss=1.0 / (step + 1))
    [sink] = mirrors.sinks
    deadline = time.monotonic() + 60
    while mirrors.state["mlflow"]["points"] < 3 and time.monotonic() < deadline:  # the mirror thread took them
        time.sleep(0.05)
    assert mirrors.state["mlflow"]["points"] == 3
    # the MLflow run is deleted under the mirror: every later send raises inside MLflow (a real failure)
    MlflowClient().delete_run(sink.run_id)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for step in range(3, 6):
            run.log(step=step, loss=1.0 / (step + 1))
        run.holdout(0.25, 0.5)
        assert run.finish("done")
    assert any(issubclass(w.category, MirrorWarning) and "mlflow failed" in str(w.message) for w in seen)
    record = wai.get_run(run.id)
    assert record["status"] == "done"
    assert [p["step"] for p in record["series"]] == list(range(6))  # every point reached the platform
    entry = record["summary"]["mirrors"]["mlflow"]
    assert entry["errors"] >= 1 and "active" in entry["last_error"] and entry["status"] == "failed to close"


def test_report_to_from_a_recipe_or_the_command_line_is_the_list_that_runs():
    from whileai.runner.schema import recipe_spec
    from whileai.runner.stages import plan_stages, stage_inputs
    from whileai.simulations.training import train_spec

    from test_runner_validate import compose

    for override, wanted in (("report_to=[mlflow,trackio]", ["mlflow", "trackio"]), ("report_to=mlflow", ["mlflow"]),
                             ("report_to='wandb, mlflow'", ["wandb", "mlflow"])):
        plain, problems = compose(["recipe=sft_tooluse", override])
        assert not problems and plain["report_to"] == wanted, (override, problems)
        [stage] = plan_stages(recipe_spec(plain))
        kwargs, config = stage_inputs(stage, recipe_spec(plain))  # what the pipeline passes wai.train
        resolved = train_spec("sft", kwargs, config, base_model=None, target="local", holdout=None)
        assert resolved.spec is not None and resolved.spec.report_to == wanted, override
    assert compose(["recipe=sft_tooluse"])[0]["report_to"] is None  # none unless asked: the spec's default, []
    assert train_spec("sft", {}, {}, base_model=None, target="local", holdout=None).spec.report_to == []
    _, problems = compose(["recipe=sft_tooluse", "report_to=[tensorboard,mlflow]"])
    assert [p.message for p in problems] == [
        "report_to=['tensorboard', 'mlflow']: 'tensorboard' not accepted for sft; pass a list of 'wandb', 'mlflow', "
        "'trackio' ([wandb, mlflow] or 'wandb,mlflow'), or leave it null for none"]
