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
report to the launcher's summary, which names the failed rank. A rank whose launcher died
gets SIGTERM (``end_with_parent``) and RANK_ORPHAN_GRACE_S to end the job body, rank 0
flushing its points, before it SIGKILLs itself; each rank records when it started and how it
ended (``mark_rank``), so the platform names a rank killed without a word even when the
launcher died before it could.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from whileai.core.errors import RankEnded
from whileai.jobs._client import error_text, job_client
from whileai.platform import defaults

if TYPE_CHECKING:
    from whileai.jobs.body import JobRun
    from whileai.jobs.distributed import World

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
    """A rank asked to end: by torchrun (another rank failed, or a stop), or by the kernel on the launcher's death.

    Once only: the signal may come twice (the launcher's spawning thread and its last thread each end), and a second
    RankEnded raised inside the flush would lose the points being sent. The rank SIGKILLs itself after
    RANK_ORPHAN_GRACE_S either way: a dead launcher cannot, and a live one's own grace is longer.
    """
    from whileai.jobs import defaults as job_defaults
    from whileai.jobs.distributed import launcher_gone

    _ending()
    if launcher_gone(wait=job_defaults.RANK_LAUNCHER_CHECK_S):
        raise RankEnded("its launcher (torchrun) ended: this rank saves what it has and ends")
    raise RankEnded("ended by the launcher: another rank of the job failed, or the launcher was stopped")


_ENDING = threading.Event()


def _ending() -> None:
    """A rank on its way out: a later SIGTERM is ignored (raised inside the flush, it would lose the points being
    sent), and the rank SIGKILLs itself after RANK_ORPHAN_GRACE_S should the way out hang."""
    from whileai.jobs import defaults as job_defaults
    from whileai.jobs.distributed import kill_after

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if not _ENDING.is_set():
        _ENDING.set()
        kill_after(job_defaults.RANK_ORPHAN_GRACE_S)


class _RankEnd(TypedDict):
    """What a rank's record says of its end (``distributed.mark_rank``)."""

    ended: float  # when, as time.time()
    how: str
    launcher_alive: bool
    step: NotRequired[int | None]  # rank 0's newest logged point


def _ended(folder: Path, rank: int, how: str, run: Any = None) -> None:
    """Record how this rank ended (``mark_rank``), and whether its launcher still ran; never raises."""
    from whileai.jobs.distributed import launcher_gone, mark_rank

    fields: _RankEnd = {"ended": time.time(), "how": how, "launcher_alive": not launcher_gone()}
    if run is not None:
        fields["step"] = getattr(run, "logged_step", None)  # its newest point, not the progress bar (a step can end
        # before its point is logged, when the signal comes between the two)
    try:
        mark_rank(folder, rank, **fields)
    except Exception as exc:  # the record helps name a cause; the job's end does not wait on it
        print(f"could not record rank {rank}'s end: {exc}", file=sys.stderr, flush=True)


def _other_rank(client: Any, job: dict[str, Any], rank: int) -> int:
    """A rank past the first: trains its share and writes nothing to the run (rank 0 does, once).

    It reads the job and its rows with the job's key, and its log lines carry its rank. An
    exception ends it with its traceback; torchrun then ends the others and the launcher's
    report names this rank.
    """
    from whileai.core.jobrow import read_job_row
    from whileai.jobs.body import OtherRankRun, run_job
    from whileai.core.paths import adapter_dir, checkpoint_dir, job_dir

    ranks = job_dir(job["id"]) / "ranks"
    try:
        row = read_job_row(job)  # its spec and the platform's fields, typed: a row that is not one fails here
        spec, run_id = row.spec, str(row.run_id)
        rows = client.request("GET", f"/datasets/{spec.dataset}/rows")["rows"]
        holdout = client.request("GET", f"/datasets/{spec.holdout}/rows")["rows"] if spec.holdout else None
        run_job(spec, rows, holdout, OtherRankRun(run_id), adapter_dir(run_id), job_dir(row.id) / f"rank-{rank}",
                checkpoints=checkpoint_dir(run_id), platform=row.platform)
    except RankEnded as exc:
        _ended(ranks, rank, f"ended: {exc}")
        return 143
    except BaseException as exc:  # noqa: BLE001 - its traceback is its report; torchrun names the rank
        _ending()
        print(error_text(exc), file=sys.stderr, flush=True)
        _ended(ranks, rank, f"failed: {type(exc).__name__}: {exc}")
        return 1
    _ended(ranks, rank, "done")
    print(f"whileai job {job['id']}: rank {rank} done", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m whileai.jobs.worker <job_id>", file=sys.stderr)
        return 2
    job_id = args[0]
    from whileai.jobs.distributed import world

    place = world()
    ended = _take_place(job_id, place)
    if ended is not None:
        return ended
    client = job_client()
    job = client.request("GET", f"/jobs/{job_id}")
    if not place.first:
        return _other_rank(client, job, place.rank)
    return _first_rank(client, job, job_id, place)


def _take_place(job_id: str, place: World) -> int | None:
    """Set this process up for its place in the job: its signals, its log prefix, its rank's record.

    Returns the exit code when the process ends here (a rank of a Modal job runs from its payload;
    a rank whose launcher is gone ends), else None.
    """
    from whileai.jobs.distributed import end_with_parent, prefix_output
    from whileai.core.paths import job_dir

    signal.signal(signal.SIGTERM, _on_sigterm if place.size == 1 else _on_sigterm_rank)
    if place.size > 1:  # a rank under torchrun: ends with its launcher, and its lines carry its rank
        prefix_output(place.rank)
    payload = os.environ.get("WHILEAI_JOB_PAYLOAD")
    if payload:  # a rank of a Modal job: everything it needs is in the payload file (whileai.jobs.modal_app)
        from whileai.jobs.modal_app import payload_rank

        if place.size > 1:
            end_with_parent()
        return payload_rank(Path(payload))
    if place.size > 1:
        from whileai.jobs.distributed import mark_rank

        ranks = job_dir(job_id) / "ranks"
        mark_rank(ranks, place.rank, pid=os.getpid(), started=time.time(), launcher=os.getppid())
        try:
            end_with_parent()
        except RankEnded as exc:  # the launcher was gone before this rank could tie itself to it
            _ended(ranks, place.rank, f"ended: {exc}")
            return 143
    return None


def _first_rank(client: Any, job: dict[str, Any], job_id: str, place: World) -> int:
    """Rank 0 (or the only process): trains under a heartbeat, finishes the run and reports the job's end."""
    from whileai.jobs.body import JobRun
    from whileai.core.paths import job_dir

    ranks = job_dir(job_id) / "ranks"
    run = JobRun(client.request("GET", f"/runs/{job['run_id']}", params={"series": "false"}), client)
    beat = Heartbeat(client, job_id).start()
    status, error = "done", None
    try:
        _train(client, job, job_id, run)
    except RankEnded as exc:
        # another rank failed and torchrun is ending this one, or the launcher died: keep what was logged (the
        # flush below) and leave the report to the launcher's summary, or to the platform reading the ranks'
        # records (``mark_rank``) where the launcher could not write one
        print(f"whileai job {job_id}: rank 0 {exc}", flush=True)
        beat.stop()
        run.flush()
        _ended(ranks, 0, f"ended: {exc}", run)
        return 143
    except BaseException as exc:  # noqa: BLE001 - every way out is reported, then the process ends
        if place.size > 1:
            _ending()
        if place.size > 1 and not isinstance(exc, KeyboardInterrupt):
            # a job of several ranks is reported by its launcher: its summary names the rank that failed first (a
            # peer's death reaches rank 0 as a collective's error, which is not the cause); the platform reads it
            print(error_text(exc), file=sys.stderr, flush=True)
            beat.stop()
            run.flush()
            _ended(ranks, 0, f"failed: {type(exc).__name__}: {exc}", run)
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
    if place.size > 1:
        _ended(ranks, 0, status, run)
    print(f"whileai job {job_id}: {status}", flush=True)
    return 0 if status == "done" else 1


def _train(client: Any, job: dict[str, Any], job_id: str, run: JobRun) -> None:
    """Read the job's spec and rows from the platform and run the job's body on them."""
    from whileai.core.jobrow import read_job_row
    from whileai.jobs.body import run_job, stored_pairs
    from whileai.core.paths import adapter_dir, checkpoint_dir, job_dir

    # the one typed row (its spec, the platform's fields): a job row that is not one fails the job here, by name
    row = read_job_row(job)
    spec = row.spec
    print(f"whileai job {job_id}: {spec.method} on {spec.dataset} for {run.id}", flush=True)
    rows = client.request("GET", f"/datasets/{spec.dataset}/rows")["rows"]
    holdout = None
    if spec.holdout:
        holdout = client.request("GET", f"/datasets/{spec.holdout}/rows")["rows"]
    def logged() -> frozenset[tuple[str, int]]:  # what the run holds already (read only when resuming)
        return stored_pairs(client.request("GET", f"/runs/{run.id}").get("series"))

    run_job(spec, rows, holdout, run, adapter_dir(run.id), job_dir(job_id), checkpoints=checkpoint_dir(run.id),
            logged=logged, platform=row.platform)


if __name__ == "__main__":
    sys.exit(main())
