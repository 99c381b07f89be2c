"""Run tracking against the real embedded platform, with faults injected at the transport seam.

Every request goes through the real platform app over a real SQLite store under
the test's data root (docs/architecture.md, "The client seam"), so batch ids,
step advances and status checks are the platform's own. The tracker's client
sends through :class:`FaultyTransport`, an ``httpx`` transport wrapped around the
embedded one that can fail on demand: answer 500, time out, refuse the
connection, break outright, or store a batch and lose the reply. Assertions
read the platform through a second client without faults.
"""

from __future__ import annotations

import json
import math
import time
from decimal import Decimal

import httpx
import numpy as np
import pytest
import torch

from whileai.core.paths import data_root
from whileai.domain import client as _client, defaults
from whileai.domain.tracking import _flush, _spool, _tracker
from whileai.domain.client import Client
from whileai.simulations.training import attach_delta, attach_holdout
from whileai.domain.tracking import TrainingRun


class FaultyTransport(httpx.BaseTransport):
    """The embedded platform's transport, with failures on demand and a log of what was sent."""

    def __init__(self, inner: httpx.BaseTransport):
        self.inner = inner
        self.log: list[tuple[str, str, dict | None]] = []  # (method, path under /api/v1, body) of each request
        self.fail_next: list[str] = []  # "500", "timeout", "refused", "lost" (stored, then the reply lost)
        self.broken = False
        self.on_request = None  # called with (method, path) before the request goes on

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        content = request.read()
        path = request.url.path.removeprefix("/api/v1")
        self.log.append((request.method, path, json.loads(content) if content else None))
        if self.on_request is not None:
            self.on_request(request.method, path)
        if self.broken:
            raise RuntimeError("the sink is broken")
        mode = self.fail_next.pop(0) if self.fail_next else None
        if mode == "500":
            return httpx.Response(500, json={"error": {"message": "internal error", "type": "internal"}}, request=request)
        if mode == "timeout":
            raise httpx.ReadTimeout("no answer", request=request)
        if mode == "refused":
            raise httpx.ConnectError("connection refused", request=request)
        response = self.inner.handle_request(request)
        if mode == "lost":
            raise httpx.ReadTimeout("reply lost", request=request)
        return response


class Platform:
    """The embedded platform under the test's data root: a faulty client for the tracker, a clean one to look."""

    def __init__(self):
        self.app, self.key = _client._embedded_app(data_root())
        self.transport = FaultyTransport(_client._EmbeddedTransport(self.app))
        self.api = Client(_client.embedded_base_url(), self.key, transport=_client._EmbeddedTransport(self.app),
                          embedded=True)
        self._client = Client(_client.embedded_base_url(), self.key, transport=self.transport, embedded=True)

    # failure injection, passed through to the transport
    log = property(lambda self: self.transport.log)
    fail_next = property(lambda self: self.transport.fail_next,
                         lambda self, value: setattr(self.transport, "fail_next", value))
    broken = property(lambda self: self.transport.broken, lambda self, value: setattr(self.transport, "broken", value))

    def client(self) -> Client:
        return self._client

    def record(self, run_id: str) -> dict:
        return self.api.request("GET", f"/runs/{run_id}", params={"series": "false"})

    def patch(self, run_id: str, body: dict) -> dict:
        return self.api.request("PATCH", f"/runs/{run_id}", json=body)

    def steps(self, run_id: str) -> list:
        return [p["step"] for p in self.points(run_id)]

    def points(self, run_id: str) -> list[dict]:
        return self.api.request("GET", f"/runs/{run_id}/points")["points"]


@pytest.fixture
def fake(home, monkeypatch):
    # tests flush by hand unless they turn the background thread back on
    monkeypatch.setattr(_tracker._FLUSHER, "flush_due", lambda: None)
    monkeypatch.setattr(_flush, "_SPOOL_TRIED", {})
    before = set(_tracker._FLUSHER.trackers)
    yield Platform()
    with _tracker._FLUSHER.lock:  # runs of this test's data root are of no use to later tests
        _tracker._FLUSHER.trackers &= before


def _run(fake: Platform, **body) -> TrainingRun:
    client = fake.client()
    return TrainingRun(client.request("POST", "/runs", json=body), client)


# --------------------------------------------------------------------------- log


def test_log_keeps_finite_numbers_of_every_kind_and_counts_the_rest(fake):
    run = _run(fake)
    with pytest.warns(RuntimeWarning, match="not a finite number"):
        run.log(
            step=3, loss=0.5, tokens=7, flag=True, np32=np.float32(0.25), np64=np.int64(4),
            scalar=torch.tensor(1.5), one=torch.tensor([2.5]), dec=Decimal("0.125"),
            nan=math.nan, inf=float("inf"), ninf=np.float64("-inf"), text="0.5", none=None,
            many=torch.tensor([1.0, 2.0]), obj=object(), tnan=torch.tensor(float("nan")),
        )
    assert run.skipped == 8
    assert run.flush()
    (point,) = fake.points(run.id)
    assert point["step"] == 3
    assert point["metrics"] == {
        "loss": 0.5, "tokens": 7.0, "flag": 1.0, "np32": 0.25, "np64": 4.0,
        "scalar": 1.5, "one": 2.5, "dec": 0.125,
    }
    assert all(type(v) is float for v in point["metrics"].values())


def test_log_never_raises_even_on_odd_steps_and_huge_numbers(fake):
    run = _run(fake)
    with pytest.warns(RuntimeWarning):
        run.log(step="x", a=1.0)
        run.log(step=-4, a=2.0)
        run.log(step=np.int32(9), big=10**400, a=3.0)
        run.log(step=7.0, a=4.0)
    run.log(a=5.0)  # after step 7: step 8
    assert run.flush()
    assert fake.steps(run.id) == [0, 1, 9, 7, 8]
    assert [p["metrics"] for p in fake.points(run.id)][2] == {"a": 3.0}
    assert run.skipped == 3


def test_warnings_as_errors_do_not_stop_the_loop(fake):
    run = _run(fake)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run.log(step=0, loss=math.nan, ok=1.0)
    assert run.skipped == 1


def test_log_only_buffers(fake):
    run = _run(fake)
    before = len(fake.log)
    for i in range(100):
        run.log(step=i, loss=1.0 / (i + 1))
    assert len(fake.log) == before
    assert run.flush()
    assert fake.steps(run.id) == list(range(100))


def test_default_step_follows_the_last_one(fake):
    run = _run(fake)
    run.log(a=1)
    run.log(a=2)
    run.log(step=10, a=3)
    run.log(a=4)
    run.flush()
    assert fake.steps(run.id) == [0, 1, 10, 11]


# --------------------------------------------------------------------------- flush, failures, retries


def test_batches_have_ids_and_sizes(fake, monkeypatch):
    monkeypatch.setattr(defaults, "FLUSH_BATCH_POINTS", 10)
    run = _run(fake)
    for i in range(35):
        run.log(step=i, loss=float(i))
    assert run.flush()
    posts = [body for method, path, body in fake.log if path.endswith("/points")]
    assert [len(b["points"]) for b in posts] == [10, 10, 10, 5]
    assert len({b["batch_id"] for b in posts}) == 4


@pytest.mark.parametrize("mode", ["500", "timeout", "refused"])
def test_failed_sends_keep_points_count_errors_and_never_raise(fake, mode):
    run = _run(fake)
    for i in range(5):
        run.log(step=i, loss=float(i))
    fake.fail_next = [mode, mode]
    assert run.flush() is False
    assert run.flush() is False
    assert run.errors == 2
    for i in range(5, 8):
        run.log(step=i, loss=float(i))
    assert run.flush() is True
    assert fake.steps(run.id) == list(range(8))


def test_a_lost_reply_does_not_store_a_batch_twice(fake):
    run = _run(fake)
    for i in range(5):
        run.log(step=i, loss=float(i))
    fake.fail_next = ["lost"]
    assert run.flush() is False
    assert run.flush() is True
    assert fake.steps(run.id) == list(range(5))
    posts = [body["batch_id"] for method, path, body in fake.log if path.endswith("/points")]
    assert len(posts) == 2 and posts[0] == posts[1]


def test_a_broken_sink_never_interrupts_the_loop_and_the_next_point_lands(fake):
    run = _run(fake)
    fake.broken = True
    for i in range(20):
        run.log(step=i, loss=float(i))
        if i % 5 == 4:
            assert run.flush() is False
    assert run.errors == 4
    assert "RuntimeError" in run._tracker.last_error
    fake.broken = False
    run.log(step=20, loss=20.0)
    assert run.flush()
    assert fake.steps(run.id) == list(range(21))


def test_a_refused_point_is_dropped_alone_and_the_rest_land(fake):
    run = _run(fake)
    too_long = "m" * 300  # past PLATFORM_MAX_KEY_CHARS: the platform refuses the batch holding it (422)
    for i in range(9):
        run.log(step=i, **({too_long: 1.0} if i == 4 else {"loss": float(i)}))
    with pytest.warns(RuntimeWarning, match="refused by the platform"):
        assert run.flush()
    assert fake.steps(run.id) == [0, 1, 2, 3, 5, 6, 7, 8]
    assert run.skipped == 1


def test_backoff_grows_and_is_capped(fake, monkeypatch):
    monkeypatch.setattr(defaults, "RETRY_BACKOFF_S", 1.0)
    monkeypatch.setattr(defaults, "RETRY_BACKOFF_MAX_S", 4.0)
    monkeypatch.setattr(defaults, "BATCH_SERVER_ERRORS_MAX", 100)  # the same batch keeps failing: not parked here
    run = _run(fake)
    run.log(step=0, loss=1.0)
    waits = []
    for _ in range(5):
        fake.fail_next = ["500"]
        run.flush()
        waits.append(run._tracker._retry_at - time.monotonic())
    assert 0.4 < waits[0] <= 1.0
    assert 0.9 < waits[1] <= 2.0
    assert all(w <= 4.0 for w in waits) and waits[-1] > 1.9
    assert not run._tracker.due()
    assert run.flush()  # an explicit flush does not wait for the backoff
    assert run._tracker.due()


def test_background_thread_sends_without_being_asked(fake, monkeypatch):
    monkeypatch.setattr(defaults, "FLUSH_INTERVAL_S", 0.05)
    monkeypatch.setattr(_tracker._FLUSHER, "flush_due", _tracker._Flusher.flush_due.__get__(_tracker._FLUSHER))
    run = _run(fake)
    for i in range(10):
        run.log(step=i, loss=float(i))
    _tracker._FLUSHER.wake.set()
    deadline = time.monotonic() + 10
    while len(fake.points(run.id)) < 10 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fake.steps(run.id) == list(range(10))


def test_a_runs_first_point_is_sent_at_once_and_the_rest_wait_for_the_interval(fake, monkeypatch):
    """The curve starts when training does: the first point wakes the flush thread; later ones ride the interval."""
    monkeypatch.setattr(defaults, "FLUSH_INTERVAL_S", 60.0)
    monkeypatch.setattr(_tracker._FLUSHER, "flush_due", _tracker._Flusher.flush_due.__get__(_tracker._FLUSHER))
    run = _run(fake)
    run.log(step=0, loss=1.0)
    deadline = time.monotonic() + 20
    while not fake.points(run.id) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fake.steps(run.id) == [0], "the first point went out without a flush or an interval"
    run.log(step=1, loss=0.5)
    time.sleep(0.5)
    assert fake.steps(run.id) == [0], "a later point waits for FLUSH_INTERVAL_S"
    assert run.flush() and fake.steps(run.id) == [0, 1]


# --------------------------------------------------------------------------- finish, note, progress


def test_finish_rejects_unknown_statuses_by_name(fake):
    run = _run(fake)
    with pytest.raises(ValueError, match=r"status='complete'.*'done', 'failed', 'stopped'"):
        run.finish("complete")
    assert run.status == "running"


def test_finish_sends_points_first_then_status_with_notes(fake):
    run = _run(fake)
    run.note(base_model="kit-base", rank=np.int64(8))
    run.progress(total_steps=4)
    for i in range(4):
        run.log(step=i, loss=1.0)
    assert run.finish() is True
    methods = [(m, p.rsplit("/", 1)[-1]) for m, p, _ in fake.log[1:]]
    assert methods == [("POST", "points"), ("PATCH", run.id)]
    patch = fake.log[-1][2]
    assert patch["status"] == "done" and patch["total_steps"] == 4
    assert patch["summary"] == {"base_model": "kit-base", "rank": 8}
    assert fake.record(run.id)["status"] == "done"


def test_note_after_finish_is_sent_right_away_and_notes_survive_other_writers(fake):
    run = _run(fake)
    run.note(seed=1)
    run.finish()
    # another writer (a job finishing the run) merges its own summary keys
    fake.patch(run.id, {"summary": {"training": {"seconds": 3}}})
    run.note(verdict="improved")
    assert fake.record(run.id)["summary"] == {"seed": 1, "training": {"seconds": 3}, "verdict": "improved"}
    assert fake.log[-1][2] == {"summary": {"verdict": "improved"}}


def test_note_refuses_values_without_a_json_form(fake):
    run = _run(fake)
    with pytest.raises(TypeError, match="model="):
        run.note(model=object())


def test_failed_finish_waits_and_lands_later(fake):
    run = _run(fake)
    run.log(step=0, loss=1.0)
    fake.fail_next = ["500"]
    assert run.finish("stopped", error="out of patience") is False
    assert run.status == "stopped" and fake.record(run.id)["status"] == "running"
    assert run.flush() is True
    assert fake.record(run.id)["status"] == "stopped"
    assert fake.record(run.id)["error"] == "out of patience"


def test_context_manager_marks_done_or_failed_and_reraises(fake):
    with _run(fake) as run:
        run.log(step=0, loss=1.0)
    assert fake.record(run.id)["status"] == "done"
    with pytest.raises(ZeroDivisionError):
        with _run(fake) as bad:
            _ = 1 / 0
    assert fake.record(bad.id)["status"] == "failed"
    assert fake.record(bad.id)["error"].startswith("ZeroDivisionError")
    with pytest.raises(KeyboardInterrupt):
        with _run(fake) as stopped:
            raise KeyboardInterrupt
    assert fake.record(stopped.id)["status"] == "stopped"


def test_progress_sets_the_bar_and_validates(fake):
    run = _run(fake)
    run.progress(step=3, total_steps=10)
    assert run.flush()
    record = fake.record(run.id)
    assert (record["step"], record["total_steps"]) == (3, 10)
    with pytest.raises(ValueError, match="total_steps=-1"):
        run.progress(total_steps=-1)


# --------------------------------------------------------------------------- holdout, delta


def test_holdout_validates_pass_rates(fake):
    run = _run(fake)
    with pytest.raises(ValueError, match=r"after=58.*outside \[0, 1\].*0.58"):
        run.holdout(0.4, 58)
    with pytest.raises(ValueError, match="before=nan"):
        run.holdout(float("nan"), 0.5)
    with pytest.raises(ValueError, match="metric='accuracy'"):
        run.holdout(0.1, 0.2, metric="accuracy")
    run.holdout(2.5, 1.75, metric="loss")  # losses are any finite number
    assert run.summary["holdout_loss_before"] == 2.5


def test_holdout_after_finish_keeps_status_and_corrects(fake):
    run = _run(fake)
    run.finish()
    run.holdout(0.42, 0.58)
    assert fake.log[-1][2] == {"summary": {"holdout_before": 0.42, "holdout_after": 0.58}}
    run.holdout(0.42, 0.61)
    assert fake.record(run.id)["status"] == "done"
    assert fake.record(run.id)["summary"]["holdout_after"] == 0.61


def test_attach_holdout_by_id(fake, monkeypatch):
    run = _run(fake)
    run.finish()
    # by id: the credential chain's client, which is the same embedded platform
    record = attach_holdout(run.id, before=0.1, after=0.3)
    assert record["status"] == "done"
    assert record["summary"] == {"holdout_before": 0.1, "holdout_after": 0.3}
    with pytest.raises(ValueError, match="-0.2"):
        attach_holdout(run.id, before=-0.2, after=0.3)


def _graded(rate: float, tasks: int = 30) -> list[dict]:
    return [{"task_id": f"t{i}", "passed": i < rate * tasks, "markers": {"proxy": 1.0}} for i in range(tasks)]


def test_delta_goes_with_finish_or_right_away(fake, monkeypatch):
    run = _run(fake)
    report = run.delta(_graded(0.2), _graded(0.6))
    assert "verdict" in report
    run.finish()
    assert fake.record(run.id)["summary"]["delta"]["verdict"] == report["verdict"]
    # by id: the credential chain's client, which is the same embedded platform
    again = attach_delta(run.id, _graded(0.2), _graded(0.2))
    assert fake.record(run.id)["summary"]["delta"]["verdict"] == again["verdict"]
    assert fake.record(run.id)["status"] == "done"


# --------------------------------------------------------------------------- refresh, wait, printing


def test_refresh_fills_adapter_training_cost_and_error(fake):
    run = _run(fake)
    fake.patch(run.id, {  # what a hosted job writes when it ends; the platform prices the GPU time
        "status": "done",
        "summary": {"adapter": "/adapters/run_x", "training": {"before": 0.1, "after": 0.6, "gpu": "A10G", "seconds": 56, "rows": 40}},
    })
    run.refresh()
    assert run.status == "done" and run.adapter == "/adapters/run_x"
    assert run.training["after"] == 0.6 and round(run.training["cost_usd"], 2) == 0.02
    assert run.training["cost_basis"]["gpu"] == "A10G"
    line = str(run)
    assert "\n" not in line
    assert line.startswith(run.id) and "done" in line and run._client.url(f"/runs/{run.id}") in line
    assert "about $0.02 (A10G, 56 s, estimate)" in line
    assert repr(run).startswith("<TrainingRun run_")


def test_print_says_when_the_gpu_has_no_price(fake):
    run = _run(fake)
    fake.patch(run.id, {"summary": {"gpu": "TPUv9", "seconds": 10}})
    run.refresh()
    assert "cost unknown (TPUv9, 10 s" in str(run)


def test_print_shows_steps_of_total(fake):
    run = _run(fake, name="sft-1")
    run.progress(total_steps=40)
    run.log(step=12, loss=1.0)
    assert str(run).startswith(f"{run.id} (sft-1), running, step 12/40, {run._client.url('/runs/')}")


def test_wait_returns_the_final_status(fake, monkeypatch):
    monkeypatch.setattr(defaults, "TRAINING_POLL_MIN_S", 0.01)
    run = _run(fake)
    reads = []

    def on_request(method, path):
        if method == "GET":
            reads.append(time.monotonic())
            if len(reads) == 3:  # the job fails between two reads
                fake.patch(run.id, {"status": "failed", "error": "CUDA out of memory"})

    fake.transport.on_request = on_request
    assert run.wait(poll=0.01) == "failed"
    assert run.error == "CUDA out of memory" and len(reads) == 3


def test_wait_never_polls_faster_than_the_floor_and_times_out(fake, monkeypatch):
    monkeypatch.setattr(defaults, "TRAINING_POLL_MIN_S", 0.2)
    run = _run(fake)
    reads = []
    fake.transport.on_request = lambda method, path: reads.append(time.monotonic()) if method == "GET" else None
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=rf"{run.id} is still running after 0.7 s"):
        run.wait(poll=0.001, timeout=0.7)
    # It returns once the timeout has passed, not before; the upper bound only catches a hang
    # (generous, since a loaded machine can delay the last poll by a second or more).
    assert 0.65 < time.monotonic() - started < 10.0
    gaps = [b - a for a, b in zip(reads, reads[1:])]
    assert len(reads) >= 2 and min(gaps) >= 0.2


def test_wait_sees_the_end_within_a_moment_not_at_its_next_poll(fake):
    """Each read is a long poll: a run that ends mid-wait is seen at once, not after ``poll`` seconds."""
    import threading

    from whileai.platform import defaults as platform_defaults

    run = _run(fake)
    ender = threading.Timer(0.5, lambda: fake.patch(run.id, {"status": "done"}))
    ender.start()
    began = time.monotonic()
    assert run.wait(poll=60) == "done"
    took = time.monotonic() - began
    ender.join()
    # a poll would have slept 60 s; the platform's own cap on one long poll is RUN_WAIT_MAX_S (10 s)
    assert took < platform_defaults.RUN_WAIT_MAX_S, took


def test_refresh_with_a_wait_never_spins_on_a_platform_that_answers_at_once(fake, monkeypatch):
    from whileai.platform import defaults as platform_defaults

    run = _run(fake)
    reads = []
    fake.transport.on_request = lambda method, path: reads.append(time.monotonic()) if method == "GET" else None
    monkeypatch.setattr(platform_defaults, "RUN_WAIT_MAX_S", 0.0)  # a platform that holds nothing
    began = time.monotonic()
    run.refresh(wait=0.3)
    assert time.monotonic() - began >= 0.3 and len(reads) == 1  # nothing changed: the rest is waited out here
    fake.patch(run.id, {"summary": {"note": "x"}})
    began = time.monotonic()
    run.refresh(wait=5)
    assert time.monotonic() - began < 5 and run.summary["note"] == "x"  # a change answers at once


# --------------------------------------------------------------------------- the spool


def _spooled_records():
    records = []
    for path in _spool.pending_files():
        records += [json.loads(line) for line in path.read_text().splitlines()]
    return records


def test_spool_then_deliver_exactly_once(fake):
    run = _run(fake)
    for i in range(6):
        run.log(step=i, loss=float(i))
    fake.fail_next = ["lost"]  # the batch lands but its reply is lost: its id must survive the spool
    assert run.flush() is False
    run._tracker.spool()
    client = run._client
    _spool.deliver(lambda target: client if target == client.target else None)
    assert fake.steps(run.id) == list(range(6))

    other = _run(fake)
    for i in range(3):
        other.log(step=i, loss=float(i))
    other.note(k=1)
    fake.fail_next = ["refused"]
    other.finish()
    assert other._tracker.spool() == (3, 1)
    records = _spooled_records()
    assert [r["kind"] for r in records] == ["points", "patch"]
    assert records[1]["body"]["status"] == "done" and records[1]["body"]["summary"] == {"k": 1}
    assert fake.key not in json.dumps(records)  # the key itself never reaches the disk
    client = other._client
    report = _spool.deliver(lambda target: client if target == client.target else None)
    assert (report.points, report.updates, report.left) == (3, 1, 0)
    assert fake.steps(other.id) == [0, 1, 2] and fake.record(other.id)["status"] == "done"
    assert _spool.pending_files() == []


def test_spool_keeps_what_cannot_be_delivered_yet(fake):
    run = _run(fake)
    run.log(step=0, loss=1.0)
    run._tracker.spool()
    fake.fail_next = ["refused"]
    client = run._client
    report = _spool.deliver(lambda target: client)
    assert report.left == 1 and "cannot reach" in report.reasons[0]
    report = _spool.deliver(lambda target: None)
    assert report.left == 1 and "no credentials" in report.reasons[0]
    report = _spool.deliver(lambda target: client)
    assert report.points == 1 and fake.steps(run.id) == [0]


def test_a_long_outage_spills_to_disk_instead_of_memory(fake, monkeypatch):
    monkeypatch.setattr(defaults, "BUFFER_MAX_POINTS", 40)
    monkeypatch.setattr(defaults, "FLUSH_BATCH_POINTS", 10)
    run = _run(fake)
    fake.broken = True
    for i in range(100):
        run.log(step=i, loss=float(i))
        if i % 10 == 9:
            run.flush()
    assert run._tracker.pending_points() <= 40
    assert sum(len(r["points"]) for r in _spooled_records()) >= 60
    fake.broken = False
    assert run.flush()  # a good send also delivers this process's spool
    assert sorted(fake.steps(run.id)) == list(range(100))
    assert len(fake.steps(run.id)) == 100


def test_spool_size_cap_refuses_and_says_so(fake, monkeypatch):
    monkeypatch.setattr(defaults, "SPOOL_MAX_BYTES", 200)
    run = _run(fake)
    for i in range(50):
        run.log(step=i, loss=float(i))
    with pytest.warns(RuntimeWarning, match="spool .* is full"):
        run._tracker.spool()


def test_deleted_run_drops_its_points_with_a_warning(fake):
    run = _run(fake)
    run.log(step=0, loss=1.0)
    fake.api.request("DELETE", f"/runs/{run.id}")
    with pytest.warns(RuntimeWarning, match="not on the platform any more"):
        assert run.flush() is False
    run.log(step=1, loss=1.0)
    assert run.flush() is False and not run._tracker.has_pending()
