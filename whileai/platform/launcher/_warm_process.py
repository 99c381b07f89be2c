"""The warm process (see ``_warm`` for what it is and how the launcher uses it): preload, serve launches on the
data root's socket, fork each job (``_child``) and each ``python -m whileai`` command (``_command_child``).

    python -m whileai.platform.launcher._warm_process DATA_ROOT FINGERPRINT PADDING
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import os
import select
import signal
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

from whileai.platform import defaults
from whileai.platform.launcher import _warm_install
from whileai.platform.launcher._warm import _folder, _names, _through, open_lock

__all__ = ["main"]

_REQUEST_MAX_BYTES = 4 * 2**20


def _rename(words: list[str], cut: bool = False) -> None:
    """Rewrite this process's command line (``/proc/self/cmdline``) to ``python *words`` (the worker's, or a forked
    command's), in the room the padding left; past it, ValueError, or with ``cut`` the line cut to fit, ``...``
    at its end."""
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end: fields 48 and 49 of proc(5)
    line = b"\0".join(part.encode() for part in [sys.executable, *words]) + b"\0"
    if len(line) > end - start and cut:
        line = line[: end - start - 4] + b"...\0"
    if len(line) > end - start:
        raise ValueError(f"the command line ({len(line)} bytes) does not fit in {end - start}")
    with open("/proc/self/mem", "r+b", buffering=0) as mem:
        mem.seek(start)
        mem.write(line.ljust(end - start, b"\0"))


def _own_session() -> None:
    """A fork's start: a session and process group of its own (a stop's ``killpg`` reaches it alone), and the
    default signal handlers back (the warm process's own are not the fork's)."""
    os.setsid()
    for signum in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _drop_own_modules() -> None:
    """Forget whileai's modules, so the fork imports them afresh: the code on disk now, not at warm-up."""
    for name in [m for m in sys.modules if m == "whileai" or m.startswith("whileai.")]:
        del sys.modules[name]


def _child(request: dict[str, Any], keep_out: list[int], renamed: int) -> None:
    """The forked job: set up as a cold worker would be, run the worker module, exit. Never returns.

    It writes to ``renamed`` once it is the job to a reader of /proc (its command line, streams, folder and
    environment): the warm process hands out its pid only then, so no reader takes a job that is still starting
    for a dead one or reads the warm process's folder as the job's. A child that fails before then exits, which
    closes ``renamed`` and hands the pid out all the same (its log says why).
    """
    from whileai.core.launch import WORKER_MODULE

    code = 1
    try:
        _close(keep_out)
        _own_session()
        _rename(["-m", WORKER_MODULE, *request["args"]])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        out = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(null)
        os.close(out)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.write(renamed, b"1")
        os.close(renamed)
        if os.environ.get("PYTHONUNBUFFERED"):
            sys.stdout.reconfigure(write_through=True)  # type: ignore[union-attr]
        sys.argv = [WORKER_MODULE, *request["args"]]
        _drop_own_modules()
        code = _run_module(WORKER_MODULE)
    except BaseException:  # noqa: BLE001 - the job's log says why it could not start
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _run_module(name: str) -> int:
    """Run module ``name`` as ``__main__`` (``python -m name``) and end as an interpreter would: threads joined, atexit
    handlers run."""
    import atexit
    import runpy
    import traceback

    code = 0
    try:
        runpy.run_module(name, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - as the interpreter does: the traceback, exit 1
        traceback.print_exc()
        code = 1
    with contextlib.suppress(BaseException):
        threading._shutdown()  # type: ignore[attr-defined]  # the interpreter's own wait for non-daemon threads
    atexit._run_exitfuncs()
    return code


def _reap(children: set[int]) -> None:
    while children:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        children.discard(pid)


def _peer_is_me(conn: socket.socket) -> bool:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1] == os.getuid()


def _read(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """The request, and the file descriptors sent with it (a forked command's standard streams; none otherwise)."""
    data, fds = b"", []
    try:
        while not data.endswith(b"\n") and len(data) < _REQUEST_MAX_BYTES:
            chunk, more, _, _ = socket.recv_fds(conn, 65536, 3)
            fds += more
            if not chunk:
                break
            data += chunk
        request: dict[str, Any] = json.loads(data)
    except BaseException:
        _close(fds)
        raise
    return request, fds


def _close(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _left_behind(install: _warm_install.Install, conn: socket.socket) -> bool:
    """Whether a distribution this process has imported from was upgraded, removed or reinstalled since; if so the
    request gets ``stale`` (a command runs in its own interpreter, a job starts cold and a fresh warm process
    starts) and this process is to end, so that no fork pairs new code with an old library in memory."""
    moved = _warm_install.changed(install)
    if moved is None:
        return False
    conn.sendall(json.dumps({"stale": True}).encode() + b"\n")
    print(f"warm worker: {moved} has changed since it was imported; exiting", flush=True)
    return True


def _serve(root: Path, mine: str, install: _warm_install.Install, server: socket.socket, keep_out: list[int]) -> None:
    children: set[int] = set()
    last = time.monotonic()
    while True:
        _reap(children)
        if not root.is_dir() or (not children and time.monotonic() - last > defaults.WARM_IDLE_S):
            return
        try:
            conn, _ = server.accept()
        except TimeoutError:
            continue
        last = time.monotonic()
        with conn:
            conn.settimeout(defaults.WARM_REPLY_S)
            fds: list[int] = []
            try:
                if not _peer_is_me(conn):
                    continue
                request, fds = _read(conn)
                if _left_behind(install, conn):
                    return
                if _answer(request, mine, conn, [*keep_out, conn.fileno()], children, fds) == "exit":
                    return
            except (OSError, ValueError) as exc:
                print(f"warm worker: a request failed: {type(exc).__name__}: {exc}", flush=True)
            finally:
                _close(fds)  # a forked command has its own copies


def _answer(request: dict[str, Any], mine: str, conn: socket.socket, keep_out: list[int], children: set[int],
            fds: list[int]) -> str | None:
    """Answer one request: ``exit`` when this warm process should end (asked to, or a launch of another install)."""
    op = request.get("op")
    if op == "ping":
        conn.sendall(json.dumps({"warm": os.getpid(), "fingerprint": mine}).encode() + b"\n")
        return None
    if op == "cli" and request.get("fingerprint") != mine:  # the command runs in its own interpreter; the jobs decide
        conn.sendall(json.dumps({"stale": True, "warm": os.getpid()}).encode() + b"\n")  # whether this process stays
        return None
    if op == "stop" or (op == "start" and request.get("fingerprint") != mine):
        conn.sendall(json.dumps({"stale": op == "start", "warm": os.getpid()}).encode() + b"\n")
        return "exit"
    if op == "cli" and len(fds) == 3 and isinstance(request.get("argv"), list) and isinstance(request.get("env"), dict):
        _fork_command(request, conn, keep_out, children, fds)
        return None
    if op != "start" or not isinstance(request.get("args"), list) or not isinstance(request.get("env"), dict):
        conn.sendall(json.dumps({"error": f"not a request the warm worker takes: {op!r}"}).encode() + b"\n")
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    ready, renamed = os.pipe()
    pid = os.fork()
    if pid == 0:
        _child(request, [*keep_out, ready], renamed)
    children.add(pid)
    os.close(renamed)
    try:  # its pid goes out once its command line names the job (or it has already failed)
        select.select([ready], [], [], defaults.WARM_RENAME_S)
    finally:
        os.close(ready)
    conn.sendall(json.dumps({"pid": pid, "warm": os.getpid()}).encode() + b"\n")
    print(f"warm worker: job {' '.join(request['args'])} started as pid {pid}", flush=True)
    return None


def _fork_command(request: dict[str, Any], conn: socket.socket, keep_out: list[int], children: set[int],
                  fds: list[int]) -> None:
    """Fork a ``python -m whileai`` command (warm_cli.py); it starts once its pid has gone to the caller."""
    sys.stdout.flush()
    sys.stderr.flush()
    go, started = os.pipe()
    pid = os.fork()
    if pid == 0:
        _command_child(request, fds, conn, [k for k in keep_out if k != conn.fileno()] + [started], go)
    children.add(pid)
    os.close(go)
    try:
        conn.sendall(json.dumps({"pid": pid, "warm": os.getpid()}).encode() + b"\n")
    finally:
        os.write(started, b"1")
        os.close(started)
    print(f"warm worker: command `whileai {' '.join(map(str, request['argv'][:1]))}` started as pid {pid}", flush=True)


def _watch_caller(conn: socket.socket) -> None:
    """End this command (SIGTERM) when the command line that asked for it is gone (its socket closed)."""
    def watch() -> None:
        with contextlib.suppress(OSError):
            while conn.recv(4096):
                pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="whileai-cli-caller", daemon=True).start()


def _command_child(request: dict[str, Any], fds: list[int], conn: socket.socket, keep_out: list[int], go: int) -> None:
    """The forked command: take the caller's streams, folder and environment, run ``whileai.__main__``, send the
    exit code back and exit. Never returns. It starts once ``go`` is written (its pid has gone out first)."""
    code = 1
    try:
        _close(keep_out)
        os.read(go, 1)
        os.close(go)
        _own_session()
        with contextlib.suppress(ValueError, OSError):
            _rename(["-m", "whileai", *request["argv"]], cut=True)  # what ps and /proc show
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[defaults.WARM_CLI_ENV] = "0"  # this process is the command: it hands itself to nobody
        sys.stdout.reconfigure(line_buffering=os.isatty(1), write_through=bool(os.environ.get("PYTHONUNBUFFERED")))  # type: ignore[union-attr]
        sys.argv = ["whileai", *request["argv"]]
        if sys.path:  # ``python -m`` puts the caller's folder first (a python: reward's module is found there)
            sys.path[0] = str(request.get("path0") or request["cwd"])
        _drop_own_modules()
        conn.settimeout(None)  # the warm process's reply deadline is not the command's: it runs as long as it needs
        _watch_caller(conn)
        code = _run_module("whileai")
    except BaseException:  # noqa: BLE001 - the caller's terminal says why
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        with contextlib.suppress(BaseException):
            conn.sendall(json.dumps({"exit": code}).encode() + b"\n")
        os._exit(code)


def main(argv: list[str] | None = None) -> int:
    """``python -m whileai.platform.launcher._warm_process DATA_ROOT FINGERPRINT PADDING``: the warm process."""
    import importlib

    root_arg, mine = (sys.argv[1:] if argv is None else argv)[:2]
    root = Path(root_arg)
    lock = open_lock(root)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # another warm process serves this data root
    began = time.monotonic()
    for entry in defaults.WARM_PRELOAD:
        module, _, attribute = entry.partition(":")
        loaded = importlib.import_module(module)
        if attribute:
            getattr(loaded, attribute)
    for module in defaults.WARM_PRELOAD_OWN:  # for the libraries they import; each job imports whileai afresh
        importlib.import_module(module)
    install = _warm_install.loaded()  # before the freeze: reading the metadata leaves garbage
    # What was imported stays for good: frozen out of the collector, a forked job's full collections (accelerate
    # calls one as each trainer starts; the interpreter runs its own) walk the job's objects only, not the
    # libraries' (0.4 s a collection measured on 2 cores), and touch none of the shared pages (no copy-on-write)
    gc.collect()
    gc.freeze()
    threads = len(os.listdir("/proc/self/task"))
    print(f"warm worker {os.getpid()} for {root}: imported {', '.join(defaults.WARM_PRELOAD)} and whileai's job modules in "
          f"{time.monotonic() - began:.1f} s ({threads} native threads, {len(install)} distributions)", flush=True)
    folder, sock_name = _folder(), _names(root)[0]  # the folder stays open: the socket is bound and removed through it
    with contextlib.suppress(FileNotFoundError):
        os.unlink(sock_name, dir_fd=folder)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        server.bind(_through(folder, sock_name))
    finally:
        os.umask(old)
    server.listen(16)
    server.settimeout(1.0)
    try:
        _serve(root, mine, install, server, [server.fileno(), lock, folder])
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(sock_name, dir_fd=folder)  # still ours: a successor binds only once this process has let the lock go
        server.close()
        print(f"warm worker {os.getpid()}: exiting", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
