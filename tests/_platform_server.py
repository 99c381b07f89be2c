"""``python -m whileai platform`` as a real process on a free loopback port, for the tests that need the command.

Tests that only need the app in-process use ``whileai.platform.server.serve_in_thread``; these start the
command itself (its start-up, its signal handling, its log, its open-file limit).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]

#: seconds the command has to answer: its imports and the store's upgrade on a loaded CPU
START_S = 120.0


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers(port: int) -> bool:
    """Whether a platform on ``port`` serves its sign-in page (the last thing it sets up before serving)."""
    try:
        return httpx.get(f"http://127.0.0.1:{port}/signin", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def platform_process(home: Path, log: Path, *args: str, env: dict[str, str] | None = None, unset: tuple[str, ...] = (),
                     preexec_fn: Callable[[], None] | None = None) -> Iterator[tuple[subprocess.Popen, str]]:
    """The platform on data root ``home`` with extra command-line ``args``, its output in ``log``: ``(process, base
    URL)`` once it answers. Stopped with SIGINT (as Ctrl-C) on the way out, killed if it outlives 30 s of that.

    WHILEAI_STORE_URL and the names in ``unset`` are left out of its environment (so it serves the data
    root's store, unless ``args`` name ``--store-url``); ``env`` adds to it.
    """
    port = free_port()
    full = {**os.environ, "WHILEAI_HOME": str(home), "PYTHONUNBUFFERED": "1", **(env or {})}
    for name in ("WHILEAI_STORE_URL", *unset):
        full.pop(name, None)
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "whileai", "platform", "--port", str(port), *args], env=full,
                                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, preexec_fn=preexec_fn)
    try:
        deadline = time.monotonic() + START_S
        while not answers(port):
            assert proc.poll() is None, f"the platform exited with {proc.returncode}:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"the platform did not answer in {START_S:g} s:\n{log.read_text()[-3000:]}"
            time.sleep(0.2)
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
