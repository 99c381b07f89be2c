"""The platform's side of Modal jobs, behind one small seam.

Every call to Modal goes through a :class:`ModalBackend`: ``spawn`` a job,
``poll`` its call, ``pull`` the progress it recorded, ``fetch_adapter`` from the
Volume, ``put_adapter`` onto it (the start of a run with ``init_from``),
``cancel`` a call (``run.stop()``). :class:`ModalCloud` is the real one (the ``modal`` client, a token in
``~/.modal.toml`` or MODAL_TOKEN_ID/MODAL_TOKEN_SECRET); tests install a fake
with :func:`set_backend`. The platform never waits on Modal: a launch spawns
and returns, and every read of the run pulls what is new (:func:`reconcile_modal`).
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from pathlib import Path
from typing import Any, Protocol, cast

from whileai.core.spec import updated
from whileai.core.jobrow import JobPlatform, ResolvedJudge, platform_json, platform_of
from whileai.platform import defaults
from whileai.platform.launcher._shared import FINISHED
from whileai.platform.store.records import JobRecord

__all__ = ["ModalBackend", "ModalCloud", "set_backend", "get_backend", "launch_modal", "reconcile_modal",
           "replay", "modal_gpu"]

_log = logging.getLogger("whileai.platform.launcher")


class ModalBackend(Protocol):
    def spawn(self, payload: dict[str, Any], gpu: str) -> str:
        """Start ``run_job(payload)`` on ``gpu``; return the call id."""

    def poll(self, call_id: str) -> dict[str, Any] | None:
        """None while the call runs; its result (``{"status", "error", "adapter", "training"}``) once it ended.

        A call that died (timeout, out of memory, lost container) answers
        ``{"status": "failed", "error": <why>}``.
        """

    def pull(self, job_id: str, start: int) -> list[dict[str, Any]]:
        """The job's recorded requests from index ``start`` on, in order."""

    def fetch_adapter(self, remote: str, dest: Path) -> Path:
        """Copy the adapter folder ``remote`` (a path under the Volume's mount) to ``dest``."""

    def put_adapter(self, run_id: str, local: Path) -> str:
        """The run's adapter folder as a Modal job sees it (under the Volume's mount); uploads ``local`` when absent."""

    def cancel(self, call_id: str) -> None:
        """Cancel the call (its container is stopped); a call that already ended is left as it is."""


class ModalCloud:
    """The real backend: the deployed ``run_job`` function, its progress Dict and adapters Volume."""

    def spawn(self, payload: dict[str, Any], gpu: str) -> str:
        import modal

        from modal.exception import AuthError, NotFoundError

        spec = payload.get("spec") or {}
        name = defaults.MODAL_CLUSTERED_FUNCTION_NAME if int(spec.get("nodes") or 1) > 1 else \
            defaults.MODAL_FUNCTION_NAME
        function = modal.Function.from_name(defaults.MODAL_APP_NAME, name)
        if gpu != defaults.MODAL_GPU:
            function = function.with_options(gpu=gpu)
        try:
            return function.spawn(payload).object_id
        except AuthError as exc:
            raise RuntimeError(
                f"Modal refused this machine's credentials ({exc}); run `modal token new` where the platform "
                "runs (or set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET), or train with target='local' (docs/modal.md)"
            ) from exc
        except NotFoundError as exc:
            raise RuntimeError(
                f"the Modal app {defaults.MODAL_APP_NAME!r} is not deployed in this workspace ({exc}); deploy it "
                "with `modal deploy -m whileai.jobs.modal_app` (docs/modal.md)"
            ) from exc

    def poll(self, call_id: str) -> dict[str, Any] | None:
        import modal
        from modal.exception import OutputExpiredError

        try:
            return modal.FunctionCall.from_id(call_id).get(timeout=0)
        except OutputExpiredError:
            return {"status": "failed", "error": f"Modal call {call_id} ended and its result expired unread"}
        except modal.exception.TimeoutError as exc:
            if type(exc) is modal.exception.TimeoutError:
                return None  # still running
            return {"status": "failed", "error": f"Modal call {call_id} timed out ({type(exc).__name__}: {exc}); "
                    "raise MODAL_TIMEOUT_S or train fewer steps"}
        except Exception as exc:  # the container died: out of memory, preempted, crashed
            return {"status": "failed", "error": f"Modal call {call_id} failed: {type(exc).__name__}: {exc}"}

    def pull(self, job_id: str, start: int) -> list[dict[str, Any]]:
        import modal

        from whileai.platform.launcher.progress import count_key, progress_key

        store = modal.Dict.from_name(defaults.MODAL_PROGRESS_DICT, create_if_missing=True)
        count = int(store.get(count_key(job_id), 0) or 0)
        return [store.get(progress_key(job_id, i)) for i in range(start, count)]

    def fetch_adapter(self, remote: str, dest: Path) -> Path:
        import modal

        volume = modal.Volume.from_name(defaults.MODAL_VOLUME_NAME)
        prefix = Path(remote).relative_to(defaults.MODAL_VOLUME_MOUNT).as_posix()
        for entry in volume.listdir(prefix, recursive=True):
            # modal's stubs do not re-export FileEntryType from modal.volume, where modal 1.x defines it
            if entry.type != modal.volume.FileEntryType.FILE:  # type: ignore[attr-defined]
                continue
            target = dest / Path(entry.path).relative_to(prefix)
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as f:
                for chunk in volume.read_file(entry.path):
                    f.write(chunk)
        return dest


    def put_adapter(self, run_id: str, local: Path) -> str:
        import modal

        remote = f"/{run_id}"
        volume = modal.Volume.from_name(defaults.MODAL_VOLUME_NAME, create_if_missing=True)
        try:
            present = any(True for _ in volume.iterdir(remote))
        except Exception:  # not found: a local run's adapter, not uploaded yet
            present = False
        if not present:
            if not Path(local).is_dir():
                raise RuntimeError(f"run {run_id}'s adapter is neither on the Modal volume "
                                   f"{defaults.MODAL_VOLUME_NAME!r} nor on this machine ({local})")
            with volume.batch_upload() as batch:  # committed when the block ends
                batch.put_directory(str(local), remote)
        return f"{defaults.MODAL_VOLUME_MOUNT}{remote}"


    def cancel(self, call_id: str) -> None:
        import modal

        modal.FunctionCall.from_id(call_id).cancel()


_BACKEND: ModalBackend | None = None
_BACKEND_LOCK = threading.Lock()


def set_backend(backend: ModalBackend | None) -> ModalBackend | None:
    """Install the backend Modal jobs use (None restores the real one); returns the previous one."""
    global _BACKEND
    with _BACKEND_LOCK:
        previous, _BACKEND = _BACKEND, backend
    return previous


def get_backend() -> ModalBackend:
    with _BACKEND_LOCK:
        return _BACKEND if _BACKEND is not None else ModalCloud()


def modal_gpu(spec: dict[str, Any]) -> str:
    """The GPU a Modal job asks for: ``config["gpu"]``, else MODAL_GPU_ENV, else MODAL_GPU."""
    return str(spec.get("gpu") or os.environ.get(defaults.MODAL_GPU_ENV) or defaults.MODAL_GPU)


def launch_modal(store: Any, account_id: str, job: JobRecord, start: Path | None = None) -> JobRecord:
    """Spawn the job on Modal with its rows and run record in the payload; the call id goes on the job.

    ``start`` is the adapter folder of the run it continues (``init_from``): it
    goes to the adapters Volume the way serving's does (uploaded unless there
    already), and the job reads it there. So do the adapters of the judges the launch resolved (the job row's
    ``platform.gold`` and ``platform.reward_rm``): the payload carries the row's platform fields with the Volume's
    copies named.
    """
    spec = {**(job.get("spec") or {}), "target": "modal"}
    spec["gpu"] = modal_gpu(spec)
    nodes, processes = int(spec.get("nodes") or 1), int(spec.get("processes") or 1)
    if nodes > 1 and nodes != defaults.MODAL_CLUSTER_NODES:
        raise ValueError(f"nodes={nodes} on Modal: the deployed clustered function runs MODAL_CLUSTER_NODES="
                         f"{defaults.MODAL_CLUSTER_NODES} containers (Modal fixes a cluster's size at deploy); pass "
                         f"nodes={defaults.MODAL_CLUSTER_NODES} or 1, or redeploy with another size")
    if start is not None:
        spec["init_adapter"] = get_backend().put_adapter(str(spec["init_from"]), start)
    platform = _judges_on_volume(platform_of(job))
    rows = store.dataset_rows(account_id, spec["dataset"])
    holdout = store.dataset_rows(account_id, spec["holdout"]) if spec.get("holdout") else None
    run = store.get_run(account_id, job["run_id"], series=False)
    payload = {"job_id": job["id"], "spec": spec, "platform": platform_json(platform),
               "rows": rows, "holdout_rows": holdout, "run": run}
    if (run.get("summary") or {}).get("resumed"):  # the (metric, step) pairs the run holds: not logged again
        series = store.get_run(account_id, job["run_id"])["series"]
        payload["stored"] = sorted({(name, p["step"]) for p in series if isinstance(p.get("step"), int)
                                    for name in p.get("metrics") or {}})
    # processes per node are GPUs per container ("H100:8"); the spec keeps the GPU's name for its price
    call_id = get_backend().spawn(payload, spec["gpu"] + (f":{processes}" if processes > 1 else ""))
    platform = updated(platform, pulled=0, launched_at=time.time())
    return store.update_job(account_id, job["id"], {"call_id": call_id, "status": "running", "spec": spec,
                                                    "platform": platform})


def _judges_on_volume(platform: JobPlatform) -> JobPlatform:
    """``platform`` with each resolved judge's adapter put on the adapters Volume, named by its Volume path."""
    moved = {}
    for field in ("gold", "reward_rm"):
        judge: ResolvedJudge | None = getattr(platform, field)
        if judge is not None:
            remote = get_backend().put_adapter(judge.run_id, Path(judge.adapter))
            moved[field] = updated(judge, adapter=remote)
    return updated(platform, **moved)


def replay(store: Any, account_id: str, run_id: str, entries: list[dict[str, Any]]) -> None:
    """Apply recorded tracker requests to the run: points (idempotent by batch id) and record changes."""
    for entry in entries:
        _apply(store, account_id, run_id, entry)


def _apply(store: Any, account_id: str, run_id: str, entry: dict[str, Any] | None) -> None:
    if not entry:
        return
    body = entry.get("json") or {}
    path = entry.get("path") or ""
    if entry.get("method") == "POST" and path.endswith(f"/runs/{run_id}/points"):
        store.add_points(account_id, run_id, body["batch_id"], body["points"])
    elif entry.get("method") == "PATCH" and path.endswith(f"/runs/{run_id}"):
        store.update_run(account_id, run_id, body)


def _finishes(entry: dict[str, Any] | None) -> bool:
    """Whether a recorded request ends the run (a PATCH with a final status)."""
    body = (entry or {}).get("json") or {}
    return (entry or {}).get("method") == "PATCH" and body.get("status") in FINISHED


def reconcile_modal(store: Any, account_id: str, job: JobRecord) -> JobRecord:
    """Pull what the job recorded, and settle it when its call has ended: exactly once, however many
    readers ask at the same time.

    The reader that takes the job's lease in the store (MODAL_PULL_LEASE_S) pulls,
    replays and advances ``platform.pulled``; the others answer the job as it
    stands. Works across server processes on SQLite and PostgreSQL.

    While the call runs, what it recorded is replayed up to the request that
    finishes the run: the run turns done only once the call has ended and its
    adapter has been copied home, so a run read as done can be served or
    continued from at once.
    """
    if not job.get("call_id"):
        return job
    holder = secrets.token_hex(8)
    if not store.lease_job(account_id, job["id"], holder, defaults.MODAL_PULL_LEASE_S):
        return job
    try:
        job = store.get_job(account_id, job["id"])  # what the previous holder left, read under the lease
        if job["status"] in FINISHED:
            return job
        return _pull_and_settle(store, account_id, job)
    finally:
        store.release_job(job["id"], holder)


def _pull_and_settle(store: Any, account_id: str, job: JobRecord) -> JobRecord:
    from whileai.platform.launcher._shared import adapter_dir, end_job

    backend = get_backend()
    platform = platform_of(job)
    # a Modal job is launched for a run, and reconcile_modal reads only one that has its call
    run_id, call_id = cast(str, job["run_id"]), cast(str, job["call_id"])
    start = platform.pulled or 0
    try:
        result = backend.poll(call_id)  # polled before pulling: a finished call has recorded everything
        entries = backend.pull(job["id"], start)
    except Exception as exc:  # Modal unreachable from here right now: try again on the next read
        _log.warning("could not reach Modal for %s: %s", job["id"], exc)
        return job
    if result is None:  # still running: the run's final status waits for the call's end (and its adapter)
        entries = entries[: next((i for i, e in enumerate(entries) if _finishes(e)), len(entries))]
    if entries:
        applied = 0
        try:
            for entry in entries:
                _apply(store, account_id, run_id, entry)
                applied += 1
        finally:  # what was applied stays counted, so the next pull starts after it
            job = store.update_job(account_id, job["id"], {
                "platform": updated(platform, pulled=start + applied), "heartbeat_at": time.time()})
    if result is None:
        return job
    if result.get("status") == "done" and result.get("adapter"):
        local = adapter_dir(run_id)
        try:
            backend.fetch_adapter(result["adapter"], local)
            store.update_run(account_id, job["run_id"], {"summary": {
                "adapter": str(local), "adapter_remote": f"modal://{defaults.MODAL_VOLUME_NAME}{result['adapter']}",
            }})
        except Exception as exc:
            store.update_run(account_id, job["run_id"], {"summary": {
                "adapter_remote": f"modal://{defaults.MODAL_VOLUME_NAME}{result['adapter']}",
                "adapter_note": f"the adapter stayed on the Modal Volume: copying it here failed ({exc})",
            }})
    return end_job(store, account_id, job, result.get("status") or "failed", result.get("error"))
