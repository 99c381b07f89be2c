"""Shared by the tests that start real hosted jobs: a quiet training call, the job of a run, waiting for a condition."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any


def train(sets: dict, method: str, **kwargs: Any) -> Any:
    """``wai.train`` on ``sets`` (conftest's ``tiny_sample``): the passes for SFT, else the train side; held out on
    the holdout side; the library's warnings (about the tiny model's settings) silenced."""
    import whileai.simulations as wai

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = sets["passes"] if method == "sft" else sets["train"]
        return wai.train(data, method=method, base_model=sets["base"], holdout=sets["holdout"], **kwargs)


def warm_ready(seconds: float = 240) -> int:
    """The pid of the data root's warm process once it is ready, started as the command line starts one (with its
    WARM_PRELOAD); its imports are slow on a loaded machine (benchmarks/job_start.py's warm_ready_s), so the
    default wait is generous."""
    from whileai.__main__ import WARM_PRELOAD
    from whileai.platform.launcher import _warm

    _warm.preload(WARM_PRELOAD)
    pid = _warm.wait_ready(seconds)
    assert pid is not None, "the warm worker did not become ready"
    return pid


def job_of(run_id: str) -> dict:
    """The (first) job record of hosted run ``run_id``, read through the platform."""
    from whileai.domain.client import get_client

    return get_client().request("GET", "/jobs", params={"run_id": run_id})["jobs"][0]


def wait_for(predicate: Callable[[], object], timeout: float = 60.0, what: str = "condition",
             every: float = 0.2) -> None:
    """Poll ``predicate`` until it is true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def hosted_run_with_a_job(name: str, run: dict | None = None, **job: Any) -> tuple[dict, dict]:
    """A hosted run made through the platform and a job of it written straight into the store, as a worker
    elsewhere (or one that failed before this test) leaves it: ``(the run's record, the job's row)``. ``run``:
    fields the run is then updated with."""
    from whileai.domain.client import get_client
    from _stores import data_root_store

    client = get_client()
    record = client.request("POST", "/runs", json={"name": name, "kind": "hosted"})
    account = client.request("GET", "/me")["account_id"]
    with data_root_store() as store:
        made = store.create_job(account, run_id=record["id"], **job)
        if run:
            store.update_run(account, record["id"], run)
    return record, made
