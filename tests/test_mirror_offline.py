"""``report_to`` keeps every copy on this machine, in the account's folder, and a delete takes the copies along.

A real SFT job (a worker process) mirrors to W&B, MLflow and trackio with two watchers on the worker: a logging
HTTP proxy on loopback (HTTPS_PROXY/HTTP_PROXY: Python's HTTP clients and W&B's Go service send through it, so
a request to any host shows as its first line) and a ``sitecustomize`` that records every non-loopback
``getaddrinfo`` and ``connect`` in the worker's Python and fails the lookup (what a client that ignores the proxy
would do). The worker's environment is a user's, not a test's: the variables that tell MLflow it runs under
pytest or CI (and so turn its telemetry off by themselves) are removed before anything imports. Nothing leaves
the machine: no proxied request, no lookup, no connection.

Then the run and an account are deleted through the platform's own paths (``wai.delete_run`` -> the HTTP API ->
the store; the store's ``delete_account``), and each tracker's store is read back, row by row, for the run's ids.
"""

from __future__ import annotations

import json
import os
import socketserver
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import pytest

import whileai.simulations as wai

TRACKERS = ["wandb", "mlflow", "trackio"]

#: variables that make a tracker believe it runs in a test or CI (MLflow's _is_ci_env_or_testing list, the ones
#: a test run can have): a user's job has none of them
_TEST_SIGNS = ("PYTEST_CURRENT_TEST", "CI", "GITHUB_ACTIONS", "GITLAB_CI", "CIRCLECI", "JENKINS_URL", "TRAVIS",
               "TF_BUILD", "BITBUCKET_BUILD_NUMBER", "CODEBUILD_BUILD_ARN", "BUILDKITE", "TEAMCITY_VERSION")

_SITECUSTOMIZE = textwrap.dedent('''
    """Records every attempt of this process to reach a host that is not this machine, and fails its lookup."""
    import ipaddress, json, os, socket, threading, traceback

    for _name in {signs!r}:
        os.environ.pop(_name, None)
    _LOG, _LOCK = os.environ["WHILEAI_TEST_NET_LOG"], threading.Lock()
    _lookup, _connect = socket.getaddrinfo, socket.socket.connect

    def _loopback(host):
        host = host.decode() if isinstance(host, bytes) else host
        if host in (None, "", "localhost"):
            return True
        try:
            return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
        except ValueError:
            return False

    def _note(kind, host):
        with _LOCK, open(_LOG, "a") as out:
            out.write(json.dumps({{"kind": kind, "host": str(host), "pid": os.getpid(),
                                  "where": traceback.format_stack()[-12:-2]}}) + "\\n")

    def getaddrinfo(host, *args, **kwargs):
        if not _loopback(host):
            _note("lookup", host)
            raise socket.gaierror(socket.EAI_NONAME, "no lookups off this machine in this test")
        return _lookup(host, *args, **kwargs)

    def connect(self, address):
        if isinstance(address, tuple) and not _loopback(address[0]):
            _note("connect", address[0])
        return _connect(self, address)

    socket.getaddrinfo = getaddrinfo
    socket.socket.connect = connect
''').format(signs=_TEST_SIGNS)


class _Proxy(socketserver.ThreadingTCPServer):
    """An HTTP proxy that forwards nothing: it keeps each request's first line and answers 502."""

    daemon_threads = True

    def __init__(self) -> None:
        self.seen: list[str] = []
        super().__init__(("127.0.0.1", 0), _ProxyHandler)


class _ProxyHandler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        line = self.rfile.readline(65536).decode("latin-1").strip()
        self.server.seen.append(line)  # type: ignore[attr-defined]
        self.wfile.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """The proxy, the sitecustomize folder and the log it writes; ``attempts()`` is everything seen so far."""
    folder = tmp_path_factory.mktemp("net-probe")
    (folder / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    log = folder / "attempts.jsonl"
    proxy = _Proxy()
    threading.Thread(target=proxy.serve_forever, name="test-proxy", daemon=True).start()
    address = f"http://127.0.0.1:{proxy.server_address[1]}"

    def env() -> dict[str, str]:
        return {"PYTHONPATH": os.pathsep.join([str(folder), *filter(None, [os.environ.get("PYTHONPATH")])]),
                "WHILEAI_TEST_NET_LOG": str(log), "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
                **{name: address for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")}}

    def attempts() -> list[dict]:
        seen = [{"kind": "proxy", "line": line} for line in proxy.seen]
        return seen + ([json.loads(line) for line in log.read_text().splitlines()] if log.exists() else [])

    def clear() -> None:
        proxy.seen.clear()
        log.unlink(missing_ok=True)

    yield {"env": env, "attempts": attempts, "clear": clear}
    proxy.shutdown()
    proxy.server_close()


def _keep_env_scoped(monkeypatch) -> None:
    """An in-process mirror sets the trackers' switches in os.environ: here they are restored after the test."""
    from whileai.domain.tracking.mirror._offline import QUIET_ENV, WANDB_LOCAL_ENV

    for name, value in {**QUIET_ENV, **WANDB_LOCAL_ENV}.items():
        monkeypatch.setenv(name, os.environ.get(name) or value)


def _clean_tracker_env(mp) -> None:
    from whileai.domain.tracking.mirror._offline import QUIET_ENV, WANDB_LOCAL_ENV

    for name in ("WANDB_DISABLED", "WANDB_MODE", "WANDB_API_KEY", "WANDB_DIR", "MLFLOW_TRACKING_URI", "TRACKIO_DIR",
                 "TRACKIO_SPACE_ID", "TRACKIO_SERVER_URL", *QUIET_ENV, *WANDB_LOCAL_ENV, *_TEST_SIGNS):
        mp.delenv(name, raising=False)  # conftest disables W&B; an earlier in-process mirror set the switches


def test_the_probe_sees_a_proxied_request_a_lookup_and_a_connection(probe):
    """The watchers are live: a plain HTTPS request goes to the proxy, and without one it is a recorded lookup."""
    probe["clear"]()
    env = {**os.environ, **probe["env"]()}
    fetch = "import urllib.request\ntry: urllib.request.urlopen('https://example.invalid/', timeout=5)\nexcept OSError: pass"
    subprocess.run([sys.executable, "-c", fetch], env=env, check=True, timeout=120)
    without = {k: v for k, v in env.items() if k.lower() not in ("https_proxy", "http_proxy")}
    subprocess.run([sys.executable, "-c", fetch], env=without, check=True, timeout=120)
    connect = "import socket\ns = socket.socket()\ns.settimeout(0.2)\ntry: s.connect(('192.0.2.1', 9))\nexcept OSError: pass"
    subprocess.run([sys.executable, "-c", connect], env=without, check=True, timeout=120)
    kinds = {(a["kind"], a.get("line") or a.get("host")) for a in probe["attempts"]()}
    assert any(k == "proxy" and str(v).startswith("CONNECT example.invalid:443 ") for k, v in kinds), kinds
    assert ("lookup", "example.invalid") in kinds and ("connect", "192.0.2.1") in kinds, kinds


@pytest.fixture(scope="module")
def offline_job(probe, push_sample):
    """One SFT job with report_to all three trackers, watched; the attempts are read when it is done."""
    from whileai.kit._base import tiny_model_dir

    with pytest.MonkeyPatch.context() as mp:
        _clean_tracker_env(mp)
        sets = push_sample("mirror-offline", tasks=12)
        for name, value in probe["env"]().items():
            mp.setenv(name, value)
        probe["clear"]()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = wai.train(sets["passes"], method="sft", steps=1, holdout=sets["holdout"],
                            base_model=str(tiny_model_dir()), wait=True,
                            config={"report_to": TRACKERS, "holdout_rows": 2})
        attempts = probe["attempts"]()
    yield {"run": run, "record": wai.get_run(run.id), "attempts": attempts}


def test_a_job_mirroring_to_every_tracker_reaches_no_host(offline_job):
    record = offline_job["record"]
    assert record["status"] == "done", record.get("error")
    state = record["summary"]["mirrors"]
    assert all(state[name]["status"] == "closed" and state[name]["errors"] == 0 for name in TRACKERS), state
    assert offline_job["attempts"] == []


def _local_account() -> str:
    from whileai.domain.client import get_client

    return get_client().request("GET", "/me")["account_id"]


def test_the_summary_says_where_each_copy_went_in_the_accounts_folder(offline_job):
    from whileai.core.paths import data_root

    run_id, summary = offline_job["run"].id, offline_job["record"]["summary"]
    folder = data_root() / "mirrors" / _local_account()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    where = summary["mirrored_to"]
    assert sorted(where) == sorted(TRACKERS)
    wandb_run = Path(where["wandb"])
    assert wandb_run.parent == folder / "wandb" and wandb_run.name.endswith(f"-{run_id}")
    assert (wandb_run / f"run-{run_id}.wandb").is_file()
    assert where["mlflow"] == f"sqlite:///{folder / 'mlflow.db'}" and (folder / "mlflow.db").is_file()
    assert where["trackio"] == str(folder / "trackio") and (folder / "trackio" / "whileai.db").is_file()
    for name in TRACKERS:  # what `show` prints beside each mirror names the same place
        assert str(where[name]) in summary["mirrors"][name]["to"], (name, summary["mirrors"][name])


def _rows_naming(db: Path, *needles: str) -> list[tuple[str, tuple]]:
    """Every row of every table in the SQLite file ``db`` whose text holds one of ``needles``."""
    found = []
    with sqlite3.connect(db) as conn:
        tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                if any(needle in str(cell) for cell in row for needle in needles):
                    found.append((table, row))
    return found


def _mirror_in_process(monkeypatch, name: str, client=None) -> tuple[str, dict]:
    """A run made here and mirrored to all three trackers from this process (the SDK's own path); its locations."""
    from whileai.domain.tracking.mirror import open_mirrors

    _keep_env_scoped(monkeypatch)
    for var in ("WANDB_DISABLED", "WANDB_DIR", "MLFLOW_TRACKING_URI", "TRACKIO_DIR"):
        monkeypatch.delenv(var, raising=False)
    run = wai.training_run(name=name) if client is None else wai.training_run(name=name, api_key=client.api_key)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mirrors = open_mirrors(TRACKERS, run_id=run.id, name=run.name, url=run.url, config={"lr": 1e-3},
                               note=lambda state: run.note(mirrors=state), client=client)
        run.mirror_to(mirrors)
        for step in range(2):
            run.log(step=step, loss=1.0 / (step + 1))
        assert run.finish("done")
    assert all(entry["status"] == "closed" for entry in mirrors.state.values()), mirrors.state
    return run.id, dict(mirrors.locations)


def _mlflow_uuid(uri: str, run_id: str) -> str:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    [found] = client.search_runs([client.get_experiment_by_name("whileai").experiment_id],
                                 filter_string=f"tags.`whileai.run_id` = '{run_id}'")
    return found.info.run_id


def test_deleting_a_run_deletes_its_copies_and_no_other(offline_job, monkeypatch):
    run_id, where = offline_job["run"].id, offline_job["record"]["summary"]["mirrored_to"]
    kept_id, kept_where = _mirror_in_process(monkeypatch, "mirror-kept")
    assert kept_where == where | {"wandb": kept_where["wandb"]}  # the same account: the same stores
    mlflow_db, trackio_db = Path(where["mlflow"].removeprefix("sqlite:///")), Path(where["trackio"]) / "whileai.db"
    uuid, kept_uuid = _mlflow_uuid(where["mlflow"], run_id), _mlflow_uuid(where["mlflow"], kept_id)
    assert _rows_naming(mlflow_db, run_id, uuid) and _rows_naming(trackio_db, run_id)  # there before the delete

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a copy that could not be deleted is a MirrorWarning: none here
        assert wai.delete_run(run_id)["deleted"] is True

    assert not Path(where["wandb"]).exists()
    assert _rows_naming(mlflow_db, run_id, uuid) == []
    assert _rows_naming(trackio_db, run_id) == []
    for db in (mlflow_db, trackio_db):  # nor left in the files' free pages (or a write-ahead log)
        for path in (db, db.with_name(db.name + "-wal")):
            data = path.read_bytes() if path.exists() else b""
            assert run_id.encode() not in data and uuid.encode() not in data, path
    # the account's other run keeps every copy
    assert Path(kept_where["wandb"]).is_dir()
    assert _mlflow_uuid(where["mlflow"], kept_id) == kept_uuid and _rows_naming(mlflow_db, kept_uuid)
    assert any(table == "metrics" for table, _ in _rows_naming(trackio_db, kept_id))


def test_each_account_has_its_own_stores_and_deleting_it_deletes_them(offline_job, monkeypatch):
    from whileai.core.paths import data_root
    from whileai.domain.client import _embedded_app, embedded_client

    store = _embedded_app(data_root())[0].state.store
    account, key = store.create_account("mirror-owner")
    other_id, other_where = _mirror_in_process(monkeypatch, "mirror-other-account", client=embedded_client(key))
    folder = data_root() / "mirrors" / account
    assert other_where["mlflow"] == f"sqlite:///{folder / 'mlflow.db'}" and other_where["trackio"] == str(folder / "trackio")
    assert Path(other_where["wandb"]).parent == folder / "wandb"
    local = data_root() / "mirrors" / _local_account()
    assert _rows_naming(local / "mlflow.db", other_id) == [] and _rows_naming(local / "trackio" / "whileai.db", other_id) == []

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store.delete_account(account)
    assert not folder.exists()
    assert (local / "mlflow.db").is_file() and (local / "trackio" / "whileai.db").is_file()  # the local account's stay


def test_the_users_own_tracker_settings_win(monkeypatch):
    from whileai.domain.tracking.mirror._offline import keep_local, wandb_online

    _keep_env_scoped(monkeypatch)
    for name in ("WANDB_MODE", "WANDB_API_KEY", "MLFLOW_DISABLE_TELEMETRY", "WANDB_DISABLE_GIT"):
        monkeypatch.delenv(name, raising=False)
    keep_local()
    assert os.environ["WANDB_MODE"] == "offline" and os.environ["MLFLOW_DISABLE_TELEMETRY"] == "true"
    monkeypatch.delenv("WANDB_MODE")
    monkeypatch.delenv("WANDB_DISABLE_GIT")
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)   # the user set W&B up to go online: W&B decides
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "false")
    keep_local()
    assert wandb_online() and "WANDB_MODE" not in os.environ and "WANDB_DISABLE_GIT" not in os.environ
    assert os.environ["MLFLOW_DISABLE_TELEMETRY"] == "false"
