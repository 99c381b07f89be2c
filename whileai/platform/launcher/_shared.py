"""What both launchers (a local worker, a Modal call) share: where a job's files live and how a job is settled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from whileai.core.jobrow import platform_of
from whileai.core.paths import JOB_ID_ENV, adapter_dir, checkpoint_dir, data_root, job_dir, job_log
from whileai.platform.store.records import JobRecord
from whileai.platform.store.values import FINISHED_STATUSES

__all__ = ["JOB_ID_ENV", "FINISHED", "job_dir", "job_log", "adapter_dir", "checkpoint_dir", "end_job",
           "remove_run_files", "hub_env"]

FINISHED = FINISHED_STATUSES  # done, failed, stopped, crashed


def _revoke_keys(store: Any, job: JobRecord) -> None:
    """Revoke the job's own keys so they stop authenticating (a no-op when already gone)."""
    store.revoke_job_keys(job["id"])
    legacy = platform_of(job).key_hash  # a job launched before job keys had their own table
    if legacy:
        store.revoke_api_key_hash(legacy, end_sessions=False)  # a job's key: its account's page sessions stay


def end_job(store: Any, account_id: str, job: JobRecord, status: str, error: str | None = None) -> JobRecord:
    """Settle a job: its status and error, its key revoked, and its run failed too when it was still running."""
    changes: dict[str, Any] = {"status": status}
    if error is not None:
        changes["error"] = error
    record = store.update_job(account_id, job["id"], changes)
    _revoke_keys(store, job)
    if status != "done" and job.get("run_id"):
        try:  # the stored status, not the shown one: a run silent past RUN_STALE_S reads crashed with only a guess
            store.update_run(account_id, job["run_id"], {"status": status, "error": error or f"the job ended {status}"},
                             if_stored="running")
        except LookupError:
            return record
    return record


def remove_run_files(run_ids: list[str], job_ids: list[str]) -> list[Path]:
    """Delete what deleted runs and jobs left on disk: each run's adapter (and any partial save) and each job's
    folder with its log. The folders are derived from the ids, never read from a row. Returns what was removed."""
    import re
    import shutil

    gone: list[Path] = []
    adapters = data_root() / "adapters"
    for run_id in run_ids:
        if not re.fullmatch(r"run_[0-9a-f]+", run_id):
            continue  # ids are the platform's shape; anything else names no folder of ours
        paths = [adapter_dir(run_id), checkpoint_dir(run_id), *(adapters.glob(f".{run_id}.partial-*") if adapters.is_dir() else [])]
        for path in paths:
            if path.exists():
                shutil.rmtree(path, ignore_errors=True)
                gone.append(path)
    for job_id in job_ids:
        folder = job_dir(job_id)
        if re.fullmatch(r"job_[0-9a-f]+", job_id) and folder.exists():
            shutil.rmtree(folder, ignore_errors=True)
            gone.append(folder)
    return gone


def hub_env() -> dict[str, str]:
    """The environment that keeps a process off the model hub unless its operator allowed it (HUB_ALLOW_ENV).

    Beside ``local_files_only`` on every load: huggingface_hub also fetches on its own (its agent-harness
    registry when it builds request headers, even for a load from the cache), which only offline mode stops.
    """
    from whileai.core.paths import hub_allowed

    return {} if hub_allowed() else {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
