"""Offline runs in process: a platform that cannot be reached at the start, offline mode, the codec at the SDK surface.

The platform is the real embedded app over the test's own SQLite store; the
run's client reaches it through :class:`Switch`, an ``httpx`` transport around
the embedded one that can refuse connections (the platform is down), answer an
error, or store a request and lose its reply. A second client without faults
reads what the platform holds. tests/test_offline_e2e.py does the same with real
server processes.
"""

from __future__ import annotations

import json

import httpx
import pytest

import whileai.simulations as wai
from whileai.core.ids import is_id
from whileai.core.paths import data_root
from whileai.simulations import training
from whileai.domain import client as _client, defaults
from whileai.domain.tracking import _flush, _offline, _spool, _tracker
from whileai.domain.client import Client


class Switch(httpx.BaseTransport):
    """The embedded platform's transport that can be down, fail once on demand, and logs each request."""

    def __init__(self, inner: httpx.BaseTransport):
        self.inner = inner
        self.down = False
        self.fail_next: list[str] = []  # "422", "lost" (stored, then the reply lost)
        self.log: list[tuple[str, str, dict | None]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        content = request.read()
        path = request.url.path.removeprefix("/api/v1")
        self.log.append((request.method, path, json.loads(content) if content else None))
        if self.down:
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        mode = self.fail_next.pop(0) if self.fail_next else None
        if mode == "422":
            return httpx.Response(422, json={"error": {"message": "config too large", "type": "invalid"}}, request=request)
        response = self.inner.handle_request(request)
        if mode == "lost":
            raise httpx.ReadTimeout("reply lost", request=request)
        return response


class Platform:
    def __init__(self, monkeypatch):
        self.app, self.key = _client._embedded_app(data_root())
        self.switch = Switch(_client._EmbeddedTransport(self.app))
        self.client = Client(_client.embedded_base_url(), self.key, transport=self.switch, embedded=True)
        self.api = Client(_client.embedded_base_url(), self.key, transport=_client._EmbeddedTransport(self.app),
                          embedded=True)
        monkeypatch.setattr(training, "get_client", lambda api_key=None: self.client)

    def runs(self) -> list[dict]:
        return self.api.request("GET", "/runs")["runs"]

    def record(self, run_id: str) -> dict:
        return self.api.request("GET", f"/runs/{run_id}")

    def client_for(self, target: dict) -> Client | None:
        return self.client if target == self.client.target else None


@pytest.fixture
def platform(home, monkeypatch):
    monkeypatch.setattr(_tracker._FLUSHER, "flush_due", lambda: None)  # tests flush by hand
    monkeypatch.setattr(_flush, "_SPOOL_TRIED", {})
    monkeypatch.setattr(_offline, "_ANNOUNCED", [False])
    monkeypatch.delenv(defaults.MODE_ENV, raising=False)
    before = set(_tracker._FLUSHER.trackers)
    yield Platform(monkeypatch)
    with _tracker._FLUSHER.lock:
        _tracker._FLUSHER.trackers &= before


def _spooled() -> list[dict]:
    records = []
    for path in _spool.pending_files():
        records += [json.loads(line) for line in path.read_text().splitlines()]
    return records


def test_a_platform_down_at_the_start_never_stops_the_run_and_the_next_send_creates_it_once(platform, capsys):
    platform.switch.down = True
    run = wai.training_run(name="offline", config={"lr": 0.1})
    other = wai.training_run(name="second")
    assert is_id(run.id, "run") and run.status == "running" and run.name == "offline" and run.config == {"lr": 0.1}
    err = capsys.readouterr().err
    assert err.count("whileai:") == 1, "said once per process, not once per run"
    assert "cannot be reached" in err and run.id in err and "python -m whileai sync" in err
    for i in range(5):
        run.log(step=i, loss=1.0 / (i + 1))
    run.note(best=0.2)
    assert run.finish() is False and run.errors >= 1
    assert platform.runs() == []

    platform.switch.down = False
    platform.switch.fail_next = ["lost"]  # the create lands but its reply is lost: the resend must not make a second run
    assert run.flush() is False
    assert run.flush() is True
    record = platform.record(run.id)
    assert [p["step"] for p in record["series"]] == list(range(5))
    assert record["status"] == "done" and record["summary"] == {"best": 0.2} and record["config"] == {"lr": 0.1}
    creates = [b for method, path, b in platform.switch.log if (method, path) == ("POST", "/runs") and b["id"] == run.id]
    assert len(creates) >= 4, "at the start, at finish, the one whose reply was lost, and its resend"
    assert other.flush() is True
    assert sorted(r["id"] for r in platform.runs()) == sorted([run.id, other.id])


def test_a_run_that_ends_before_the_platform_is_back_is_spooled_with_its_create_first(platform):
    platform.switch.down = True
    run = wai.training_run(name="spooled")
    for i in range(3):
        run.log(step=i, loss=float(i))
    run.note(k=1)
    run.finish()
    assert run._tracker.spool() == (3, 1)
    records = _spooled()
    assert [r["kind"] for r in records] == ["create", "points", "patch"]
    assert records[0]["body"]["id"] == run.id and not any(r.get("held") for r in records)
    platform.switch.down = False
    report = _spool.deliver(platform.client_for)
    assert (report.runs, report.points, report.updates, report.left) == (1, 3, 1, 0)
    assert _spool.deliver(platform.client_for).files == 0
    record = platform.record(run.id)
    assert len(record["series"]) == 3 and record["summary"] == {"k": 1} and record["status"] == "done"


def test_offline_mode_sends_nothing_until_sync(platform, monkeypatch, capsys):
    monkeypatch.setenv(defaults.MODE_ENV, "offline")
    run = wai.training_run(name="air-gapped")
    assert "WHILEAI_MODE=offline" in capsys.readouterr().err
    for i in range(4):
        run.log(step=i, loss=float(i))
        run.flush()  # each flush writes what is new to the spool
    run.note(best=3.0)
    run.finish()
    run._tracker.spool()
    assert platform.switch.log == [], "offline mode sends nothing at all"
    records = _spooled()
    assert [r["kind"] for r in records].count("create") == 1 and all(r["held"] for r in records)
    assert sum(len(r.get("points") or ()) for r in records) == 4

    # the automatic delivery after another run's good send leaves what offline mode holds
    monkeypatch.delenv(defaults.MODE_ENV)
    online = wai.training_run(name="online")
    online.log(step=0, loss=1.0)
    assert online.flush() is True
    assert [r["id"] for r in platform.runs()] == [online.id]

    report = _spool.deliver(platform.client_for, include_held=True)  # what python -m whileai sync does
    assert (report.runs, report.points, report.left) == (1, 4, 0)
    record = platform.record(run.id)
    assert len(record["series"]) == 4 and record["summary"] == {"best": 3.0} and record["status"] == "done"


def test_a_bad_mode_is_refused_by_name(platform, monkeypatch):
    monkeypatch.setenv(defaults.MODE_ENV, "ofline")
    with pytest.raises(ValueError, match="WHILEAI_MODE='ofline'.*online, offline"):
        wai.training_run()
    assert platform.switch.log == []


def test_a_refusal_is_not_an_outage(platform):
    """A platform that answers (a bad key, a bad field) refuses the run as before; only no answer goes offline."""
    platform.switch.fail_next = ["422"]
    with pytest.raises(wai.PlatformError, match="config too large"):
        wai.training_run(config={"big": 1})
    assert not _spool.pending_files()


def test_a_create_refused_for_its_fields_still_lands_with_its_id_and_points(platform):
    platform.switch.down = True
    run = wai.training_run(name="big-config", config={"huge": list(range(10))})
    run.log(step=0, loss=1.0)
    platform.switch.down = False
    platform.switch.fail_next = ["422"]
    with pytest.warns(RuntimeWarning, match="refused the run's fields"):
        assert run.finish() is True
    record = platform.record(run.id)
    assert record["name"] == "big-config" and record["config"] is None and len(record["series"]) == 1


def test_an_id_that_is_another_accounts_is_dropped_with_a_warning(platform):
    from whileai.platform.store import Store, store_url  # the test reaches the store to make the other account

    store = Store(store_url())
    other = store.create_account("other")[0]
    platform.switch.down = True
    run = wai.training_run(name="mine")
    store.ensure_run(other, run.id, name="theirs")
    platform.switch.down = False
    run.log(step=0, loss=1.0)
    with pytest.warns(RuntimeWarning, match="another account's"):
        assert run.flush() is False
    assert store.get_run(other, run.id)["series"] == [] and store.get_run(other, run.id)["name"] == "theirs"
    assert platform.runs() == []
    store.close()


# --------------------------------------------------------------------------- one codec, no repr on the wire


def test_values_without_a_json_form_are_refused_or_skipped_never_sent_as_repr(platform):
    class Model:
        def __repr__(self):
            return "Model(secret-weights)"

    with pytest.raises(TypeError, match=r"config\['model'\]"):
        wai.training_run(config={"model": Model()})
    assert platform.switch.log == [], "nothing was sent for a refused run"

    run = wai.training_run(name="codec")
    with pytest.raises(TypeError, match="model="):
        run.note(model=Model(), seed=1)
    assert "seed" not in run.summary, "a refused note changes nothing"
    run.log(step=0, loss=1.0, model=Model())
    assert run.skipped == 1
    with pytest.raises(TypeError, match="JSON"):
        platform.client.request("PATCH", f"/runs/{run.id}", json={"summary": {"model": Model()}})
    with pytest.raises(TypeError):
        _spool.write([{"target": {}, "run_id": run.id, "kind": "patch", "body": {"model": Model()}}])
    assert run.finish() is True
    sent = json.dumps(platform.switch.log)
    assert "Model(" not in sent and "secret-weights" not in sent
    assert "Model(" not in "".join(p.read_text() for p in _spool.pending_files())
    assert [p["metrics"] for p in platform.record(run.id)["series"]] == [{"loss": 1.0}]


def test_an_unwritable_spool_never_stops_the_loop_and_the_next_flush_writes_it(platform, monkeypatch, home):
    monkeypatch.setenv(defaults.MODE_ENV, "offline")
    run = wai.training_run(name="disk-trouble")
    (home / "spool").rmdir() if (home / "spool").is_dir() else None
    (home / "spool").write_text("not a folder")  # the spool cannot be made: every write fails
    run.log(step=0, loss=1.0)
    assert run.flush() is False and run.errors == 1 and run._tracker.pending_points() == 1
    (home / "spool").unlink()
    run.log(step=1, loss=0.5)
    run.finish()
    records = _spooled()
    assert [r["kind"] for r in records][::len(records) - 1] == ["create", "patch"], "the create outlived the failed write"
    assert [p["step"] for r in records if r["kind"] == "points" for p in r["points"]] == [0, 1]
    assert _spool.deliver(platform.client_for, include_held=True).points == 2


def test_a_spool_line_is_its_version_then_the_record_as_given_and_a_full_spool_counts_points(home, monkeypatch):
    target = {"base_url": "http://x", "embedded": False, "key_id": "k1"}
    points = {"target": target, "run_id": "run_a", "kind": "points", "batch_id": "b1",
              "points": [{"step": 0, "metrics": {"loss": 1.5}, "ts": 2.0}, {"step": 1, "metrics": {"loss": 1.0}, "ts": 3.0}]}
    patch = {"target": target, "run_id": "run_a", "held": True, "kind": "patch", "body": {"status": "done"}}
    assert _spool.write([points, patch]) == (2, 0)
    lines = b"".join(path.read_bytes() for path in _spool.pending_files()).splitlines()
    assert lines == [
        b'{"v":1,"target":{"base_url":"http://x","embedded":false,"key_id":"k1"},"run_id":"run_a","kind":"points",'
        b'"batch_id":"b1","points":[{"step":0,"metrics":{"loss":1.5},"ts":2.0},{"step":1,"metrics":{"loss":1.0},"ts":3.0}]}',
        b'{"v":1,"target":{"base_url":"http://x","embedded":false,"key_id":"k1"},"run_id":"run_a","held":true,'
        b'"kind":"patch","body":{"status":"done"}}',
    ]
    monkeypatch.setattr(_spool.defaults, "SPOOL_MAX_BYTES", 0)
    with pytest.warns(Warning, match="spool"):
        assert _spool.write([points, patch]) == (0, 3)  # the batch's two points and the one run update
