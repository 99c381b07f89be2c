"""The platform server's memory: opening a big run's page, and unauthenticated 60 MB posts.

    python benchmarks/server_memory.py [--names 1000] [--points 10000] [--posts 32] [--post-mb 60]

Builds a run of NAMES metric names x POINTS points (every point carries every
name) in a fresh SQLite store, starts ``python -m whileai platform`` over it,
and measures the server process's RSS (``/proc/PID/status``):

1. idle, then the peak (VmHWM, reset first through ``/proc/PID/clear_refs``)
   while ``/page-data/runs/{id}`` (what the run page loads) is answered;
2. idle again, then the peak while POSTS connections each send a 60 MB body
   without a key, to ``/signin`` (a form that takes no key) and to the points route.

Targets (issue 19): the page under 300 MB peak; the posts under 100 MB above idle.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from whileai.platform.store import Store  # noqa: E402


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _status(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def build(store_url: str, names: int, points: int) -> tuple[str, str, float]:
    store = Store(store_url)
    account, key = store.create_account("bench")
    run = store.create_run(account, name=f"{names} names x {points} points")["id"]
    t0 = time.perf_counter()
    batch = 500
    for start in range(0, points, batch):
        rows = [{"step": i, "ts": float(i), "metrics": {f"metric/{j:04d}": (i * 7 + j) % 1000 / 1000.0
                                                        for j in range(names)}}
                for i in range(start, min(points, start + batch))]
        store.add_points(account, run, f"b{start}", rows)
    store.close()
    return key, run, time.perf_counter() - t0


def _unauth_post(port: int, path: str, size: int, answers: list[str]) -> None:
    chunk = b"\0" * (1024 * 1024)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            sock.sendall(f"POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {size}\r\n\r\n".encode())
            sent = 0
            try:
                while sent < size:
                    sock.sendall(chunk)
                    sent += len(chunk)
            except OSError:
                pass  # the server answered and closed: what is left was never read
            answers.append(sock.recv(200).decode("latin-1").split("\r\n")[0])
    except OSError as exc:
        answers.append(f"error {exc}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--names", type=int, default=1000)
    p.add_argument("--points", type=int, default=10_000)
    p.add_argument("--posts", type=int, default=32)
    p.add_argument("--post-mb", type=int, default=60)
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="wai-mem-"))
    store_url = f"sqlite:///{root / 'platform.db'}"
    key, run, took = build(store_url, args.names, args.points)
    print(f"built {args.names} names x {args.points} points in {took:.1f} s "
          f"({(root / 'platform.db').stat().st_size / 1e6:.0f} MB store)")
    port = _free_port()
    env = {**os.environ, "WHILEAI_HOME": str(root)}
    env.pop("WHILEAI_STORE_URL", None)
    log = open(root / "server.log", "wb")
    server = subprocess.Popen([sys.executable, "-m", "whileai", "platform", "--port", str(port),
                               "--store-url", store_url], env=env, stdout=log, stderr=subprocess.STDOUT)
    auth = {"Authorization": f"Bearer {key}"}
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{url}/api/v1/me", headers=auth, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        time.sleep(1.0)
        pid = server.pid
        idle = _status(pid, "VmRSS")
        _reset_peak(pid)
        t0 = time.perf_counter()
        page = httpx.get(f"{url}/page-data/runs/{run}", headers=auth, timeout=600)
        took = time.perf_counter() - t0
        peak = _status(pid, "VmHWM")
        print(f"page: {page.status_code}, {len(page.content) / 1e6:.1f} MB answer in {took:.1f} s; server idle "
              f"{idle:.0f} MB, peak {peak:.0f} MB (target < 300 MB): {'PASS' if peak < 300 else 'FAIL'}")
        for path in ("/signin", f"/api/v1/runs/{run}/points"):  # the sign-in form takes no key; points need one
            time.sleep(1.0)
            idle = _status(pid, "VmRSS")
            _reset_peak(pid)
            answers: list[str] = []
            threads = [threading.Thread(target=_unauth_post, args=(port, path, args.post_mb * 1024 * 1024, answers))
                       for _ in range(args.posts)]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            peak = _status(pid, "VmHWM")
            print(f"{args.posts} x {args.post_mb} MB unauthenticated posts to {path.replace(run, '{run}')} in "
                  f"{time.perf_counter() - t0:.1f} s: {sorted(set(answers))}; server idle {idle:.0f} MB, peak "
                  f"{peak:.0f} MB, +{peak - idle:.0f} MB (target < +100 MB): {'PASS' if peak - idle < 100 else 'FAIL'}")
    finally:
        server.terminate()
        server.wait(30)
        log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
