"""What both launchers (a local worker, a Modal call) share: where a job's files live and how a job is settled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from whileai.core.paths import data_root

__all__ = ["JOB_ID_ENV", "FINISHED", "job_dir", "adapter_dir", "end_job"]

#: environment variable carrying the job id into the worker (for its log lines and errors)
JOB_ID_ENV = "WHILEAI_JOB_ID"
FINISHED = ("done", "failed", "stopped")


def job_dir(job_id: str) -> Path:
    """``<data_root>/jobs/<job_id>/``: the worker's log lives here."""
    return data_root() / "jobs" / job_id


def adapter_dir(run_id: str) -> Path:
    """``<data_root>/adapters/<run_id>/``: where a local job saves its PEFT adapter and tokenizer."""
    return data_root() / "adapters" / run_id


def _revoke_key(store: Any, key_hash: str | None) -> None:
    """Remove a job-scoped key so it stops authenticating (a no-op when already gone)."""
    if key_hash:
        store.revoke_api_key_hash(key_hash)


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
