"""Who the warm socket's two sides talk to (whileai/platform/launcher/_warm.py ``connect``, _warm_process.py
``_peer_is_me``).

A second account is real here: the tests run as root and act as ``nobody`` (a listener that drops to its uid
before listen(), whose uid is then what SO_PEERCRED reports; a caller whose effective uid is nobody's). The command
line and the job launch must send nothing (no environment, no descriptors, no key) to a listener that is not this
user's, whether it sits in this user's folder or is reached through a link swapped in for the folder, and the
command still runs in its own interpreter; the warm process must answer nothing to another uid.
"""

from __future__ import annotations

import json
import os
import pwd
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from whileai.platform import defaults
from whileai.platform.launcher import _warm
from _job_helpers import warm_ready

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="acting as a second user needs root")

_SECRET = "wai_secret_that_must_not_leave"

#: A listener of ``uid`` at ``path``: it binds as root (anywhere), drops to ``uid`` and only then listens, so
#: SO_PEERCRED names ``uid``. Each connection's bytes and descriptors are printed as a JSON line once it closes; a
#: connection that sends ``END`` ends it (connections are accepted in order, so every earlier one is printed).
_LISTENER = r"""
import json, os, socket, sys
path, uid = sys.argv[1], int(sys.argv[2])
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
os.chdir(os.path.dirname(path))  # bound by its own name: a test's folder can pass AF_UNIX's 108-byte path limit
server.bind(os.path.basename(path))
os.chmod(path, 0o777)
os.setgid(uid)
os.setuid(uid)
server.listen(16)
print("ready", flush=True)
while True:
    conn, _ = server.accept()
    conn.settimeout(20)
    data, fds = b"", 0
    try:
        while True:
            chunk, more, _, _ = socket.recv_fds(conn, 65536, 8)
            fds += len(more)
            for fd in more:
                os.close(fd)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    conn.close()
    if data == b"END":
        break
    print(json.dumps({"bytes": len(data), "fds": fds}), flush=True)
"""

#: Connect to ``path`` as effective uid ``uid`` (what SO_PEERCRED reports) while the path is still looked up as
#: root (fsuid 0), past the warm folder's mode 700, send ``request`` and print what comes back before the close
#: (nothing, where it is closed unanswered or unread).
_AS_UID = r"""
import ctypes, os, socket, sys
path, uid, request = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if uid != os.geteuid():
    os.setegid(uid)
    os.seteuid(uid)
    ctypes.CDLL(None, use_errno=True).setfsuid(0)
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.settimeout(60)
sock.connect(path)
got = b""
try:
    sock.sendall(request.encode() + b"\n")
    while chunk := sock.recv(65536):
        got += chunk
except (BrokenPipeError, ConnectionResetError):  # closed unread: refused
    pass
print(got.decode(), end="")
"""


def _nobody() -> int:
    try:
        return pwd.getpwnam("nobody").pw_uid
    except KeyError:
        return 65534


class _Listener:
    def __init__(self, path: Path, uid: int) -> None:
        self.path = path
        self.proc = subprocess.Popen([sys.executable, "-c", _LISTENER, str(path), str(uid)], stdout=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "ready\n"

    def heard(self) -> list[dict]:
        """Every connection it took, each with the bytes and descriptors it received; it ends."""
        folder = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)  # by the folder: the path may be too long
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(f"/proc/self/fd/{folder}/{self.path.name}")
                sock.sendall(b"END")
        finally:
            os.close(folder)
        out, _ = self.proc.communicate(timeout=60)
        return [json.loads(line) for line in out.splitlines()]


@pytest.fixture
def tmp_dir(tmp_path, monkeypatch, home) -> Path:
    """A temporary folder of the test's own (TMPDIR, here and in the commands it starts), the warm folder's
    parent; the test's data root is its warm home."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setenv(defaults.WARM_HOME_ENV, str(home))
    return tmp


@pytest.fixture
def listening():
    started: list[_Listener] = []

    def start(path: Path, uid: int) -> _Listener:
        started.append(_Listener(path, uid))
        return started[-1]

    yield start
    for listener in started:
        listener.proc.kill()
        listener.proc.wait()


def _validate(cwd: Path) -> subprocess.CompletedProcess[str]:
    """A command with a known answer (exit 2 and a hint), the secret in its environment."""
    return subprocess.run([sys.executable, "-m", "whileai", "validate", "recipe=sft_tooluse", "processes=2"],
                          capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, "WHILEAI_API_KEY": _SECRET})


def _ran_here(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 2 and "did you mean target.processes=2?" in done.stderr, done.stderr[-2000:]


def _launch(tmp: Path) -> tuple[_warm.Forked | None, str]:
    from whileai.core.launch import WORKER_MODULE

    return _warm.start_job([sys.executable, "-m", WORKER_MODULE, "job_trust"],
                           {**_warm.launch_env(), "WHILEAI_API_KEY": _SECRET}, tmp, tmp / "job_trust.log")


def test_a_listener_of_another_uid_in_this_users_folder_is_sent_nothing(tmp_dir, home, listening):
    folder = tmp_dir / f"whileai-{os.getuid()}"
    folder.mkdir(mode=0o700)
    theirs = listening(folder / _warm._names(home)[0], _nobody())
    _ran_here(_validate(tmp_dir))
    pid, why = _launch(tmp_dir)
    assert pid is None and f"uid {_nobody()}" in why
    assert _warm.warm_pid() is None
    # each caller reached it, read its uid and left: not a byte, not a descriptor
    assert theirs.heard() == [{"bytes": 0, "fds": 0}] * 3
    assert not (home / "warm").exists()  # no warm process was started beside it either


def test_a_link_swapped_in_for_the_folder_leads_nowhere(tmp_dir, home, listening):
    """Another user's folder behind a link at the warm folder's path: nothing even connects to its listener."""
    nobody = _nobody()
    theirs = tmp_dir / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, nobody, nobody)
    (tmp_dir / f"whileai-{os.getuid()}").symlink_to(theirs)
    listener = listening(theirs / _warm._names(home)[0], nobody)
    _ran_here(_validate(tmp_dir))
    pid, why = _launch(tmp_dir)
    assert pid is None and "is not a folder (a link?)" in why
    assert listener.heard() == []


@pytest.mark.parametrize("how", ["another's", "open to others"])
def test_a_warm_folder_not_this_users_own_is_refused(tmp_dir, how):
    folder = tmp_dir / f"whileai-{os.getuid()}"
    folder.mkdir(mode=0o700)
    if how == "another's":
        os.chown(folder, _nobody(), _nobody())
    else:
        folder.chmod(0o755)
    with pytest.raises(PermissionError, match="is not this user's own folder"):
        _warm._folder()


def _as_uid(uid: int, request: dict) -> subprocess.CompletedProcess[str]:
    path = _warm._folder_path() / _warm._names(_warm._home())[0]
    return subprocess.run([sys.executable, "-c", _AS_UID, str(path), str(uid), json.dumps(request)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_the_warm_process_answers_nothing_to_another_uid(home):
    """Straight to the warm process's own check: a caller of another uid that reaches its socket anyway."""
    warm = warm_ready()
    theirs = _as_uid(_nobody(), {"op": "stop"})
    assert theirs.returncode == 0, theirs.stderr
    assert theirs.stdout == ""  # closed unanswered
    assert _warm.warm_pid() == warm  # and not stopped
    ours = _as_uid(os.getuid(), {"op": "ping"})
    assert ours.returncode == 0 and json.loads(ours.stdout)["warm"] == warm
