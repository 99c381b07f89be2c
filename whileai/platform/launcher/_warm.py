"""The warm worker: one process per data root that has torch, transformers, TRL and PEFT imported and forks each
local job from there, so a job does not pay those imports (WARM_PRELOAD; benchmarks/job_start.py measures what it
saves).

The launcher asks it over a Unix socket for one job: the module to run (the launch command's ``python -m``
target), its arguments, the job's environment, its folder and its log. The socket lives in a folder only this user
can open; each side checks the other's uid (SO_PEERCRED), and the caller sends nothing before its checks have
passed (:func:`connect`). The warm process forks; the child, before any job code runs, leads a session of its own
(its own pid and process group, so a stop's ``killpg`` and a SIGKILL reach that job only), points stdin at
/dev/null and stdout and stderr at the job's log, moves to the job's folder, replaces its whole environment with
the job's (threads, the hub's offline switch, the job's key) and puts back the default signal handlers. It then
runs the module as ``__main__`` and exits the way an interpreter does (non-daemon threads joined, atexit handlers
run). The answer carries the child's pid and start time, which the job's row keeps: the reconciler and a stop know
the job by that pair (``_pids``), not by its command line, which stays the warm process's. A job that crashes or is
SIGKILLed ends alone; the warm process reaps it, notes how it ended in its folder (``killed by SIGKILL``, which the
run's error then says) and serves the next launch.

Forking with threads. The warm process starts no Python thread, so no lock a thread holds is copied held into a
fork. Importing leaves two native threads besides the main one, each of a library that handles a fork itself:
numpy's OpenBLAS pool (OpenBLAS shuts it down before a fork and re-makes it on its next call) and pyarrow's
jemalloc background thread (jemalloc takes its locks across the fork and starts its thread again in the child).
No tensor op runs in the warm process, so torch's intra-op pool and the tokenizers' Rust pool, both started on
first use, are never started before a fork. ``tests/test_warm_fork.py`` pins this set and forks with those two
threads running.

The warm process keeps none of whileai's own modules for a job: the child drops them before it runs the module,
which imports them afresh from disk, so an edited source file is what runs. It imports whileai's modules once only
so that the libraries they pull in are loaded before the fork: the platform's own (WARM_PRELOAD_OWN) and those of
the layers above the platform, which the platform may not name: they name themselves (:func:`preload`, called by
the command line, ``whileai/__main__.py``, with its WARM_PRELOAD). Everything it imported is frozen out of the
garbage collector before the first fork. It carries a fingerprint (:func:`fingerprint`): the interpreter and the
environment read at import time (WARM_IMPORT_ENV_PREFIXES). A launch whose fingerprint differs gets ``stale`` back;
the old process exits and a fresh one starts. The same happens once any distribution it has imported from is
upgraded, removed or reinstalled (``_warm_install``, checked on every request). It exits on its own after
WARM_IDLE_S with no job running, or when its data root is gone. WARM_HOME_ENV lets several data roots share one
warm process (each job's environment, its data root included, comes with its launch).

It forks ``python -m whileai`` commands too (``op: cli``, sent by warm_cli.py with the caller's three standard
streams as descriptors), set up as the caller's own process (its streams, folder, environment and ``sys.path[0]``),
with its exit code sent back over the caller's socket, or, where it was killed, the signal that killed it.

This module is the launcher's side (start a job, ping, wait, stop, the fingerprint); the warm process itself, its
forks included, is ``_warm_process``.

The first launch in a data root starts the warm process in the background and starts that job cold (the launch
does not wait for the imports: a launch answers within the client's deadline); later launches fork. WARM_WORKER_ENV
turns it off. Only one-process jobs are forked: torchrun starts each rank itself, as ``python -m`` of the worker
under its own elastic agent, which must be each rank's parent to watch and end it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from whileai.core.errors import WarmSocketNotOurs
from whileai.core.paths import data_root, setting
from whileai.platform import defaults
from whileai.core import defaults as core_defaults

__all__ = ["Forked", "enabled", "fingerprint", "launch_env", "preload", "start_job", "warm_pid", "shutdown", "wait_ready"]

#: the keys a launch never hands the warm process's own environment (they are the job's)
_JOB_KEYS = ("WHILEAI_API_KEY", "WHILEAI_JOB_ID", defaults.STORE_URL_ENV, "WHILEAI_BASE_URL")
#: the warm process itself (_warm_process.py), started as ``python -m`` of it
_PROCESS_MODULE = "whileai.platform.launcher._warm_process"
#: whileai modules of the layers above the platform a warm process started from this process imports (:func:`preload`)
_PRELOAD: list[str] = []


def enabled() -> bool:
    """Whether local jobs start from the warm worker: on unless WARM_WORKER_ENV (or ``warm_worker`` in the data
    root's config.json) says 0, false, off or no; and only on Linux, whose /proc gives a forked job's start time."""
    value = setting(defaults.WARM_WORKER_ENV, "warm_worker").lower()
    return sys.platform.startswith("linux") and value not in ("0", "false", "off", "no")


def _folder_path() -> Path:
    """``<tmp>/whileai-<uid>``: where this user's warm processes listen (a socket path must stay under 108 bytes,
    which a data root's may not)."""
    return Path(tempfile.gettempdir()) / f"whileai-{os.getuid()}"


def _folder() -> int:
    """``_folder_path()`` opened, made first where it is missing: an open descriptor the caller closes.

    It is opened without following a link and must then be this user's own with no access for anyone else, so no
    other account can have put or replaced anything in it; the socket and the lock are reached through this
    descriptor (``dir_fd``, ``/proc/self/fd/N/``), never by the path again, so a link swapped in after the
    check leads nowhere. This holds whatever ``fs.protected_symlinks`` says and whoever owns the folders above.
    """
    path = _folder_path()
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except NotADirectoryError:  # what O_NOFOLLOW | O_DIRECTORY gives for a link
        raise PermissionError(f"{path} is not a folder (a link?); remove it") from None
    info = os.fstat(fd)
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        os.close(fd)
        raise PermissionError(f"{path} is not this user's own folder (owner uid {info.st_uid}, mode "
                              f"{info.st_mode & 0o777:o}; wanted uid {os.getuid()}, mode 700); remove it")
    return fd


def _through(folder: int, name: str) -> str:
    """The path of ``name`` in the open folder ``folder`` that bind() and connect() take."""
    return f"/proc/self/fd/{folder}/{name}"


def _home() -> Path:
    """The folder whose warm process serves this data root: WARM_HOME_ENV's, else the data root."""
    named = os.environ.get(defaults.WARM_HOME_ENV, "").strip()
    return Path(named).expanduser() if named else data_root()


def _names(root: Path) -> tuple[str, str]:
    """The names, in ``_folder()``, of ``root``'s warm process's socket and lock file."""
    name = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    return f"warm-{name}.sock", f"warm-{name}.lock"


def connect(root: Path, timeout: float) -> socket.socket:
    """A connection to ``root``'s warm process, made only once the listener is proven to be this user's: reached
    through this user's own folder (``_folder``) and, connected, a process of this uid by its credentials
    (SO_PEERCRED). Nothing has been sent on it yet. OSError where there is none; WarmSocketNotOurs where it is another's."""
    folder = _folder()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(_through(folder, _names(root)[0]))
        _, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        if uid != os.getuid():
            raise WarmSocketNotOurs(f"the warm socket of {root} is held by uid {uid}, not this user's ({os.getuid()})")
    except BaseException:
        sock.close()
        raise
    finally:
        os.close(folder)
    return sock


def _import_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in sorted(env.items())
            if k.startswith(defaults.WARM_IMPORT_ENV_PREFIXES) and k not in defaults.WARM_IMPORT_ENV_IGNORED}


def fingerprint(env: dict[str, str] | None = None) -> str:
    """What a warm process's imports depend on that a caller can tell without making them: the interpreter and
    ``env``'s import-time variables. A different value means another warm process. Whether the libraries it has
    imported are still the installed ones, the warm process checks itself on every request (``_warm_install``)."""
    parts: list[Any] = [sys.executable, sys.version, _import_env(dict(os.environ if env is None else env))]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


# ---------------------------------------------------------------------------
# The launcher's side
# ---------------------------------------------------------------------------


def _ask(root: Path, request: dict[str, Any], timeout: float) -> dict[str, Any]:
    with connect(root, timeout) as sock:
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


def _starting(root: Path) -> bool:
    """Whether a warm process holds ``root``'s lock (it takes it first thing and keeps it for life)."""
    fd = open_lock(root)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def open_lock(root: Path) -> int:
    """``root``'s warm process's lock file, opened (made where missing) in this user's own folder."""
    folder = _folder()
    try:
        return os.open(_names(root)[1], os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder)
    finally:
        os.close(folder)


def preload(modules: Iterable[str]) -> None:
    """Name whileai modules that a warm process this process starts is to import too, for the libraries they pull in
    (a job's, a forked command's). The platform may not name the layers above it, so they name themselves: the
    command line (``whileai/__main__.py``) passes its WARM_PRELOAD before it runs any command. A warm process
    started with none of them still forks every job; each then imports those libraries itself."""
    _PRELOAD.extend(name for name in modules if name not in _PRELOAD)


def _spawn(root: Path, env: dict[str, str], print_to: Path) -> None:
    """Start ``root``'s warm process in the background (detached, like a cold worker), with :func:`preload`'s
    modules."""
    print_to.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    own = {k: v for k, v in env.items() if k not in _JOB_KEYS}
    own[defaults.WARM_PRELOAD_ENV] = ",".join(_PRELOAD)  # not on its command line, which readers of /proc match
    with open(print_to, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", _PROCESS_MODULE, str(root), fingerprint(env)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=own, cwd=str(root),
            start_new_session=True, close_fds=True)
    threading.Thread(target=proc.wait, name="whileai-warm-reap", daemon=True).start()


class Forked(NamedTuple):
    """A job forked from the warm process: its pid and start time (``_pids``), which its row keeps."""

    pid: int
    started: str | None


def start_job(command: list[str], env: dict[str, str], cwd: Path, log: Path) -> tuple[Forked | None, str]:
    """Start ``command`` (``python -m MODULE *args``, the launch's) forked from this data root's warm process.

    Returns ``(forked, how)``: the job's pid and start time, or None where the caller starts the job cold, with the
    reason (no warm process yet, and one is now starting; a stale one, which is replaced; switched off; an error).
    """
    if not enabled():
        return None, f"the warm worker is off ({defaults.WARM_WORKER_ENV})"
    if command[1:2] != ["-m"] or len(command) < 3:
        return None, f"the warm worker runs only a module (python -m MODULE ...), not {command[:3]}"
    root = _home()
    try:
        wanted = fingerprint(env)
        request = {"op": "start", "fingerprint": wanted, "module": command[2], "args": command[3:], "env": env,
                   "cwd": str(cwd), "log": str(log)}
        try:  # the job's key and store go out only to a warm process proven to be this user's (connect)
            answer = _ask(root, request, defaults.WARM_REPLY_S)
        except (FileNotFoundError, ConnectionRefusedError):
            answer = {"absent": True}
        if isinstance(answer.get("pid"), int):
            started = answer.get("started") if isinstance(answer.get("started"), str) else None
            return Forked(answer["pid"], started), f"forked from the warm worker (pid {answer.get('warm')})"
        if answer.get("stale"):
            why = "the warm worker was of an older install; a fresh one is starting"
            deadline = time.monotonic() + defaults.JOB_STOP_WAIT_S
            while _starting(root) and time.monotonic() < deadline:  # the old one lets its lock go as it exits
                time.sleep(0.05)
        else:
            why = answer.get("error") or "no warm worker was running for this data root; one is starting"
        if not _starting(root):
            _spawn(root, env, root / "warm" / "warm.log")
        return None, str(why)
    except Exception as exc:  # a job always starts: cold where the warm path fails
        return None, f"the warm worker could not be reached ({type(exc).__name__}: {exc})"


def _ping(root: Path) -> dict[str, Any] | None:
    try:
        answer = _ask(root, {"op": "ping"}, defaults.WARM_REPLY_S)
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
    from whileai.platform.launcher._shared import hub_env

    return {**defaults.JOB_ENV_DEFAULTS, **os.environ, **hub_env(), core_defaults.HOME_ENV: str(data_root())}


def wait_ready(timeout: float, env: dict[str, str] | None = None) -> int | None:
    """Start this data root's warm process if none of this install runs (one of an older install is told to exit),
    and wait up to ``timeout`` s for it to be ready; its pid, or None."""
    root = _home()
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
        elif not _starting(root):
            _spawn(root, env, root / "warm" / "warm.log")
        time.sleep(0.1)
    return None


def shutdown(root: Path | None = None) -> bool:
    """Ask ``root``'s warm process to exit (its running jobs go on); whether one answered."""
    try:
        _ask(root or _home(), {"op": "stop"}, defaults.WARM_REPLY_S)
    except OSError:
        return False
    return True
