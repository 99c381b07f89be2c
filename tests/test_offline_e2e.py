"""A run never dies of its dashboard, end to end: real ``python -m whileai platform`` processes, real training scripts.

Each test has a server on a free loopback port with its own data root and
SQLite store, and runs a training script as a subprocess with its own data root
(where its spool lives), pointed at the server by WHILEAI_BASE_URL and
WHILEAI_API_KEY. The platform is down for the whole script, or killed with
SIGKILL while the script logs and restarted on the same port and store, or the
script runs with WHILEAI_MODE=offline; then ``python -m whileai sync`` (or the
next run's send) delivers. Every point must be stored exactly once, and the run
must end with its summary and status, under the id it gave itself.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from whileai.core.ids import is_id
from whileai.platform.store import Store

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent(
    '''
    """A training loop: a run, N points, a summary, finish. With a gate folder it waits at each stage for the test."""
    import sys, time
    from pathlib import Path

    import whileai.simulations as wai

    n = int(sys.argv[1])
    gate = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    wai.defaults.FLUSH_INTERVAL_S = 0.1  # send often, so sends are in flight when the server dies

    def wait_for(name):
        while gate and not (gate / name).exists():
            time.sleep(0.02)

    run = wai.training_run(name="e2e", config={"lr": 0.1, "points": n})
    print(run.id, flush=True)
    half = n // 2
    for i in range(half):
        run.log(step=i, loss=1.0 / (i + 1), lr=0.1)
    if gate:
        assert run.flush(), "the first half lands while the server is up"
        (gate / "half").touch()
        wait_for("go")
    for i in range(half, n):
        run.log(step=i, loss=1.0 / (i + 1), lr=0.1)
        if gate:
            time.sleep(0.005)
    if gate:
        (gate / "logged").touch()
        wait_for("finish")
    run.note(best_loss=1.0 / n, points=n)
    print("finished", run.finish(), "errors", run.errors, flush=True)
    '''
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """``python -m whileai platform`` on a fixed loopback port, over its own data root and SQLite store."""

    #: how long start() waits for the server to answer
    start_timeout_s = 120.0

    def __init__(self, root: Path, **env: str):
        self.root = root
        root.mkdir(exist_ok=True)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.store_url = f"sqlite:///{root / 'platform.db'}"
        store = Store(self.store_url)
        self.key = store.create_account("trainer")[1]
        store.close()
        self.proc: subprocess.Popen | None = None
        self.log = root / "server.log"
        self.env = {**os.environ, "WHILEAI_HOME": str(root), **env}
        self.env.pop("WHILEAI_STORE_URL", None)

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "whileai", "platform", "--port", str(self.port), "--store-url", self.store_url],
                env=self.env, stdout=out, stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"the platform exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/api/v1/me", headers=self.auth, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        pytest.fail(f"the platform did not answer on {self.url}:\n{self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def get(self, path: str):
        response = httpx.get(f"{self.url}/api/v1{path}", headers=self.auth, timeout=30)
        response.raise_for_status()
        return response.json()


@pytest.fixture
def server(tmp_path):
    handle = Server(tmp_path / "server")
    yield handle
    handle.stop()


def _env(server: Server, home: Path, **extra: str) -> dict[str, str]:
    home.mkdir(exist_ok=True)
    env = {**os.environ, "WHILEAI_HOME": str(home), "WHILEAI_BASE_URL": server.url, "WHILEAI_API_KEY": server.key,
           "OMP_NUM_THREADS": "1", **extra}
    if "WHILEAI_MODE" not in extra:
        env.pop("WHILEAI_MODE", None)
    return env


def _script(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return path


def _python(args: list[str], env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=timeout)


def _sync(env: dict[str, str]) -> subprocess.CompletedProcess:
    done = _python(["-m", "whileai", "sync"], env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _assert_delivered(server: Server, run_id: str, n: int) -> None:
    record = server.get(f"/runs/{run_id}")
    steps = [point["step"] for point in record["series"]]
    assert sorted(steps) == list(range(n)), f"{len(steps)} points stored for {n} logged"
    assert record["status"] == "done" and record["step"] == n - 1
    assert record["summary"] == {"best_loss": 1.0 / n, "points": n}
    assert record["name"] == "e2e" and record["config"] == {"lr": 0.1, "points": n}


def test_platform_down_for_the_whole_run_then_sync_delivers_it_once(server, tmp_path):
    n = 300
    env = _env(server, tmp_path / "trainer")
    done = _python([str(_script(tmp_path)), str(n)], env)  # nothing listens on the server's port yet
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.split()[0]
    assert is_id(run_id, "run") and "finished False" in done.stdout
    said = [line for line in done.stderr.splitlines() if line.startswith("whileai:")]
    assert len(said) == 1, done.stderr  # once, with how it will be delivered
    assert "cannot be reached" in said[0] and run_id in said[0] and "python -m whileai sync" in said[0]

    server.start()
    assert server.get("/runs")["runs"] == []
    report = _sync(env).stdout
    assert "created 1 runs" in report and f"delivered {n} points" in report, report
    _assert_delivered(server, run_id, n)
    assert "nothing to sync" in _sync(env).stdout
    _assert_delivered(server, run_id, n)


def test_the_next_run_that_reaches_the_platform_delivers_an_offline_run(server, tmp_path):
    n = 50
    env = _env(server, tmp_path / "trainer")
    first = _python([str(_script(tmp_path)), str(n)], env)
    assert first.returncode == 0, first.stderr
    server.start()
    second = _python([str(_script(tmp_path)), "4"], env)
    assert second.returncode == 0 and "finished True" in second.stdout, second.stderr
    _assert_delivered(server, first.stdout.split()[0], n)
    assert "nothing to sync" in _sync(env).stdout


def test_a_server_killed_mid_run_and_restarted_stores_every_point_once(server, tmp_path):
    n = 400
    gate = tmp_path / "gate"
    gate.mkdir()
    env = _env(server, tmp_path / "trainer")
    server.start()
    script = subprocess.Popen([sys.executable, str(_script(tmp_path)), str(n), str(gate)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(gate / "half", script)
        (gate / "go").touch()
        time.sleep(0.3)  # the second half is being logged and sent
        server.kill()
        _wait_for(gate / "logged", script)
        server.start()  # the same port and store
        (gate / "finish").touch()
        out, err = script.communicate(timeout=180)
    finally:
        if script.poll() is None:
            script.kill()
    assert script.returncode == 0, err
    run_id = out.split()[0]
    assert "finished True" in out and int(out.split()[-1]) >= 1, f"the script's sends never failed: {out}"
    _sync(env)
    _assert_delivered(server, run_id, n)


def test_offline_mode_sends_nothing_until_sync(server, tmp_path):
    n = 120
    env = _env(server, tmp_path / "trainer", WHILEAI_MODE="offline")
    server.start()
    done = _python([str(_script(tmp_path)), str(n)], env)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.split()[0]
    said = [line for line in done.stderr.splitlines() if line.startswith("whileai:")]
    assert len(said) == 1 and "WHILEAI_MODE=offline" in said[0], done.stderr
    assert server.get("/runs")["runs"] == [], "nothing reached the server before sync"
    another = _python([str(_script(tmp_path)), "2"], _env(server, tmp_path / "trainer"))  # an online run's send
    assert another.returncode == 0 and "finished True" in another.stdout, another.stderr
    assert [r["id"] for r in server.get("/runs")["runs"]] == [another.stdout.split()[0]], "held until sync"
    report = _sync(env).stdout
    assert f"delivered {n} points" in report, report
    _assert_delivered(server, run_id, n)


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(f"the script exited with {proc.returncode} before {path.name}:\n{proc.stderr.read()}")
        if time.monotonic() > deadline:
            pytest.fail(f"the script did not reach {path.name} in {timeout} s")
        time.sleep(0.02)
