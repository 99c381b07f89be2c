"""A job's row is typed: the run's spec as its own model and the platform's fields as ``JobPlatform``.

The row goes through the store and comes back as the same models; what the job reads of it (the judges the launch
resolved, where a ``python:`` reward is imported from) it reads as models on every target (``run_job`` is handed
them by the worker and by the Modal payload); a malformed entry of the platform's is refused naming what is wrong
and the fix. A store whose rows were written before the split (the platform's keys inside the spec) is upgraded
by revision 0006, which moves them out, so its runs' rows still read.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import sqlalchemy as sa

from whileai.core.jobrow import JobPlatform, JobRow, ResolvedJudge, platform_of, read_job_row
from whileai.core.spec import GRPOSpec, RunSpec, read_spec, spec_json
from whileai.kit import defaults as kit_defaults
from whileai.platform.store import InvalidError, Store, migrate

KIT = kit_defaults.KIT_BASE_NAME
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def _judge(run_id: str = "run_00000000000000aa", **changes: Any) -> ResolvedJudge:
    return ResolvedJudge(**{"run_id": run_id, "adapter": f"/data/adapters/{run_id}", "base_model": KIT,
                            "threshold": 0.25, "span": "first_action", **changes})


def _grpo() -> RunSpec:
    """A GRPO spec read from its JSON, as the launch route reads one: a reward model and a gold judge named."""
    return read_spec({"method": "grpo", "base_model": KIT, "dataset": "ds_00000000000000aa", "reward": ["rm"],
                      "reward_model": "run_00000000000000bb", "gold_judge": "run_00000000000000aa"})


def _sft() -> RunSpec:
    return read_spec({"method": "sft", "base_model": KIT, "dataset": "ds_00000000000000aa"})


def _platform() -> JobPlatform:
    return JobPlatform(host="here", launched_at=1.5, pid_started="12345", gold=_judge(),
                       reward_rm=_judge("run_00000000000000bb", span="conversation"), reward_path="/home/me/project")


@pytest.fixture
def store(tmp_path):
    opened = Store(f"sqlite:///{tmp_path / 'rows.db'}")
    yield opened
    opened.close()


# --------------------------------------------------------------------------- through the store


def test_a_job_row_round_trips_through_the_store_as_its_models(store):
    acct, _ = store.create_account("a")
    run = store.create_run(acct, name="grpo")
    spec, platform = _grpo(), _platform()
    made = store.create_job(acct, run_id=run["id"], kind="grpo", target="local", spec=spec, platform=platform)
    record = store.get_job(acct, made["id"])
    assert record["spec"] == spec_json(spec) and "gold" not in record["spec"]  # the spec alone, as its own JSON
    row = read_job_row(record)
    assert isinstance(row.spec, GRPOSpec) and row.spec == spec
    assert row.platform == platform and isinstance(row.platform.gold, ResolvedJudge)
    assert (row.id, row.run_id, row.kind, row.target) == (made["id"], run["id"], "grpo", "local")
    assert JobRow.model_validate(json.loads(row.model_dump_json())) == row  # its JSON reads back as the same
    # an update replaces the platform's fields as a whole, typed again
    moved = platform.model_copy(update={"pulled": 3})
    assert platform_of(store.update_job(acct, made["id"], {"platform": moved})) == moved
    assert store.list_jobs(acct, run_id=run["id"])[0]["platform"]["pulled"] == 3


def test_the_store_refuses_platform_fields_that_are_not_the_platforms(store):
    acct, _ = store.create_account("a")
    for fields, said in (({"gold": {"run_id": "run_1"}}, "gold.adapter"),
                         ({"host": "here", "colour": "red"}, "colour"),
                         ({"pulled": -1}, "pulled=-1"),
                         ({"gold": {**_judge().model_dump(), "threshold": "0.5"}}, "gold.threshold='0.5'"),
                         ({"reward_rm": {**_judge().model_dump(), "span": "everything"}}, "span='everything'")):
        with pytest.raises(InvalidError, match="not the platform's") as refused:
            store.create_job(acct, kind="sft", spec={"method": "sft"}, platform=fields)
        assert said in str(refused.value) and "launch the run again" in str(refused.value), str(refused.value)
    assert store.list_jobs(acct) == []


# --------------------------------------------------------------------------- what the job reads


def test_the_reader_refuses_a_malformed_platform_entry_naming_it_and_the_fix():
    record = {"id": "job_1", "run_id": "run_1", "spec": spec_json(_grpo()),
              "platform": {"gold": {**_judge().model_dump(), "threshold": float("nan")}}}
    with pytest.raises(ValueError, match="job job_1: its platform fields are not the platform's") as refused:
        read_job_row(record)
    assert "gold.threshold" in str(refused.value) and "python -m whileai resume" in str(refused.value)
    with pytest.raises(ValueError, match="not an object of host, launched_at"):
        read_job_row({**record, "platform": ["gold"]})
    with pytest.raises(ValueError, match="has no platform fields.*python -m whileai platform upgrade"):
        read_job_row({k: v for k, v in record.items() if k != "platform"})
    with pytest.raises(ValueError, match="not a run spec: gold is not a grpo setting"):  # the old, merged shape
        read_job_row({**record, "spec": {**record["spec"], "gold": _judge().model_dump()}, "platform": {}})


def test_the_job_reads_its_judges_and_reward_path_as_models(monkeypatch):
    """``run_job`` hands the loaders the row's platform fields; the judge loaded is what the launch resolved."""
    from whileai.domain.judges import reward_model
    from whileai.jobs import _loading, _rewards, body

    loaded: list[tuple[Any, ...]] = []

    class Judge:
        def __init__(self, adapter: str, base_model: str, threshold: float, run_id: str, span: str) -> None:
            self.which = (adapter, base_model, threshold, run_id, span)

        def load(self) -> Judge:
            loaded.append(self.which)
            return self

    monkeypatch.setattr(reward_model, "RewardModelJudge", Judge)
    monkeypatch.setattr(_loading, "_JUDGES", {})
    seen: dict[str, Any] = {}

    class Read(Exception):
        """What the job's first step read: the run ends here."""

    def first_step(spec: Any, run: Any) -> None:
        seen.update(gold=_loading.gold_judge(spec), reward=_loading.reward_model_judge(spec),
                    path=_rewards.reward_search_path(), platform=_loading.JOB_PLATFORM.get())
        raise Read

    monkeypatch.setattr(body, "_setup", first_step)
    platform = _platform()
    with pytest.raises(Read):
        body.run_job(spec_json(_grpo()), [], None, None, None, None, platform=platform)  # type: ignore[arg-type]
    assert seen["platform"] is platform and seen["path"] == "/home/me/project"
    assert seen["gold"].which == ("/data/adapters/run_00000000000000aa", KIT, 0.25, "run_00000000000000aa",
                                  "first_action")
    assert seen["reward"].which[3:] == ("run_00000000000000bb", "conversation")
    assert _loading.JOB_PLATFORM.get() is None, "the job's fields are its own: set only while it runs"
    for fields, said in ((JobPlatform(gold=_judge("run_00000000000000cc")), "was not resolved by the platform"),
                         (None, "runs no platform job")):
        with _loading.job_platform(fields), pytest.raises(ValueError, match=said):
            _loading.gold_judge(_grpo())
    assert _rewards.reward_search_path() is None and len(loaded) == 2


def test_a_modal_payload_carries_the_row_and_one_of_an_older_platform_is_refused():
    from whileai.jobs.modal_app import payload_row

    payload = {"job_id": "job_1", "spec": spec_json(_grpo()), "platform": {"gold": _judge().model_dump()},
               "run": {"id": "run_1"}, "rows": []}
    row = payload_row(payload)
    assert row.platform.gold == _judge() and row.spec == _grpo() and row.run_id == "run_1"
    by_hand = payload_row({k: v for k, v in payload.items() if k != "platform"})  # none given: no judges
    assert by_hand.platform == JobPlatform() and by_hand.spec == _grpo()
    older = {**payload, "spec": {**payload["spec"], "gold": payload["platform"]["gold"]}}
    with pytest.raises(ValueError, match=r"platform's fields inside its spec \(gold\).*modal deploy"):
        payload_row({k: v for k, v in older.items() if k != "platform"})


# --------------------------------------------------------------------------- rows of before the split


def _store_at_0005_with_an_old_row(url: str) -> str:
    """A store built by the chain up to 0005 holding a job row as the code of then wrote it; its id."""
    from alembic import command

    from whileai.platform.store._writers import mark_writers

    engine = sa.create_engine(url)
    mark_writers(engine, "0005_older_writers_refused")
    config = migrate.alembic_config()
    old = {**spec_json(_sft()), "host": "laptop",
           "launched_at": 1.5, "pid_started": "777", "pulled": 4, "reward_path": "/home/me",
           "gold": {"run_id": "run_00000000000000aa", "adapter": "/data/adapters/run_00000000000000aa",
                    "base_model": KIT, "threshold": 0.5},  # no span: a row of before the knob
           "key_hash": "ab" * 32, "log": "/data/jobs/job_00000000000000aa/worker.log", "pid": 777, "call_id": None}
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0005_older_writers_refused")
        conn.execute(sa.text("INSERT INTO accounts (id, name, created_at) VALUES ('acct_old', 'old', :t)"),
                     {"t": time.time()})
        conn.execute(sa.text("INSERT INTO jobs (id, account_id, status, pid, spec_json, created_at, updated_at) "
                             "VALUES ('job_00000000000000aa', 'acct_old', 'done', 777, :s, :t, :t)"),
                     {"s": json.dumps(old), "t": time.time()})
    engine.dispose()
    return "job_00000000000000aa"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_row_written_before_the_split_reads_as_models_after_the_upgrade(backend, tmp_path, pg_database):
    url = f"sqlite:///{tmp_path / 'old.db'}" if backend == "sqlite" else pg_database()
    job_id = _store_at_0005_with_an_old_row(url)
    store = Store(url)  # opening it upgrades it
    try:
        record = store.get_job("acct_old", job_id)
        assert record["spec"] == spec_json(_sft())
        row = read_job_row(record)
        assert row.spec == _sft()
        assert row.platform == JobPlatform(host="laptop", launched_at=1.5, pid_started="777", pulled=4,
                                           reward_path="/home/me", key_hash="ab" * 32, gold=ResolvedJudge(
                                               run_id="run_00000000000000aa", adapter="/data/adapters/run_00000000000000aa",
                                               base_model=KIT, threshold=0.5, span="conversation"))
        assert record["pid"] == 777  # the copies of columns and the log's path are gone from the row, not the columns
    finally:
        store.close()
