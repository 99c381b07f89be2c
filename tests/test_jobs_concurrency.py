"""Settling jobs under concurrent readers: a Modal job's progress is replayed exactly once however many
readers pull at the same time, on SQLite and PostgreSQL (the lease lives in the store)."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from test_store import postgres_url, store  # noqa: F401  (fixtures: SQLite, and PostgreSQL when reachable)

from whileai.jobs import modal_app
from whileai.platform.launcher import modal_backend, jobs as launcher_jobs


class SlowProgress:
    """A ModalBackend over a dict of recorded requests whose pull is slow, so readers overlap in it."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.entries: list[dict] = []
        self.served: Counter = Counter()  # entry index -> times a pull answered it
        self.finished = False
        self.lock = threading.Lock()

    def record(self, n: int) -> None:
        for _ in range(n):
            i = len(self.entries)
            if i % 2:
                self.entries.append({"method": "PATCH", "path": f"/runs/{self.run_id}", "json": {"summary": {f"k{i}": i}}})
            else:
                self.entries.append({"method": "POST", "path": f"/runs/{self.run_id}/points",
                                     "json": {"batch_id": f"b{i}", "points": [{"step": i, "metrics": {"loss": 1.0}}]}})

    def spawn(self, payload, gpu):  # pragma: no cover - not used here
        raise AssertionError

    def poll(self, call_id: str):
        return {"status": "done", "error": None, "adapter": None} if self.finished else None

    def pull(self, job_id: str, start: int) -> list[dict]:
        time.sleep(0.05)  # a network round trip: wide enough for every reader to be inside at once
        with self.lock:
            answer = self.entries[start:]
            for i in range(start, start + len(answer)):
                self.served[i] += 1
        return answer

    def fetch_adapter(self, remote, dest):  # pragma: no cover
        raise AssertionError


def _read_from_threads(store, acct: str, job_id: str, readers: int = 8) -> None:  # noqa: F811 (a store, not the fixture)
    barrier = threading.Barrier(readers)
    errors: list[BaseException] = []

    def read() -> None:
        try:
            barrier.wait()
            launcher_jobs.reconcile(store, acct, store.get_job(acct, job_id))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=read) for _ in range(readers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors


def test_the_modal_progress_pull_is_exactly_once_under_concurrent_readers(store, monkeypatch):  # noqa: F811
    acct = store.create_account("a")[0]
    run = store.create_run(acct, name="modal")
    job = store.create_job(acct, run_id=run["id"], kind="sft", target="modal", status="running", call_id="fc-0",
                           spec={"target": "modal"}, platform={"pulled": 0})
    backend = SlowProgress(run["id"])
    monkeypatch.setattr(modal_backend, "_BACKEND", backend)

    backend.record(6)
    _read_from_threads(store, acct, job["id"])
    _read_from_threads(store, acct, job["id"])  # nothing new: nobody replays the first six again
    backend.record(5)
    _read_from_threads(store, acct, job["id"])
    backend.finished = True
    _read_from_threads(store, acct, job["id"])

    assert all(count == 1 for count in backend.served.values()), backend.served
    assert sorted(backend.served) == list(range(11)), "every entry replayed, each once"
    settled = store.get_job(acct, job["id"])
    assert settled["platform"]["pulled"] == 11 and settled["status"] == "done"
    record = store.get_run(acct, run["id"])
    assert [p["step"] for p in record["series"]] == [0, 2, 4, 6, 8, 10]
    assert record["summary"] == {f"k{i}": i for i in (1, 3, 5, 7, 9)}
    assert modal_app  # the real app module names the progress keys the real backend reads


def test_a_lease_is_one_holders_until_released_or_expired(store):  # noqa: F811
    acct = store.create_account("a")[0]
    job = store.create_job(acct, kind="sft")
    assert store.lease_job(acct, job["id"], "one", 60)
    assert not store.lease_job(acct, job["id"], "two", 60)
    store.release_job(job["id"], "two")  # not its lease: nothing happens
    assert not store.lease_job(acct, job["id"], "two", 60)
    store.release_job(job["id"], "one")
    assert store.lease_job(acct, job["id"], "two", 0.01)
    time.sleep(0.05)
    assert store.lease_job(acct, job["id"], "three", 60), "an expired lease is taken over"
    other = store.create_account("b")[0]
    with pytest.raises(LookupError):
        store.lease_job(other, job["id"], "four", 60)


def test_job_routes_are_installed_once():
    from whileai.platform.api import create_app
    from whileai.platform.launcher.routes import _ReconcileOnRead

    from test_trust import route_table

    app = create_app()
    seen = Counter(route_table(app))
    assert seen[("POST", "/api/v1/jobs/launch")] == 1 and seen[("POST", "/api/v1/jobs/{job_id}/end")] == 1
    assert [key for key, n in seen.items() if n > 1] == []
    assert sum(1 for m in app.user_middleware if m.cls is _ReconcileOnRead) == 1


def test_identical_training_submits_at_once_make_one_run_and_other_configs_their_own(store):  # noqa: F811
    acct = store.create_account("a")[0]
    submits = [{"seed": 0}] * 6 + [{"seed": 1}] * 6  # a double submit of two sweep points, all at one instant
    barrier = threading.Barrier(len(submits))
    answers: list[tuple[dict, dict, bool]] = []
    errors: list[BaseException] = []

    def submit(config: dict) -> None:
        try:
            barrier.wait()
            record, created = store.create_run_once(acct, dataset="ds_1", kind="train", config=config)
            answers.append((config, record, created))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=submit, args=(c,)) for c in submits]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    by_seed = {seed: {r["id"] for c, r, _ in answers if c["seed"] == seed} for seed in (0, 1)}
    assert all(len(ids) == 1 for ids in by_seed.values()) and by_seed[0] != by_seed[1]
    assert sum(created for *_, created in answers) == 2
    assert len(store.list_runs(acct, dataset="ds_1")) == 2
    store.update_run(acct, next(iter(by_seed[0])), {"status": "done"})
    again, created = store.create_run_once(acct, dataset="ds_1", kind="train", config={"seed": 0})
    assert created and again["id"] not in by_seed[0]  # a finished run is not an answer: the same config trains anew
