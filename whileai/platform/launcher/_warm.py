"""The warm worker: one process per data root that has torch, transformers, TRL and PEFT imported and forks each
local job from there, so a job starts in milliseconds instead of paying those imports (WARM_PRELOAD).

The launcher asks it over a Unix socket in a folder only this user can open (its peer's uid is checked too) for
one job: the worker module's arguments, the job's environment, its folder and its log. The warm process forks;
the child, before any job code runs, leads a session of its own (its own pid and process group, so a stop's
``killpg`` and a SIGKILL reach that job only), points stdin at /dev/null and stdout and stderr at the job's log,
moves to the job's folder, replaces its whole environment with the job's (threads, the hub's offline switch, the
job's key), puts back the default signal handlers, and rewrites its command line to ``python -m
whileai.jobs.worker JOB_ID``, which is what :func:`whileai.platform.launcher.jobs.job_processes` and the
reconciler find a job by. It then runs the worker module as ``__main__`` and exits the way an interpreter does
(non-daemon threads joined, atexit handlers run). A job that crashes or is SIGKILLed ends alone; the warm process
reaps it and serves the next launch.

Forking is safe because the warm process only imports: no tensor op runs there, so torch's OpenMP pool is never
started (the one native thread an import leaves, OpenBLAS's, is re-made after a fork by OpenBLAS itself), and the
job sets its own torch threads after the fork.

The warm process keeps none of whileai's own modules for a job: the child drops them before it runs the worker,
which imports them afresh from disk, so an edited source file is what runs (the warm process imports the job's
modules once, WARM_PRELOAD_OWN, only so that the libraries they pull in are loaded before the fork). Everything it
imported is frozen out of the garbage collector before the first fork. It carries a fingerprint
(:func:`fingerprint`): the versions and install times of WARM_FINGERPRINT_DISTS, the interpreter, and the
environment read at import time (WARM_IMPORT_ENV_PREFIXES). A launch whose fingerprint differs gets ``stale`` back; the old process exits and a
fresh one starts. It exits on its own after WARM_IDLE_S with no job running, or when its data root is gone.
WARM_HOME_ENV lets several data roots share one warm process (each job's environment, its data root included,
comes with its launch).

It forks ``python -m whileai`` commands too (``op: cli``, sent by warm_cli.py with the caller's three standard
streams as descriptors): ``_fork_command`` and ``_command_child`` set such a fork up as the caller's own process
(its streams, folder, environment and ``sys.path[0]``) and send its exit code back over the caller's socket.

The first launch in a data root starts the warm process in the background and starts that job cold (the launch
does not wait for the imports: a launch answers within the client's deadline); later launches fork. WARM_WORKER_ENV
turns it off. Only one-process jobs are forked: torchrun starts each rank itself, as ``python -m`` of the worker
under its own elastic agent, which must be each rank's parent to watch and end it.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import hashlib
import json
import os
import select
import signal
import site
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from whileai.core.paths import data_root, setting
from whileai.platform import defaults

__all__ = ["enabled", "fingerprint", "launch_env", "start_job", "warm_pid", "shutdown", "wait_ready", "main"]

#: the keys a launch never hands the warm process's own environment (they are the job's)
_JOB_KEYS = ("WHILEAI_API_KEY", "WHILEAI_JOB_ID", defaults.STORE_URL_ENV, "WHILEAI_BASE_URL")
_REQUEST_MAX_BYTES = 4 * 2**20


def enabled() -> bool:
    """Whether local jobs start from the warm worker: on unless WARM_WORKER_ENV (or ``warm_worker`` in the data
    root's config.json) says 0, false, off or no; and only on Linux, where the forked job can be renamed."""
    value = setting(defaults.WARM_WORKER_ENV, "warm_worker").lower()
    return sys.platform.startswith("linux") and value not in ("0", "false", "off", "no")


def _folder() -> Path:
    """``<tmp>/whileai-<uid>/``, this user's only (a socket path must stay under 108 bytes, which a data root's
    may not)."""
    folder = Path(tempfile.gettempdir()) / f"whileai-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    info = folder.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise PermissionError(f"{folder} is not this user's own folder (mode {info.st_mode & 0o777:o}); remove it")
    return folder


def _home() -> Path:
    """The folder whose warm process serves this data root: WARM_HOME_ENV's, else the data root."""
    named = os.environ.get(defaults.WARM_HOME_ENV, "").strip()
    return Path(named).expanduser() if named else data_root()


def _paths(root: Path) -> tuple[Path, Path]:
    """The socket and the lock file of ``root``'s warm process."""
    name = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    folder = _folder()
    return folder / f"warm-{name}.sock", folder / f"warm-{name}.lock"


def _import_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in sorted(env.items())
            if k.startswith(defaults.WARM_IMPORT_ENV_PREFIXES) and k not in defaults.WARM_IMPORT_ENV_IGNORED}


def fingerprint(env: dict[str, str] | None = None) -> str:
    """What the warm process's imports depend on: WARM_FINGERPRINT_DISTS' versions and install times, the
    interpreter, and ``env``'s import-time variables. A different value means a fresh warm process."""
    from importlib import metadata

    parts: list[Any] = [sys.executable, sys.version, _import_env(dict(os.environ if env is None else env))]
    # the installed distributions only, wherever this process stands: a relative sys.path entry (the cwd, '') would
    # find a source tree's egg-info from one folder and not from another
    places = [*site.getsitepackages(), site.getusersitepackages()]
    for name in defaults.WARM_FINGERPRINT_DISTS:
        dist = next(iter(metadata.distributions(name=name, path=places)), None)
        where = getattr(dist, "_path", None)
        parts.append([name, dist.version if dist else None,
                      os.stat(where).st_mtime_ns if where and os.path.exists(where) else None])
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


# ---------------------------------------------------------------------------
# The launcher's side
# ---------------------------------------------------------------------------


def _ask(path: Path, request: dict[str, Any], timeout: float) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        sock.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    if not data:
        raise ConnectionError("the warm worker closed the connection without an answer")
    answer: dict[str, Any] = json.loads(data)
    return answer


def _starting(lock: Path) -> bool:
    """Whether a warm process holds ``lock`` (it takes it first thing and keeps it for life)."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _spawn(root: Path, env: dict[str, str], print_to: Path) -> None:
    """Start ``root``'s warm process in the background (detached, like a cold worker)."""
    print_to.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    own = {k: v for k, v in env.items() if k not in _JOB_KEYS}
    with open(print_to, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", __name__, str(root), fingerprint(env), "-" * defaults.WARM_ARGV_PAD],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=own, cwd=str(root),
            start_new_session=True, close_fds=True)
    threading.Thread(target=proc.wait, name="whileai-warm-reap", daemon=True).start()


def start_job(args: list[str], env: dict[str, str], cwd: Path, log: Path) -> tuple[int | None, str]:
    """Start ``python -m whileai.jobs.worker *args`` forked from this data root's warm process.

    Returns ``(pid, how)``: the job's pid, or None where the caller starts the job cold, with the reason (no warm
    process yet, and one is now starting; a stale one, which is replaced; switched off; an error).
    """
    if not enabled():
        return None, f"the warm worker is off ({defaults.WARM_WORKER_ENV})"
    root = _home()
    try:
        sock, lock = _paths(root)
        wanted = fingerprint(env)
        request = {"op": "start", "fingerprint": wanted, "args": args, "env": env, "cwd": str(cwd), "log": str(log)}
        try:
            answer = _ask(sock, request, defaults.WARM_REPLY_S)
        except (FileNotFoundError, ConnectionRefusedError):
            answer = {"absent": True}
        if isinstance(answer.get("pid"), int):
            return answer["pid"], f"forked from the warm worker (pid {answer.get('warm')})"
        if answer.get("stale"):
            why = "the warm worker was of an older install; a fresh one is starting"
            deadline = time.monotonic() + defaults.JOB_STOP_WAIT_S
            while _starting(lock) and time.monotonic() < deadline:  # the old one lets its lock go as it exits
                time.sleep(0.05)
        else:
            why = answer.get("error") or "no warm worker was running for this data root; one is starting"
        if not _starting(lock):
            _spawn(root, env, root / "warm" / "warm.log")
        return None, str(why)
    except Exception as exc:  # a job always starts: cold where the warm path fails
        return None, f"the warm worker could not be reached ({type(exc).__name__}: {exc})"


def _ping(root: Path) -> dict[str, Any] | None:
    try:
        answer = _ask(_paths(root)[0], {"op": "ping"}, defaults.WARM_REPLY_S)
    except (OSError, ValueError):
        return None
    return answer if isinstance(answer.get("warm"), int) else None


def warm_pid(root: Path | None = None) -> int | None:
    """The pid of ``root``'s (default: this data root's) ready warm process, else None."""
    answer = _ping(root or _home())
    return int(answer["warm"]) if answer else None


def launch_env() -> dict[str, str]:
    """What a launch's environment holds at import time (``worker_env``): the environment a warm process started
    for this data root is fingerprinted with."""
    from ._shared import hub_env

    return {**defaults.JOB_ENV_DEFAULTS, **os.environ, **hub_env(), defaults.HOME_ENV: str(data_root())}


def wait_ready(timeout: float, env: dict[str, str] | None = None) -> int | None:
    """Start this data root's warm process if none of this install runs (one of an older install is told to exit),
    and wait up to ``timeout`` s for it to be ready; its pid, or None."""
    root = _home()
    _, lock = _paths(root)
    if env is None:
        env = launch_env()
    wanted = fingerprint(env)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = _ping(root)
        if answer and answer.get("fingerprint") == wanted:
            return int(answer["warm"])
        if answer:
            shutdown(root)
        elif not _starting(lock):
            _spawn(root, env, root / "warm" / "warm.log")
        time.sleep(0.1)
    return None


def shutdown(root: Path | None = None) -> bool:
    """Ask ``root``'s warm process to exit (its running jobs go on); whether one answered."""
    try:
        _ask(_paths(root or _home())[0], {"op": "stop"}, defaults.WARM_REPLY_S)
    except OSError:
        return False
    return True


# ---------------------------------------------------------------------------
# The warm process
# ---------------------------------------------------------------------------


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

    It writes to ``renamed`` once its command line names the job: the warm process hands out its pid only
    then, so no reader of /proc takes a job that is still starting for a dead one.
    """
    from whileai.core.launch import WORKER_MODULE

    code = 1
    try:
        _close(keep_out)
        _own_session()
        _rename(["-m", WORKER_MODULE, *request["args"]])
        os.write(renamed, b"1")
        os.close(renamed)
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


def _serve(root: Path, mine: str, server: socket.socket, keep_out: list[int]) -> None:
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
    """``python -m whileai.platform.launcher._warm DATA_ROOT FINGERPRINT PADDING``: the warm process."""
    import importlib

    root_arg, mine = (sys.argv[1:] if argv is None else argv)[:2]
    root = Path(root_arg)
    sock_path, lock_path = _paths(root)
    lock = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
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
    # What was imported stays for good: frozen out of the collector, a forked job's full collections (accelerate
    # calls one as each trainer starts; the interpreter runs its own) walk the job's objects only, not the
    # libraries' (0.4 s a collection measured on 2 cores), and touch none of the shared pages (no copy-on-write)
    gc.collect()
    gc.freeze()
    threads = len(os.listdir("/proc/self/task"))
    print(f"warm worker {os.getpid()} for {root}: imported {', '.join(defaults.WARM_PRELOAD)} and whileai's job modules in "
          f"{time.monotonic() - began:.1f} s ({threads} native threads)", flush=True)
    with contextlib.suppress(FileNotFoundError):
        sock_path.unlink()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        server.bind(str(sock_path))
    finally:
        os.umask(old)
    server.listen(16)
    server.settimeout(1.0)
    try:
        _serve(root, mine, server, [server.fileno(), lock])
    finally:
        with contextlib.suppress(FileNotFoundError):
            sock_path.unlink()  # still ours: a successor binds only once this process has let the lock go
        server.close()
        print(f"warm worker {os.getpid()}: exiting", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
