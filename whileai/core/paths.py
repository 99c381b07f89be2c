"""Where whileai keeps its files: one function decides, everything else asks it."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from whileai.core.defaults import HOME_ENV

__all__ = ["data_root", "setting", "hub_allowed", "last_checkpoint", "JOB_ID_ENV", "job_dir", "job_log", "adapter_dir",
           "checkpoint_dir"]

#: environment variable carrying the job id into the worker (for its log lines and errors)
JOB_ID_ENV = "WHILEAI_JOB_ID"


def data_root() -> Path:
    """The data root: the directory HOME_ENV names (``$WHILEAI_HOME``) when set, else ``~/.whileai``.

    Created on first use with mode 0700 (and a looser one of ours tightened to it).

    The embedded store, the spool of unsent points, cached tiny models, adapters
    and the client config file all live under it.
    """
    root = Path(os.environ.get(HOME_ENV) or Path.home() / ".whileai").expanduser()
    if str(root) not in _PRIVATE:
        _make_private(root)
    return root


_PRIVATE: set[str] = set()


def _make_private(root: Path) -> None:
    """Create the data root readable by its owner only (0700), and tighten one we own that is looser.

    It holds the store (every account's rows), the spool of unsent points and the
    local key; other local users have no business in it.
    """
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        info = root.stat()
        if stat.S_IMODE(info.st_mode) & 0o077 and info.st_uid == os.getuid():
            root.chmod(0o700)
    except OSError:
        pass
    _PRIVATE.add(str(root))


def setting(env: str, key: str) -> str:
    """An operator's setting: the environment variable ``env``, else ``key`` in the data root's config.json, else "".

    An unreadable config.json counts as unset (the caller's default applies).
    """
    value = os.environ.get(env, "").strip()
    if value:
        return value
    path = data_root() / "config.json"
    try:
        return str(json.loads(path.read_text()).get(key) or "").strip() if path.exists() else ""
    except (OSError, ValueError, AttributeError):
        return ""


def hub_allowed() -> bool:
    """Whether model loads may reach the Hugging Face hub: only when HUB_ALLOW_ENV (``WHILEAI_ALLOW_HUB``) is 1."""
    from whileai.core.defaults import HUB_ALLOW_ENV

    return os.environ.get(HUB_ALLOW_ENV, "").strip() == "1"


def last_checkpoint(folder: Path | None) -> Path | None:
    """The newest complete ``checkpoint-<step>`` folder under ``folder`` (one with its ``trainer_state.json``,
    which the trainer writes last), else None."""
    if folder is None or not folder.is_dir():
        return None
    found = []
    for path in folder.glob("checkpoint-*"):
        step = path.name.partition("-")[2]
        if step.isdigit() and (path / "trainer_state.json").is_file():
            found.append((int(step), path))
    return max(found)[1] if found else None


# A job's files. Here, below the platform, so that a job's process finds them without importing the platform's
# store (SQLAlchemy: 0.45 s of every job's start).


def job_dir(job_id: str) -> Path:
    """``<data_root>/jobs/<job_id>/``: the worker's log lives here."""
    return data_root() / "jobs" / job_id


def job_log(job_id: str) -> Path:
    """``<data_root>/jobs/<job_id>/worker.log``: derived from the job id, never read from the job's row."""
    return job_dir(job_id) / "worker.log"


def adapter_dir(run_id: str) -> Path:
    """``<data_root>/adapters/<run_id>/``: where a local job saves its PEFT adapter and tokenizer."""
    return data_root() / "adapters" / run_id


def checkpoint_dir(run_id: str) -> Path:
    """``<data_root>/checkpoints/<run_id>/``: the run's trainer checkpoints, which every job of the run finds
    (a resumed job continues from the newest); gone once the run is done or deleted."""
    return data_root() / "checkpoints" / run_id
