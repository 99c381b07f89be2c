"""A local job's process, known by its pid and its start time, and how it ended.

A pid alone names a process only while it lives: once it is reaped the kernel may give the number to another.
The start time (field 22 of ``/proc/PID/stat``, clock ticks since boot) does not repeat for one pid, so the pair
on a job's row names that job's process for good, whatever its command line says (a job forked from the warm
process keeps the warm process's). Whoever reaps a job's process (the warm process for a forked job, the
launcher for one started cold) writes how it ended into the job's folder (:func:`note_exit`), so that the
reconciler can say "killed by SIGKILL" instead of guessing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

__all__ = ["EXIT_NOTE", "ended_how", "exit_words", "note_exit", "start_time", "state"]

#: the file in a job's folder that says how its process ended
EXIT_NOTE = "exit.jsonl"  # one record; a name of the job folder's own kind (JOB_FOLDER_NAMES: *.jsonl)


def _fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first); None when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return None


def start_time(pid: int | None) -> str | None:
    """When process ``pid`` started (field 22 of /proc/PID/stat, clock ticks since boot); None when it is gone."""
    fields = _fields(pid) if pid else None
    return fields[19] if fields and len(fields) > 19 else None


def state(pid: int | None, started: str | None) -> str | None:
    """The state letter of the process that is ``pid`` and began at ``started`` (``Z`` for one exited and not yet
    reaped); None when that process is gone, the pid now another's included."""
    fields = _fields(pid) if pid else None
    if not fields or len(fields) <= 19 or (started is not None and fields[19] != started):
        return None
    return fields[0]


def exit_words(status: int) -> str:
    """A wait status in words: ``killed by SIGKILL``, ``exited with code 3``."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(number).name}"
        return f"killed by signal {number}"
    return f"exited with code {os.waitstatus_to_exitcode(status)}"


def note_exit(folder: str | Path, pid: int, status: int) -> None:
    """Write how process ``pid`` ended (its wait status ``status``) into the job folder ``folder``; best effort."""
    note = {"pid": pid, "how": exit_words(status), "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None}
    path = Path(folder, EXIT_NOTE)
    part = path.with_name(f"exit.{pid}.part.jsonl")  # of the same kind (*.jsonl)
    with contextlib.suppress(OSError):  # written whole, then renamed: a reader never sees half a note
        part.write_text(json.dumps(note))
        os.replace(part, path)


def _noted(folder: Path, pid: int | None) -> str | None:
    try:
        note = json.loads((folder / EXIT_NOTE).read_text())
    except (OSError, ValueError):
        return None
    return str(note["how"]) if isinstance(note, dict) and note.get("pid") == pid and note.get("how") else None


def ended_how(folder: Path, pid: int | None, wait_s: float = 0.0) -> str | None:
    """How process ``pid`` of the job in ``folder`` ended (:func:`note_exit`), None where nothing was noted.

    ``wait_s``: how long to wait for a note not yet written (its reaper writes it just after the process ends).
    """
    deadline = time.monotonic() + wait_s
    while True:
        how = _noted(folder, pid)
        if how is not None or time.monotonic() >= deadline:
            return how
        time.sleep(0.05)
