"""Ingestion: points per second for one 100,000-point flush, over HTTP on loopback and embedded.

    python benchmarks/tracking_ingest.py                 # 100,000 points, 10 metrics each
    python benchmarks/tracking_ingest.py --points 20000 --repeat 1

Each point carries 10 metrics (a Trainer's usual log line). The points are
logged into a run with ``run.log`` and then sent by one ``run.flush()``, which
is what is timed:

- HTTP: a ``python -m whileai platform`` server in its own process on a free
  loopback port (as a user runs it), reached through the network client;
- embedded: the same app in this process (no server), the default with
  nothing configured.

The baseline, measured in the same run on the same kind of store, is
``Store.add_points`` called directly with the same batches: the store's own
speed with no client, no JSON over the wire and no HTTP. The ratios say what
the path from ``flush`` to the store costs on top of it. Target: 50,000
points/s or more over HTTP on loopback.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

TARGET_POINTS_PER_S = 50_000
METRICS = ["loss", "learning_rate", "grad_norm", "epoch", "mean_token_accuracy",
           "num_tokens", "entropy", "eval_loss", "kl", "reward"]


def _log_points(run, n: int) -> None:
    for step in range(n):
        x = step * 1e-5
        run.log(step=step, loss=2.0 - x, learning_rate=2e-4, grad_norm=1.0 + x, epoch=x,
                mean_token_accuracy=0.5 + x, num_tokens=float(step * 128), entropy=1.5, eval_loss=2.1 - x,
                kl=0.01 + x, reward=0.25 + x)


def _timed_flush(run) -> float:
    started = time.perf_counter()
    ok = run.flush()
    elapsed = time.perf_counter() - started
    if not ok:
        raise SystemExit(f"flush left points unsent ({run.errors} errors: {run._tracker.last_error})")
    return elapsed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(home: Path) -> tuple[subprocess.Popen, str, str]:
    import httpx

    port = _free_port()
    env = {**os.environ, "WHILEAI_HOME": str(home)}
    env.pop("WHILEAI_BASE_URL", None)
    env.pop("WHILEAI_API_KEY", None)
    proc = subprocess.Popen([sys.executable, "-m", "whileai", "platform", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        key_file = home / "local_key"
        if key_file.exists():
            key = key_file.read_text().strip()
            try:
                if httpx.get(f"{base_url}/api/v1/me", headers={"Authorization": f"Bearer {key}"}, timeout=2).status_code == 200:
                    return proc, base_url, key
            except httpx.HTTPError:
                pass
        if proc.poll() is not None:
            raise SystemExit("the platform server exited at start")
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("the platform server did not start within 120 s")


def _baseline(n: int, batch: int) -> float:
    """Store.add_points directly, same batches, same kind of store (a fresh SQLite file)."""
    from whileai.platform.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{tmp}/platform.db")
        account, _key = store.create_account("bench")
        run_id = store.create_run(account, name="baseline")["id"]
        now = time.time()
        points = [{"step": s, "metrics": {m: 1.0 + s * 1e-5 for m in METRICS}, "ts": now} for s in range(n)]
        started = time.perf_counter()
        for i in range(0, n, batch):
            store.add_points(account, run_id, uuid.uuid4().hex, points[i:i + batch])
        elapsed = time.perf_counter() - started
        assert store.count_points(account, run_id) == n
        store.close()
    return elapsed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--points", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=3, help="flushes per path; the median is reported")
    args = p.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["WHILEAI_HOME"] = str(Path(tmp) / "client")
        os.environ.pop("WHILEAI_BASE_URL", None)
        os.environ.pop("WHILEAI_API_KEY", None)
        from whileai.domain import defaults
        from whileai.domain.client import get_client
        from whileai.domain.tracking import TrainingRun

        defaults.FLUSH_INTERVAL_S = 3600.0  # the timed flush sends everything; no background send competes
        defaults.TRACKING_TIMEOUT_S = 120.0
        n, batch = args.points, defaults.FLUSH_BATCH_POINTS
        print(f"{n:,} points x {len(METRICS)} metrics, batches of {batch:,} (FLUSH_BATCH_POINTS)")

        base = [_baseline(n, batch) for _ in range(args.repeat)]
        base_rate = n / statistics.median(base)
        print(f"baseline  Store.add_points direct : {base_rate:>10,.0f} points/s  (median of {args.repeat})")

        results = {}
        server, base_url, key = _start_server(Path(tmp) / "server")
        try:
            for label, client in (("http", get_client(api_key=key, base_url=base_url)), ("embedded", get_client())):
                times = []
                for _ in range(args.repeat):
                    run = TrainingRun(client.request("POST", "/runs", json={"name": f"ingest-{label}"}), client)
                    _log_points(run, n)
                    times.append(_timed_flush(run))
                    stored = len(client.request("GET", f"/runs/{run.id}/points")["points"])
                    if stored != n:
                        raise SystemExit(f"{label}: stored {stored} of {n} points")
                rate = n / statistics.median(times)
                results[label] = rate
                print(f"{label:<9} flush -> store        : {rate:>10,.0f} points/s  "
                      f"(median of {args.repeat}; {rate / base_rate:.2f}x the baseline)")
        finally:
            server.terminate()
            server.wait(timeout=30)

    verdict = "meets" if results["http"] >= TARGET_POINTS_PER_S else "MISSES"
    print(f"HTTP on loopback {verdict} the target of {TARGET_POINTS_PER_S:,} points/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
