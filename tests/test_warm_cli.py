"""``python -m whileai run|validate|...`` handed to a fork of the warm process (whileai/platform/launcher/warm_cli.py).

Real command lines in subprocesses against the session's real warm process: the forked command writes to the
caller's own streams, its exit code is the command's, Ctrl-C reaches it and stops the run as in-process, a
killed command line takes its fork with it, and without a warm process the command runs in its own interpreter.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from whileai.platform import defaults
from whileai.platform.launcher import _warm
from _job_helpers import warm_ready

pytestmark = pytest.mark.slow


@pytest.fixture
def warm(home) -> int:
    """The session's warm process (WARM_HOME_ENV), ready; ``home`` is the test's own data root."""
    return warm_ready()


def _warm_log() -> Path:
    return _warm._home() / "warm" / "warm.log"


def _whileai(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "whileai", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


def _commands(warm: int, caller: subprocess.Popen[str]) -> list[int]:
    """The forks of the warm process ``warm`` that are the command of command line ``caller``: its children writing to
    the pipe this test reads the caller's output from (a fork keeps the warm process's command line; a job forked
    from it writes to its log)."""
    assert caller.stdout is not None
    mine = os.readlink(f"/proc/self/fd/{caller.stdout.fileno()}")
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            parent = int(Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[1])
            if parent == warm and os.readlink(f"/proc/{entry.name}/fd/1") == mine:
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return found


def _start_run(name: str, **popen: object) -> subprocess.Popen[str]:
    """A long run of the main recipe on the tiny base, started and followed up to its ``wai.train`` line."""
    proc = subprocess.Popen([sys.executable, "-m", "whileai", "run", f"name={name}", "recipe=sft_tooluse", "steps=300",
                             "holdout_rows=4", f"base_model={_tiny()}"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **popen)  # type: ignore[call-overload]
    return proc


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _until(check, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        time.sleep(0.05)
    return bool(check())


def test_a_forked_command_says_and_exits_exactly_what_the_in_process_one_does(warm):
    said_before = _warm_log().read_text() if _warm_log().exists() else ""
    forked = _whileai("validate", "recipe=sft_tooluse", "processes=2")
    alone = _whileai("validate", "recipe=sft_tooluse", "processes=2", **{defaults.WARM_CLI_ENV: "0"})
    assert forked.returncode == alone.returncode == 2
    assert "did you mean target.processes=2?" in forked.stderr
    assert (forked.stdout, forked.stderr) == (alone.stdout, alone.stderr)
    new = _warm_log().read_text()[len(said_before):]
    assert "command `whileai validate` started" in new
    ok = _whileai("validate", "recipe=sft_tooluse")
    assert ok.returncode == 0 and "# valid: recipe=sft_tooluse" in ok.stderr and ok.stdout.startswith("name: sft_tooluse")


def test_a_forked_command_finds_a_reward_module_in_the_folder_it_was_run_from(warm, tmp_path):
    """``python -m`` puts the caller's folder first on sys.path; the fork does too, not the warm process's."""
    (tmp_path / "local_reward_mod.py").write_text("def score(prompts, completions, **kwargs):\n    return [0.0] * len(completions)\n")
    found = subprocess.run([sys.executable, "-m", "whileai", "validate", "recipe=grpo_tooluse",
                            "reward=python:local_reward_mod:score"], capture_output=True, text=True, cwd=tmp_path,
                           timeout=300)
    assert found.returncode == 0, found.stderr
    missing = subprocess.run([sys.executable, "-m", "whileai", "validate", "recipe=grpo_tooluse",
                              "reward=python:local_reward_mod:nope"], capture_output=True, text=True, cwd=tmp_path,
                             timeout=300)
    assert missing.returncode == 2 and "local_reward_mod has no function 'nope'" in missing.stderr


def test_ctrl_c_reaches_the_forked_run_which_stops_its_job_and_names_what_resume_can_do(warm):
    proc = _start_run("warmcli_ctrl_c")
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if "wai.train on local" in line:
            assert _commands(warm, proc), _debug(warm)
            time.sleep(1)
            proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == 130
    text = "".join(lines)
    assert "- interrupted: stopping run_" in text and "is stopped" in text
    assert "status     interrupted" in text


def test_ctrl_z_stops_the_forked_run_with_its_command_line_and_a_continue_resumes_both(warm):
    # a process group of its own in this session, as a shell's job is (an orphaned group would drop SIGTSTP)
    proc = _start_run("warmcli_ctrl_z", process_group=0)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "wai.train on local" in line:
            break
    (fork,) = _commands(warm, proc)
    proc.send_signal(signal.SIGTSTP)
    assert _until(lambda: _state(proc.pid) == "T" and _state(fork) == "T"), (_state(proc.pid), _state(fork))
    proc.send_signal(signal.SIGCONT)  # what a shell's fg or bg sends
    assert _until(lambda: _state(proc.pid) != "T" and _state(fork) != "T"), (_state(proc.pid), _state(fork))
    proc.send_signal(signal.SIGINT)
    text = proc.stdout.read()
    assert proc.wait(timeout=120) == 130
    assert "status     interrupted" in text


def test_a_killed_command_line_takes_its_fork_with_it(warm):
    proc = _start_run("warmcli_killed")
    assert proc.stdout is not None
    for line in proc.stdout:
        if "wai.train on local" in line:
            break
    assert len(_commands(warm, proc)) == 1
    proc.kill()
    proc.wait()
    assert _until(lambda: _commands(warm, proc) == [])


def test_a_forked_command_killed_by_a_signal_says_so_and_exits_as_a_shell_reports_it(warm):
    proc = _start_run("warmcli_sigkill")
    assert proc.stdout is not None
    for line in proc.stdout:
        if "wai.train on local" in line:
            break
    (fork,) = _commands(warm, proc)
    os.kill(fork, signal.SIGKILL)
    with proc.stdout:
        text = proc.stdout.read()
    assert proc.wait(timeout=60) == 128 + signal.SIGKILL
    assert f"the command's process (pid {fork}) was killed by SIGKILL" in text
    from whileai.domain.client import get_client

    for job in get_client().request("GET", "/jobs")["jobs"]:  # the killed runner's job, its own process, trains on
        if job["status"] == "running" and job.get("pid"):
            os.killpg(job["pid"], signal.SIGKILL)


def test_a_command_of_another_import_environment_runs_in_its_own_interpreter_and_leaves_the_warm_process(warm):
    other = _whileai("validate", "recipe=sft_tooluse", "processes=2", TOKENIZERS_PARALLELISM="true")
    assert other.returncode == 2 and "did you mean target.processes=2?" in other.stderr
    assert _warm.warm_pid() == warm  # the jobs' launches decide when it is replaced, not a command line


def test_without_a_warm_process_the_command_runs_in_its_own_interpreter(home, tmp_path):
    empty = tmp_path / "no-warm-here"
    empty.mkdir()
    done = _whileai("validate", "recipe=sft_tooluse", "processes=2", **{defaults.WARM_HOME_ENV: str(empty)})
    assert done.returncode == 2 and "did you mean target.processes=2?" in done.stderr
    assert not (empty / "warm").exists()  # validate starts no warm process of its own


def _tiny() -> Path:
    from whileai.kit._base import tiny_model_dir

    return tiny_model_dir()


def _debug(warm):
    out = [_warm_log().read_text()[-1500:]]
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()
                if int(stat[1]) == warm:
                    out.append(Path(f"/proc/{entry.name}/cmdline").read_bytes()[:300].decode(errors="replace"))
            except OSError:
                pass
    return "\n".join(out)
