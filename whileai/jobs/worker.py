"""The local job's process: ``python -m whileai.jobs.worker <job_id>``.

Started detached by the runner with a job-scoped API key in its environment. It
reads its job and the run, beats every JOB_HEARTBEAT_S on its own thread,
runs the job body, and reports the end (``POST /jobs/{id}/end``, which revokes
its key). A crash fails the run with the error text; SIGTERM stops it. A
heartbeat answered 401 means the platform revoked its key (``run.stop()``, or a
job settled as hung): the process exits at once.

Under torchrun (``processes`` or ``nodes`` past one) every rank runs this module: rank 0
does all of the above; the others train their share, write nothing to the run, and prefix
their log lines with their rank. A rank ended by torchrun after another failed leaves the
report to the launcher's summary, which names the failed rank.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from whileai.core.errors import RankEnded
from whileai.jobs._client import error_text, job_client
from whileai.platform import defaults

__all__ = ["main", "job_client", "Heartbeat", "error_text", "RankEnded"]


class Heartbeat:
    """Marks the job alive every JOB_HEARTBEAT_S from a daemon thread; a failed beat is retried next time."""

    def __init__(self, client: Any, job_id: str):
        self.client = client
        self.job_id = job_id
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"whileai-heartbeat-{job_id}", daemon=True)

    def beat(self) -> None:
        from whileai.core.errors import PlatformError

        try:
            self.client.request("PATCH", f"/jobs/{self.job_id}", json={"heartbeat_at": time.time()})
        except PlatformError as exc:
            if exc.status == 401 and not self._stop.is_set():
                # the platform revoked this job's key: it was stopped, or given up on as hung; nothing this
                # process sends is taken any more, so it ends here instead of training on for nobody
                print(f"whileai job {self.job_id}: its key was revoked (the job was stopped); exiting",
                      file=sys.stderr, flush=True)
                os._exit(3)
        except Exception:  # the next beat tries again; staleness is judged on the platform
            pass

    def _loop(self) -> None:
        while not self._stop.wait(defaults.JOB_HEARTBEAT_S):
            self.beat()

    def start(self) -> Heartbeat:
        self.beat()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()


def _on_sigterm(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt("stopped by SIGTERM")


def _on_sigterm_rank(_signum: int, _frame: Any) -> None:
    raise RankEnded("ended by the launcher: another rank of the job failed, or the launcher was stopped")


def _other_rank(client: Any, job: dict[str, Any], rank: int) -> int:
    """A rank past the first: trains its share and writes nothing to the run (rank 0 does, once).

    It reads the job and its rows with the job's key, and its log lines carry its rank. An
    exception ends it with its traceback; torchrun then ends the others and the launcher's
    report names this rank.
    """
    from whileai.jobs.body import OtherRankRun, job_spec, run_job
    from whileai.platform.launcher.jobs import adapter_dir, checkpoint_dir, job_dir

    try:
        spec = job_spec(job["spec"] or {})
        rows = client.request("GET", f"/datasets/{spec.dataset}/rows")["rows"]
        holdout = client.request("GET", f"/datasets/{spec.holdout}/rows")["rows"] if spec.holdout else None
        run_job(spec, rows, holdout, OtherRankRun(job["run_id"]), adapter_dir(job["run_id"]),
                job_dir(job["id"]) / f"rank-{rank}", checkpoints=checkpoint_dir(job["run_id"]))
    except RankEnded:
        return 143
    except BaseException as exc:  # noqa: BLE001 - its traceback is its report; torchrun names the rank
        print(error_text(exc), file=sys.stderr, flush=True)
        return 1
    print(f"whileai job {job['id']}: rank {rank} done", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    from whileai.jobs.body import JobRun, job_spec, run_job, stored_pairs
    from whileai.platform.launcher.jobs import adapter_dir, checkpoint_dir, job_dir

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m whileai.jobs.worker <job_id>", file=sys.stderr)
        return 2
    job_id = args[0]
    from whileai.jobs.distributed import end_with_parent, prefix_output, world

    place = world()
    if place.size > 1:  # a rank under torchrun: ends with its launcher, and its lines carry its rank
        end_with_parent()
        prefix_output(place.rank)
    signal.signal(signal.SIGTERM, _on_sigterm if place.size == 1 else _on_sigterm_rank)
    payload = os.environ.get("WHILEAI_JOB_PAYLOAD")
    if payload:  # a rank of a Modal job: everything it needs is in the payload file (whileai.jobs.modal_app)
        from whileai.jobs.modal_app import payload_rank

        return payload_rank(Path(payload))
    client = job_client()
    job = client.request("GET", f"/jobs/{job_id}")
    if not place.first:
        return _other_rank(client, job, place.rank)
    run = JobRun(client.request("GET", f"/runs/{job['run_id']}", params={"series": "false"}), client)
    beat = Heartbeat(client, job_id).start()
    status, error = "done", None
    try:
        # the one typed spec: a job row that is not one fails the job here, by name
        spec = job_spec(job["spec"] or {})
        print(f"whileai job {job_id}: {spec.method} on {spec.dataset} for {run.id}", flush=True)
        rows = client.request("GET", f"/datasets/{spec.dataset}/rows")["rows"]
        holdout = None
        if spec.holdout:
            holdout = client.request("GET", f"/datasets/{spec.holdout}/rows")["rows"]
        def logged() -> frozenset[tuple[str, int]]:  # what the run holds already (read only when resuming)
            return stored_pairs(client.request("GET", f"/runs/{run.id}").get("series"))

        run_job(spec, rows, holdout, run, adapter_dir(run.id), job_dir(job_id), checkpoints=checkpoint_dir(run.id),
                logged=logged)
    except RankEnded:
        # another rank failed and torchrun is ending this one: keep what was logged and leave the report to
        # the launcher, whose summary names the failed rank (the platform reads it from the job's log)
        print(f"whileai job {job_id}: rank 0 ended by the launcher (another rank failed)", flush=True)
        return 143
    except BaseException as exc:  # noqa: BLE001 - every way out is reported, then the process ends
        if place.size > 1 and not isinstance(exc, KeyboardInterrupt):
            # a job of several ranks is reported by its launcher: its summary names the rank that failed first (a
            # peer's death reaches rank 0 as a collective's error, which is not the cause); the platform reads it
            print(error_text(exc), file=sys.stderr, flush=True)
            return 1
        status = "stopped" if isinstance(exc, KeyboardInterrupt) else "failed"
        error = error_text(exc)
        print(error, file=sys.stderr, flush=True)
        run.release()
        run.finish(status, error=error)
    finally:
        beat.stop()
        run.flush()
    try:
        client.request("POST", f"/jobs/{job_id}/end", json={"status": status, "error": error})
    except Exception as exc:  # the platform settles the job when it next reads it
        print(f"could not report the job's end: {exc}", file=sys.stderr, flush=True)
    print(f"whileai job {job_id}: {status}", flush=True)
    return 0 if status == "done" else 1


if __name__ == "__main__":
    sys.exit(main())
