"""The warm process (see ``_warm`` for what it is and how the launcher uses it): preload, serve launches on the
data root's socket, fork each job (``_child``) and each ``python -m whileai`` command (``_command_child``), reap
them and say how each ended (``_ended``).

    WHILEAI_WARM_PRELOAD=MODULE,... python -m whileai.platform.launcher._warm_process DATA_ROOT FINGERPRINT

The MODULEs (WARM_PRELOAD_ENV) are whileai's own modules of the layers above the platform, named by whoever started
this process (``_warm.preload``): imported once for the libraries they pull in.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple, TypedDict

from whileai.platform import defaults
from whileai.platform.launcher import _pids, _warm_install
from whileai.platform.launcher._warm import _folder, _names, _through, open_lock

__all__ = ["main"]

_REQUEST_MAX_BYTES = 4 * 2**20


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


def _child(request: dict[str, Any], keep_out: list[int]) -> None:
    """The forked job: set up as a cold worker would be, run the job's module (``module`` of the request, the
    launch's ``python -m`` target), exit. Never returns. The job is known by its pid and start time, not by its
    command line, which stays the warm process's."""
    module = str(request["module"])
    code = 1
    try:
        _close(keep_out)
        _own_session()
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
        if os.environ.get("PYTHONUNBUFFERED"):
            sys.stdout.reconfigure(write_through=True)  # type: ignore[union-attr]
        sys.argv = [module, *request["args"]]
        _drop_own_modules()
        code = _run_module(module)
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


class _Kept(NamedTuple):
    """What the warm process keeps of a child until it is reaped: a job's folder (where it notes how the job ended)
    or a command's socket to its caller (where it says so when the command was killed before it could)."""

    folder: str | None = None
    caller: socket.socket | None = None


def _reap(children: dict[int, _Kept]) -> None:
    """Reap every child that has ended, and say how each ended (``_ended``)."""
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        kept = children.pop(pid, None)
        if kept is not None:
            _ended(pid, status, kept)


def _ended(pid: int, status: int, kept: _Kept) -> None:
    """A job's end noted in its folder (``_pids.note_exit``, which the reconciler reads); a command killed by a
    signal told to its caller (a command that ended on its own has sent its exit code itself)."""
    if kept.folder is not None:
        _pids.note_exit(kept.folder, pid, status)
    if kept.caller is not None:
        with kept.caller, contextlib.suppress(OSError):
            if os.WIFSIGNALED(status):
                answer = {"killed": _pids.exit_words(status), "signal": os.WTERMSIG(status)}
                kept.caller.sendall(json.dumps(answer).encode() + b"\n")
    print(f"warm worker: pid {pid} {_pids.exit_words(status)}", flush=True)


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
    children: dict[int, _Kept] = {}
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
                held = [kept.caller.fileno() for kept in children.values() if kept.caller is not None]
                if _answer(request, mine, conn, [*keep_out, *held, conn.fileno()], children, fds) == "exit":
                    return
            except (OSError, ValueError) as exc:
                print(f"warm worker: a request failed: {type(exc).__name__}: {exc}", flush=True)
            finally:
                _close(fds)  # a forked command has its own copies


def _answer(request: dict[str, Any], mine: str, conn: socket.socket, keep_out: list[int], children: dict[int, _Kept],
            fds: list[int]) -> str | None:
    """Answer one request: ``exit`` when this warm process should end (asked to, or a launch of another install)."""
    op = request.get("op")
    if op == "ping":
        answer = {"warm": os.getpid(), "fingerprint": mine, **_threads()}
        conn.sendall(json.dumps(answer).encode() + b"\n")
        return None
    if op == "cli" and request.get("fingerprint") != mine:  # the command runs in its own interpreter; the jobs decide
        conn.sendall(json.dumps({"stale": True, "warm": os.getpid()}).encode() + b"\n")  # whether this process stays
        return None
    if op == "stop" or (op == "start" and request.get("fingerprint") != mine):
        conn.sendall(json.dumps({"stale": op == "start", "warm": os.getpid()}).encode() + b"\n")
        return "exit"
    if op == "cli" and len(fds) == 3 and _takes(request, "argv", "module"):
        _fork_command(request, conn, keep_out, children, fds)
        return None
    if op != "start" or not _takes(request, "args", "module"):
        conn.sendall(json.dumps({"error": f"not a request the warm worker takes: {op!r}"}).encode() + b"\n")
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _child(request, keep_out)
    children[pid] = _Kept(folder=str(request["cwd"]))
    # the child is not reaped before the next request, so its start time is there to read even if it has ended
    conn.sendall(json.dumps({"pid": pid, "started": _pids.start_time(pid), "warm": os.getpid()}).encode() + b"\n")
    print(f"warm worker: job {' '.join(request['args'])} started as pid {pid}", flush=True)
    return None


def _takes(request: dict[str, Any], listed: str, module: str) -> bool:
    """Whether ``request`` has what a fork needs: a list ``listed``, a module name ``module``, an environment."""
    return (isinstance(request.get(listed), list) and isinstance(request.get(module), str)
            and isinstance(request.get("env"), dict) and isinstance(request.get("cwd"), str))


class _Threads(TypedDict):
    """The threads a process runs (``_threads``): how many Python threads, and the native ones' names."""

    python_threads: int
    native_threads: list[str]


def _threads() -> _Threads:
    """The threads this process runs, which every fork starts from: Python's (only the main one, so no lock a
    thread holds is copied held), and the native ones by id and name (the libraries' own pools; ``_warm`` says
    which there are and why forking with them is safe)."""
    native = {tid: Path(f"/proc/self/task/{tid}/comm").read_text().strip() for tid in os.listdir("/proc/self/task")}
    return {"python_threads": threading.active_count(), "native_threads": sorted(native.values())}


def _fork_command(request: dict[str, Any], conn: socket.socket, keep_out: list[int], children: dict[int, _Kept],
                  fds: list[int]) -> None:
    """Fork a ``python -m whileai`` command (warm_cli.py); it starts once its pid has gone to the caller. The caller's
    socket is kept until the command is reaped, to say so where it was killed (``_ended``)."""
    sys.stdout.flush()
    sys.stderr.flush()
    go, started = os.pipe()
    pid = os.fork()
    if pid == 0:
        _command_child(request, fds, conn, [k for k in keep_out if k != conn.fileno()] + [started], go)
    children[pid] = _Kept(caller=conn.dup())
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
    """The forked command: take the caller's streams, folder and environment, run the caller's module (``module`` of
    the request, ``whileai``) as ``python -m`` would, send the exit code back and exit. Never returns. It starts once
    ``go`` is written (its pid has gone out first)."""
    module = str(request["module"])
    code = 1
    try:
        _close(keep_out)
        os.read(go, 1)
        os.close(go)
        _own_session()
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[defaults.WARM_CLI_ENV] = "0"  # this process is the command: it hands itself to nobody
        sys.stdout.reconfigure(line_buffering=os.isatty(1), write_through=bool(os.environ.get("PYTHONUNBUFFERED")))  # type: ignore[union-attr]
        sys.argv = [module, *request["argv"]]
        if sys.path:  # ``python -m`` puts the caller's folder first (a python: reward's module is found there)
            sys.path[0] = str(request.get("path0") or request["cwd"])
        _drop_own_modules()
        conn.settimeout(None)  # the warm process's reply deadline is not the command's: it runs as long as it needs
        _watch_caller(conn)
        code = _run_module(module)
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


def _preload(asked: list[str]) -> str:
    """Import the libraries (WARM_PRELOAD), the platform's modules a job reports through (WARM_PRELOAD_OWN) and the
    modules of the layers above that this process's starter named (``asked``), each job importing whileai afresh.
    What was imported, in words."""
    import importlib

    for entry in defaults.WARM_PRELOAD:
        module, _, attribute = entry.partition(":")
        loaded = importlib.import_module(module)
        if attribute:
            getattr(loaded, attribute)
    for module in (*defaults.WARM_PRELOAD_OWN, *asked):  # for the libraries they import
        importlib.import_module(module)
    return f"{', '.join(defaults.WARM_PRELOAD)}, {', '.join(defaults.WARM_PRELOAD_OWN + tuple(asked))}"


def main(argv: list[str] | None = None) -> int:
    """``python -m whileai.platform.launcher._warm_process DATA_ROOT FINGERPRINT``: the warm process."""
    root_arg, mine = (sys.argv[1:] if argv is None else argv)[:2]
    asked = [name for name in os.environ.pop(defaults.WARM_PRELOAD_ENV, "").split(",") if name]
    root = Path(root_arg)
    lock = open_lock(root)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # another warm process serves this data root
    began = time.monotonic()
    imported = _preload(asked)
    install = _warm_install.loaded()  # before the freeze: reading the metadata leaves garbage
    # What was imported stays for good: frozen out of the collector, a forked job's full collections (accelerate
    # calls one as each trainer starts; the interpreter runs its own) walk the job's objects only, not the
    # libraries' hundreds of thousands, and touch none of the shared pages (no copy-on-write)
    gc.collect()
    gc.freeze()
    print(f"warm worker {os.getpid()} for {root}: imported {imported} in {time.monotonic() - began:.1f} s "
          f"({_threads()}, {len(install)} distributions)", flush=True)
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
