"""The job runner, platform side: one job row per hosted run, launched locally or on Modal, and watched.

A local job is a detached worker process (``python -m whileai.platform.jobs.worker
<job_id>``) in its own session, so the process that asked for it can exit. It
reaches the platform with a job-scoped API key minted here (stored hashed like
any key, revoked when the job ends) through the embedded client on the same
store. A Modal job is a spawned function call; its progress is pulled from
Modal when the run or job is read.

Nothing watches jobs in the background: :func:`reconcile` runs whenever a job
or its run is read, and settles a job whose process died without a word
(killed, out of memory) or stopped beating (JOB_STALE_S), so no run stays
"running" forever.
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from whileai.simulations import defaults
from whileai.simulations._paths import data_root, setting

__all__ = [
    "launch",
    "default_target",
    "reconcile",
    "reconcile_run",
    "end_job",
    "job_dir",
    "adapter_dir",
    "worker_env",
    "JOB_ID_ENV",
    "FINISHED",
]

#: environment variable carrying the job id into the worker (for its log lines and errors)
JOB_ID_ENV = "WHILEAI_JOB_ID"
FINISHED = ("done", "failed", "stopped")

#: worker processes this process started, by pid: polled (and so reaped) instead of
#: trusting ``kill(pid, 0)``, which also succeeds on a zombie
_CHILDREN: dict[int, subprocess.Popen] = {}
_CHILDREN_LOCK = threading.Lock()


def job_dir(job_id: str) -> Path:
    """``<data_root>/jobs/<job_id>/``: the worker's log lives here."""
    return data_root() / "jobs" / job_id


def adapter_dir(run_id: str) -> Path:
    """``<data_root>/adapters/<run_id>/``: where a local job saves its PEFT adapter and tokenizer."""
    return data_root() / "adapters" / run_id


def _key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _revoke_key(store: Any, key_hash: str | None) -> None:
    """Remove a job-scoped key so it stops authenticating (a no-op when already gone)."""
    if not key_hash:
        return
    revoke = getattr(store, "revoke_api_key_hash", None)
    if revoke is not None:
        revoke(key_hash)
        return
    from sqlalchemy import delete

    from whileai.platform.store import ApiKey

    store._tx(lambda s: s.execute(delete(ApiKey).where(ApiKey.key_hash == key_hash)))


def worker_env(store: Any, key: str, job_id: str) -> dict[str, str]:
    """The worker's environment: the job key, this data root and this store, no server address.

    The worker always uses the embedded client on the same store (a server that
    launched it may be stopped or restarted while the job runs; the store stays).
    """
    env = dict(os.environ)
    env.pop("WHILEAI_BASE_URL", None)
    env["WHILEAI_API_KEY"] = key
    env[defaults.HOME_ENV] = str(data_root())
    env[defaults.STORE_URL_ENV] = store.url
    env[JOB_ID_ENV] = job_id
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


# ---------------------------------------------------------------------------
# Launch
# ---------------------------------------------------------------------------


def default_target() -> str:
    """Where a job runs when ``train`` names no target: TRAIN_TARGET_ENV, else ``train_target`` in the
    data root's config.json, else TRAIN_TARGET_DEFAULT ("local")."""
    return setting(defaults.TRAIN_TARGET_ENV, "train_target") or defaults.TRAIN_TARGET_DEFAULT


def launch(store: Any, account_id: str, *, run_id: str, kind: str, target: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Create the job row for ``run_id`` and start it on ``target`` ("local" or "modal"). Returns the job record.

    A launch that fails marks the job and the run failed with the reason and raises.
    """
    if target not in defaults.TRAIN_TARGETS:
        raise ValueError(f"target={target!r} is not a place jobs run; pass one of {', '.join(defaults.TRAIN_TARGETS)}")
    job = store.create_job(account_id, run_id=run_id, kind=kind, target=target, status="queued", spec=spec)
    try:
        if target == "local":
            return _launch_local(store, account_id, job)
        from .modal_backend import launch_modal

        return launch_modal(store, account_id, job)
    except Exception as exc:
        end_job(store, account_id, job, "failed", f"the job could not start: {type(exc).__name__}: {exc}")
        raise


def _launch_local(store: Any, account_id: str, job: dict[str, Any]) -> dict[str, Any]:
    job_id = job["id"]
    folder = job_dir(job_id)
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder / "worker.log"
    key = store.issue_api_key(account_id)
    spec = dict(job["spec"] or {})
    spec.update(key_hash=_key_hash(key), log=str(log_path), host=socket.gethostname(), launched_at=time.time())
    store.update_job(account_id, job_id, {"spec": spec})
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "whileai.platform.jobs.worker", job_id],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=worker_env(store, key, job_id),
            cwd=str(folder),
            start_new_session=True,  # its own session: a Ctrl-C or exit of the caller does not reach it
            close_fds=True,
        )
    with _CHILDREN_LOCK:
        _CHILDREN[proc.pid] = proc
    # reap it the moment it exits, so a long-lived launcher (a server, a notebook) keeps no zombies
    threading.Thread(target=proc.wait, name=f"whileai-reap-{job_id}", daemon=True).start()
    return store.update_job(account_id, job_id, {"pid": proc.pid, "status": "running"})


# ---------------------------------------------------------------------------
# Ending and reconciling
# ---------------------------------------------------------------------------


def end_job(store: Any, account_id: str, job: dict[str, Any], status: str, error: str | None = None) -> dict[str, Any]:
    """Settle a job: its status and error, its key revoked, and its run failed too when it was still running."""
    changes: dict[str, Any] = {"status": status}
    if error is not None:
        changes["error"] = error
    record = store.update_job(account_id, job["id"], changes)
    _revoke_key(store, (job.get("spec") or {}).get("key_hash"))
    if status != "done" and job.get("run_id"):
        try:
            run = store.get_run(account_id, job["run_id"], series=False)
        except LookupError:
            return record
        if run["status"] == "running":
            store.update_run(account_id, job["run_id"], {"status": status, "error": error or f"the job ended {status}"})
    return record


def _pid_alive(pid: int | None, job_id: str) -> bool:
    """Whether the worker process for ``job_id`` still runs (a zombie, or a reused pid, counts as gone)."""
    if not pid:
        return False
    with _CHILDREN_LOCK:
        proc = _CHILDREN.get(pid)
    if proc is not None:
        if proc.poll() is None:
            return True
        with _CHILDREN_LOCK:
            _CHILDREN.pop(pid, None)
        return False
    proc_dir = Path(f"/proc/{pid}")
    if Path("/proc/self").exists():
        try:
            stat = (proc_dir / "stat").read_text()
            cmdline = (proc_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return False
        state = stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else ""
        return state not in ("Z", "X") and job_id in cmdline
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _log_tail(spec: dict[str, Any]) -> str:
    path = spec.get("log")
    if not path:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - defaults.JOB_LOG_TAIL_CHARS))
            text = f.read().decode(errors="replace").strip()
    except OSError:
        return ""
    return f"\nLast lines of its log ({path}):\n{text}" if text else f" Its log ({path}) is empty."


def reconcile(store: Any, account_id: str, job: dict[str, Any]) -> dict[str, Any]:
    """The job as it stands now: a job whose worker is gone, hung or finished remotely is settled first."""
    if job["status"] in FINISHED:
        return job
    if job.get("target") == "modal":
        from .modal_backend import reconcile_modal

        return reconcile_modal(store, account_id, job)
    return _reconcile_local(store, account_id, job)


def _reconcile_local(store: Any, account_id: str, job: dict[str, Any]) -> dict[str, Any]:
    spec = job.get("spec") or {}
    now = time.time()
    beat = job.get("heartbeat_at")
    if beat is not None:
        silent_for = now - beat
        stale = silent_for > defaults.JOB_STALE_S
    else:
        silent_for = now - (spec.get("launched_at") or job["created_at"])
        stale = silent_for > defaults.JOB_START_GRACE_S
    if job["status"] == "queued" and not job.get("pid"):
        if not stale:
            return job
        return _settle_dead(store, account_id, job, f"the job never started: no worker was launched in "
                            f"{silent_for:.0f} s (JOB_START_GRACE_S)")
    same_host = spec.get("host") in (None, socket.gethostname())
    alive = _pid_alive(job.get("pid"), job["id"]) if same_host else None
    if alive is False:
        return _settle_dead(store, account_id, job, (
            f"the job process (pid {job.get('pid')}) ended without reporting: it was killed (e.g. SIGKILL, or the "
            "out-of-memory killer) or crashed before it could record an error." + _log_tail(spec)
        ))
    if stale:
        how = "its process is gone" if alive is None else "its process still exists but is hung; it was stopped"
        if alive:
            try:
                os.killpg(job["pid"], signal.SIGKILL)
            except OSError:
                pass
        return _settle_dead(store, account_id, job, (
            f"the job sent no heartbeat for {silent_for:.0f} s (JOB_STALE_S is {defaults.JOB_STALE_S:g} s); {how}."
            + _log_tail(spec)
        ))
    return job


def _settle_dead(store: Any, account_id: str, job: dict[str, Any], error: str) -> dict[str, Any]:
    """A worker that is gone: trust what it managed to record, else fail the job and its run with ``error``."""
    latest = store.get_job(account_id, job["id"])
    if latest["status"] in FINISHED:
        return latest
    run_status = None
    if latest.get("run_id"):
        try:
            run_status = store.get_run(account_id, latest["run_id"], series=False)["status"]
        except LookupError:
            run_status = None
    if run_status in FINISHED:  # the run finished; the process died before it could close the job
        return end_job(store, account_id, latest, run_status)
    return end_job(store, account_id, latest, "failed", error)


def reconcile_run(store: Any, account_id: str, run_id: str) -> None:
    """Settle the unfinished jobs of one run (called when the run is read)."""
    for job in store.list_jobs(account_id, run_id=run_id, limit=10):
        if job["status"] not in FINISHED:
            reconcile(store, account_id, job)
