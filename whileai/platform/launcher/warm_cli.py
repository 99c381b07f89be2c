"""``python -m whileai run ...`` answered by a fork of the data root's warm process (WARM_CLI_COMMANDS): the command
line's side. What it saves, its lines and its risks are weighed in docs/architecture.md ("The warm command line"). The warm process's side (the fork, its streams, its exit code) is ``_warm_process._fork_command``.

A ``run`` of a short recipe spends much of its time importing Hydra, the platform (SQLAlchemy, FastAPI) and
transformers for the base's tokenizer. The warm process (_warm_process.py) has them imported already, so the command line hands itself
over: it connects to the warm process's socket and, once the listener is proven to be this user's (``_warm.connect``:
this user's own folder, reached without following a link, and the listener's uid by SO_PEERCRED), sends its
arguments, environment, working folder and its three standard streams (the file descriptors themselves,
SCM_RIGHTS), and the warm process forks a child that becomes the command. The child leads a session of its own,
puts the streams on 0, 1 and 2 (a terminal stays a terminal: progress bars and colours behave as in-process),
moves to the folder, takes the environment whole, drops whileai's modules (the code on disk runs, as for a forked
job) and runs the caller's module (``whileai``, as ``python -m``). Its exit code comes back over the socket and is
the command's; where the child was killed, the warm process sends the signal instead, and the command line says
``killed by SIGKILL`` and exits 128 + its number, as a shell reports a killed command.

The command line stays the process a person and a shell see: Ctrl-C (SIGINT), SIGTERM and SIGHUP sent to it are
passed to the child, which handles them as the in-process runner does (a Ctrl-C stops the run and names the
resume); Ctrl-Z stops the child with the command line, and ``fg``/``bg`` continue both; if the command line itself
dies, the child sees its socket close and ends too (SIGTERM). Where no warm process of this install is ready, the
listener is not this user's, or anything in the hand-over fails before the child starts, the command runs
in-process as before, saying nothing; WARM_CLI_ENV=0 turns the hand-over off.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
from typing import Any

from whileai.platform import defaults

__all__ = ["forward"]

_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _wanted(argv: list[str]) -> bool:
    value = os.environ.get(defaults.WARM_CLI_ENV, "1").strip().lower()
    return bool(argv) and argv[0] in defaults.WARM_CLI_COMMANDS and value not in ("0", "false", "off", "no")


def _streams_open() -> bool:
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:
        return False
    return True


def _read_line(sock: socket.socket) -> dict[str, Any] | None:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(4096)
        if not chunk:
            return None
        data += chunk
    answer: dict[str, Any] = json.loads(data)
    return answer


def forward(argv: list[str], module: str, preload: tuple[str, ...] = ()) -> int | None:
    """Run ``python -m MODULE *argv`` (the command line's own module, ``whileai``) in a fork of the warm process; its
    exit code, or None to run it here. ``preload``: the modules a warm process this command starts is to import
    (``_warm.preload``), named by the command line, whose layer may name them."""
    from whileai.platform.launcher import _warm

    _warm.preload(preload)
    if not _wanted(argv) or not _streams_open():
        return None
    if not _warm.enabled():
        return None
    try:  # the environment and the streams go out only to a warm process proven to be this user's (connect)
        sock = _warm.connect(_warm._home(), defaults.WARM_REPLY_S)
    except (OSError, ValueError):
        return None
    try:
        request = {"op": "cli", "fingerprint": _warm.fingerprint(_warm.launch_env()), "module": module, "argv": argv,
                   "env": dict(os.environ), "cwd": os.getcwd(), "path0": sys.path[0] if sys.path else ""}
        socket.send_fds(sock, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
        answer = _read_line(sock)
    except (OSError, ValueError):
        sock.close()
        return None
    if not answer or not isinstance(answer.get("pid"), int):
        sock.close()
        return None  # a stale or busy warm process: this command runs here
    with sock:
        return _follow(sock, answer["pid"])


def _suspender(pid: int) -> Any:
    """Ctrl-Z (SIGTSTP): stop the child's process group, stop this process as a shell expects, and on ``fg`` or
    ``bg`` (SIGCONT, which resumes this process) continue the child."""
    def suspend(_signum: int, _frame: Any) -> None:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGSTOP)
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)  # stops here until continued
        signal.signal(signal.SIGTSTP, suspend)
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGCONT)

    return suspend


def _follow(sock: socket.socket, pid: int) -> int:
    """Pass signals to the child until its exit code arrives."""
    sent: list[int] = []

    def pass_on(signum: int, _frame: Any) -> None:
        sent.append(signum)
        with contextlib.suppress(OSError):
            os.kill(pid, signum)

    for signum in _FORWARDED:
        signal.signal(signum, pass_on)
    signal.signal(signal.SIGTSTP, _suspender(pid))
    sock.settimeout(None)
    while True:
        try:
            answer = _read_line(sock)
            break
        except InterruptedError:
            continue
        except (OSError, ValueError):
            answer = None
            break
    if answer is not None and isinstance(answer.get("exit"), int):
        return int(answer["exit"])
    if answer is not None and isinstance(answer.get("signal"), int):  # the warm process saw the child killed
        print(f"python -m whileai: the command's process (pid {pid}) was {answer.get('killed')}", file=sys.stderr)
        return 128 + int(answer["signal"])
    if sent:
        return 128 + sent[-1]
    print("python -m whileai: the command's process ended without an exit status (killed?)", file=sys.stderr)
    return 1
