"""Run tracking machinery: the per-run Tracker buffers points, sends them in batches, retries, spools what cannot go.

:class:`Tracker` holds one run's unsent data. ``log`` only appends to an
in-memory buffer. Sending happens in :meth:`Tracker.flush`, called by the
user, by ``finish`` and, every FLUSH_INTERVAL_S, by one daemon thread per
process (:mod:`._flush`). A send that fails keeps its batch (and its
``batch_id``, so the platform stores a resent batch once), counts an error and
backs off (RETRY_BACKOFF_S .. RETRY_BACKOFF_MAX_S). At interpreter exit what is
still unsent goes to the spool (:mod:`._spool`), which a later flush or
``python -m whileai sync`` (:func:`sync_main`) delivers.

A run made while the platform could not be reached (:mod:`._offline`) carries
its create request (:meth:`Tracker.defer_create`): sent before anything else,
and written to the spool ahead of the run's points. In offline mode nothing is
sent: each flush writes what is new to the spool instead, marked ``held`` so
that only ``python -m whileai sync`` delivers it.
"""

from __future__ import annotations

import math
import operator
import os
import random
import threading
import time
import uuid
import warnings
from collections import deque
from typing import Any

from whileai.domain.tracking import _flush, _spool
from whileai.domain import defaults
from whileai.domain.tracking._flush import _FLUSHER, _Flusher, flush_all  # noqa: F401  (re-exported: tests and benchmarks reach the flush thread here)
from whileai.domain.tracking._spool import Point, SpoolRecord, RecordHead
from whileai.domain.tracking._spool import sync_main  # python -m whileai sync (wired in whileai/__main__.py)
from whileai.core.errors import NotFoundError, PlatformError, TrackingWarning
from whileai.core.statuses import REPORTED_ENDS

__all__ = ["Tracker", "FINAL_STATUSES", "to_float", "jsonable", "sync_main", "flush_all"]

#: statuses that end a run (``TrainingRun.finish``)
FINAL_STATUSES = REPORTED_ENDS  # what a run may end itself with


def to_float(value: Any) -> float | None:
    """A finite float for any numeric scalar (int, float, bool, numpy, torch, Decimal), else None."""
    if value is None or isinstance(value, (str, bytes, bytearray, complex)):
        return None
    try:
        shape = getattr(value, "shape", None)
        if shape is not None and len(shape) > 0:  # a one-element array or tensor counts; a bigger one does not
            value = value.item()
        number = float(value)
    except Exception:
        return None
    return number if math.isfinite(number) else None


def jsonable(value: Any, where: str = "value") -> Any:
    """``value`` as plain JSON (numpy/torch scalars and arrays to numbers and lists, non-finite floats to None).

    Raises TypeError naming ``where`` for anything with no JSON form.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if hasattr(value, "tolist"):  # numpy arrays and scalars, torch tensors
        return jsonable(value.tolist(), where)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    number = to_float(value)
    if number is not None:
        return number
    raise TypeError(
        f"{where}={value!r} ({type(value).__name__}) has no JSON form; pass numbers, strings, "
        "lists or dicts of them (str(...) it first if it is a label)"
    )


_time = time.time
_STEP = operator.itemgetter("step")
_INT_EXACT = 2**53  # ints beyond this have no exact float; the slow path converts or skips them


class Tracker:
    """One run's unsent points and record changes, and the sending of them. Thread-safe."""

    def __init__(self, client: Any, run_id: str):
        self.client = client
        self.run_id = run_id
        # points are {"step", "metrics", "ts"}, the wire shape, so a send encodes them as they are
        self.buffer: deque[Point] = deque()  # logged, not yet in a batch
        self.batches: deque[tuple[str, list[Point]]] = deque()  # sent or not, unacknowledged
        self.errors = 0
        self.skipped = 0
        self.last_error: str | None = None
        self.step: int | None = None  # the highest step logged or set by progress
        self.logged_step: int | None = None  # the highest step of a point logged (progress alone does not move it)
        self.total_steps: int | None = None
        self.finished = False
        self.registered = False
        self.owned = False  # made by training_run in this process: ended at exit if never finished
        self._next_step = 0
        self._warned: set[str] = set()
        self._send_lock = threading.Lock()  # one sender at a time (network I/O happens under it)
        self._state = threading.Lock()  # guards _patch; never held across I/O
        self._patch: dict[str, Any] = {}
        self._patch_version = 0
        self._bar_step: int | None = None  # the step progress() last set
        self._points_top = -1  # the highest step among points the platform has acknowledged
        self._sent_step: int | None = None
        self._sent_total: int | None = None
        self._failures = 0  # consecutive
        self._retry_at = 0.0
        self._gone = False
        # a run named by the SDK because the platform could not be reached (or offline mode): its POST /runs
        # body until the platform has answered it, and whether the spool already holds that request
        self._create: dict[str, Any] | None = None
        self._create_spooled = False
        self._names: set[str] = set()  # metric names logged (RUN_METRIC_NAMES_MAX)
        self._batch_errors: dict[str, int] = {}  # batch id -> server errors (BATCH_SERVER_ERRORS_MAX)
        self._last_sent = time.monotonic()  # the last send that reached the platform (heartbeats)
        self.lost = 0  # points the spool could not keep (disk full, SPOOL_MAX_BYTES), said once at exit
        self.spool_error: str | None = None
        self.offline = False  # WHILEAI_MODE=offline: nothing is sent; every flush writes to the spool instead
        self.announced = False  # said on stderr, when it started, that it was offline (see _offline): once is enough
        self.mirror: Any = None  # report_to: the run's Mirrors (whileai.domain.tracking.mirror), fed every point kept
        #: (metric, step) pairs the run already has (a resumed job's): logging them again stores nothing
        self.stored: frozenset[tuple[str, int]] = frozenset()

    # -- recording (no I/O) -------------------------------------------------

    def log(self, step: Any, metrics: dict[str, Any]) -> None:
        """Buffer one point; never raises and never touches the network.

        ``metrics`` is kept as given when every value is a finite int or float
        (the caller hands over a fresh dict: ``**kwargs`` or a copy); otherwise
        a cleaned copy is kept and the values that are not finite numbers are
        skipped and counted.
        """
        clean = metrics
        for value in metrics.values():  # the fast path: plain finite numbers, checked without a call
            kind = type(value)
            if kind is float:
                if value - value != 0.0:  # inf and nan
                    clean = self._clean(metrics)
                    break
            elif kind is not int or not -_INT_EXACT < value < _INT_EXACT:
                clean = self._clean(metrics)
                break
        if not self._names.issuperset(clean):
            clean = self._within_names(clean)
        if step is None:
            step = self._next_step
        elif type(step) is not int or step < 0:
            step = self._fix_step(step)
        self._next_step = step + 1
        if self.stored:  # a resumed job re-runs steps its interrupted job logged: the run keeps one point each
            clean = {k: v for k, v in clean.items() if (k, step) not in self.stored}
        if clean:
            self.buffer.append({"step": step, "metrics": clean, "ts": _time()})
            if self.step is None or step > self.step:
                self.step = step
            first = self.logged_step is None
            if first or step > self.logged_step:
                self.logged_step = step
            if not self.registered:
                _flush.FLUSHER.add(self)
            if first:  # a run's first point is sent at once: its curve starts when its training does
                _flush.FLUSHER.wake.set()
            if self.mirror is not None:  # the same point, as kept here, to the report_to trackers (never raises)
                self.mirror.log(step, clean)

    def _clean(self, metrics: dict[str, Any]) -> dict[str, float]:
        clean = {}
        for key, value in metrics.items():
            number = to_float(value)
            if number is None:
                self._skip(key, value)
            else:
                clean[key] = number
        return clean

    def _within_names(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """``metrics`` without names past RUN_METRIC_NAMES_MAX (skipped, counted, said once)."""
        cap = defaults.RUN_METRIC_NAMES_MAX
        kept = {}
        for key, value in metrics.items():
            if key in self._names or len(self._names) < cap:
                self._names.add(key)
                kept[key] = value
            else:
                self.skipped += 1
                if "\0names" not in self._warned:
                    self._warned.add("\0names")
                    try:
                        warnings.warn(
                            f"{self.run_id}: {key!r} would be metric name {cap + 1}; a run keeps at most {cap} "
                            "(RUN_METRIC_NAMES_MAX), so values under new names are not logged. Every one skipped "
                            "is counted in run.skipped; this warning shows once",
                            TrackingWarning,
                            stacklevel=4,
                        )
                    except Exception:
                        pass
        return kept

    def _fix_step(self, step: Any) -> int:
        number = to_float(step)
        if number is None or number < 0 or number != int(number):
            self._skip("step", step)
            return self._next_step
        return int(number)

    def _skip(self, key: str, value: Any) -> None:
        self.skipped += 1
        if key in self._warned:
            return
        self._warned.add(key)
        try:
            shown = repr(value)[:80]
        except Exception:
            shown = f"<{type(value).__name__}>"
        try:
            warnings.warn(
                f"{self.run_id}: {key}={shown} is not a finite number (steps: a whole number >= 0) and was not "
                "logged; every skip is counted in run.skipped, and this warning shows once per name",
                TrackingWarning,
                stacklevel=5,
            )
        except Exception:  # warnings turned into errors must still not stop the training loop
            pass

    def progress(self, step: int | None, total_steps: int | None) -> None:
        if step is not None:
            self.step = step if self.step is None else max(self.step, step)
            self._bar_step = step
            self._next_step = max(self._next_step, step + 1)
        if total_steps is not None:
            self.total_steps = total_steps
        if not self.registered:
            _flush.FLUSHER.add(self)

    def update(self, fields: dict[str, Any] | None = None, summary: dict[str, Any] | None = None) -> None:
        """Queue record changes (merged into the next PATCH; ``summary`` merges key by key)."""
        with self._state:
            if fields:
                self._patch.update(fields)
            if summary:
                self._patch.setdefault("summary", {}).update(summary)
            self._patch_version += 1
        if not self.registered:
            _flush.FLUSHER.add(self)

    # -- state ---------------------------------------------------------------

    def defer_create(self, body: dict[str, Any], offline: bool) -> None:
        """Keep the run's create request (``{"id": ..., ...}``) to deliver before its points (offline mode: to spool)."""
        self._create = dict(body)
        self.offline = offline
        self.announced = True
        _flush.FLUSHER.add(self)

    def own(self) -> None:
        """Mark the run as this process's to end: at exit, if never finished, it is marked stopped
        (or failed, when an uncaught exception ended the process) rather than left running."""
        self.owned = True
        _flush.FLUSHER.add(self)
        _flush.watch_uncaught()
        _flush.watch_signals()

    def end_at_exit(self) -> None:
        if not self.owned or self.finished or self._gone:
            return
        exc = _flush.uncaught()
        if exc is None and _flush.signalled():
            status, error = "stopped", f"terminated by signal {_flush.signalled()} (SIGTERM)"
        elif exc is None:
            status, error = "stopped", "the process exited before run.finish() was called (use `with run:` to end it)"
        elif isinstance(exc, KeyboardInterrupt):
            status, error = "stopped", "interrupted (KeyboardInterrupt)"
        else:
            status, error = "failed", f"{type(exc).__name__}: {exc}"
        self.update(fields={"status": status, "error": error})
        self.finished = True

    def pending_points(self) -> int:
        return len(self.buffer) + sum(len(points) for _, points in list(self.batches))

    def has_pending(self) -> bool:
        if self._gone:
            return False
        return bool(
            (self._create is not None and not (self.offline and self._create_spooled))
            or self.buffer
            or self.batches
            or self._patch
            or (self._bar_step is not None and self._bar_step != self._sent_step)
            or (self.total_steps is not None and self.total_steps != self._sent_total)
        )

    def due(self) -> bool:
        return time.monotonic() >= self._retry_at

    # -- sending ---------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> bool:
        """Send everything buffered; True when nothing is left unsent. Never raises."""
        with self._send_lock:
            ok = self._flush_locked(defaults.TRACKING_TIMEOUT_S if timeout is None else timeout)
        if ok and self._failures == 0:
            _flush.maybe_deliver_spool(self.client)
        return ok

    def _cut(self) -> None:
        size = max(1, int(defaults.FLUSH_BATCH_POINTS))
        buffer, pop = self.buffer, self.buffer.popleft
        while buffer:
            points: list[Point] = []
            take = points.append
            try:
                for _ in range(size):
                    take(pop())
            except IndexError:  # emptied (at exit another thread may be cutting too): keep what we took
                _flush.FLUSHER.wake.set()
            if points:
                self.batches.append((uuid.uuid4().hex, points))

    def _flush_locked(self, timeout: float) -> bool:
        if self._gone:
            self.buffer.clear()
            return False
        if self.offline:  # the spool is where everything goes; only sync sends it
            if self.has_pending():
                try:
                    self.spool()
                except Exception as exc:  # an unwritable spool: counted, kept in memory, tried at the next flush
                    self._failed(exc)
            return False
        self._cut()
        if self._create is not None and not self._send_create_locked(self._create, timeout):
            return False
        path = f"/runs/{self.run_id}/points"
        while self.batches:
            batch_id, points = self.batches[0]
            body = {"batch_id": batch_id, "points": points}
            try:
                self.client.request("POST", path, json=body, timeout=timeout)
            except NotFoundError as exc:
                self._lost(exc)
                return False
            except PlatformError as exc:
                if exc.status in (400, 413, 422):  # refused and not stored: find what the platform will take
                    self._split_refused(exc)
                    continue
                if exc.status >= 500 and self._park_after_errors(batch_id, exc):
                    continue  # this batch waits in the spool; the ones after it go on
                self._failed(exc)
                return False
            except Exception as exc:  # a broken transport or sink is a failed send like any other
                self._failed(exc)
                return False
            self.batches.popleft()
            self._batch_errors.pop(batch_id, None)
            self._succeeded()
            top = max(map(_STEP, points))
            if top > self._points_top:
                self._points_top = top
        return self._send_patch_locked(timeout)

    def _send_create_locked(self, create: dict[str, Any], timeout: float) -> bool:
        """Create the run under the id it gave itself; a resend answers the same run (POST /runs is idempotent by id)."""
        try:
            _spool.send_create(self.client, create, timeout)
        except NotFoundError as exc:
            self._lost(exc, why="its id is another account's on the platform")
            return False
        except PlatformError as exc:
            if exc.status in (400, 413, 422):  # refused even with the id and name alone: it can never land
                self._lost(exc, why=f"the platform refused to create it ({exc})")
                return False
            self._failed(exc)
            return False
        except Exception as exc:
            self._failed(exc)
            return False
        self._create = None
        self._succeeded()
        return True

    def _park_after_errors(self, batch_id: str, exc: PlatformError) -> bool:
        """Count a server error for this batch; past BATCH_SERVER_ERRORS_MAX move it to the spool (True when moved)."""
        seen = self._batch_errors.get(batch_id, 0) + 1
        self._batch_errors[batch_id] = seen
        if seen < defaults.BATCH_SERVER_ERRORS_MAX:
            return False
        batch = self.batches.popleft()
        try:
            kept = self._write(self._records([batch]))
        except Exception:  # an unwritable spool: the batch stays first, retried with backoff like any failure
            self.batches.appendleft(batch)
            return False
        self._batch_errors.pop(batch_id, None)
        self.errors += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        if not kept[-1]:
            self.lost += len(batch[1])
        try:
            warnings.warn(
                f"{self.run_id}: the platform failed on one batch of {len(batch[1])} points {seen} times "
                f"(BATCH_SERVER_ERRORS_MAX); it waits in the spool ({_spool.spool_dir()}) for the next good send or "
                f"`python -m whileai sync`, and the run's later points go on. Last answer: {exc}",
                TrackingWarning,
                stacklevel=4,
            )
        except Exception:
            pass
        return True

    def _split_refused(self, exc: PlatformError) -> None:
        """A batch the platform refused whole (too big, or a point it will not store): halve it.

        Halves get new batch ids (the refused batch stored nothing). A single
        point that is still refused is dropped and counted in ``skipped``, with
        the platform's reason in a warning, so one bad value never blocks the
        points after it.
        """
        _batch_id, points = self.batches.popleft()
        if len(points) > 1:
            half = len(points) // 2
            self.batches.appendleft((uuid.uuid4().hex, points[half:]))
            self.batches.appendleft((uuid.uuid4().hex, points[:half]))
            return
        self.errors += 1
        self.last_error = str(exc)
        self._skip(f"point at step {points[0]['step']}", f"refused by the platform: {exc}")

    def _patch_body(self) -> tuple[dict[str, Any], int]:
        with self._state:
            # the platform advances a run's step from its points; only a bar that progress() moved
            # past the points it already has is sent
            bar = self._bar_step
            if bar is not None and bar != self._sent_step:
                if bar > self._points_top:
                    self._patch["step"] = bar
                else:
                    self._sent_step = bar
            if self.total_steps is not None and self.total_steps != self._sent_total:
                self._patch["total_steps"] = self.total_steps
            body = {k: (dict(v) if k == "summary" else v) for k, v in self._patch.items()}
            return body, self._patch_version

    def _send_patch_locked(self, timeout: float) -> bool:
        body, version = self._patch_body()
        if body:
            try:
                self.client.request("PATCH", f"/runs/{self.run_id}", json=body, timeout=timeout)
            except NotFoundError as exc:
                self._lost(exc)
                return False
            except PlatformError as exc:
                if exc.status not in (400, 413, 422):
                    self._failed(exc)
                    return False
                # refused as invalid: resending cannot help, so say why and let the rest go on
                self.errors += 1
                self.last_error = str(exc)
                try:
                    warnings.warn(f"{self.run_id}: the platform refused a run update {sorted(body)}: {exc}", TrackingWarning, stacklevel=3)
                except Exception:
                    pass
            except Exception as exc:
                self._failed(exc)
                return False
            else:
                self._succeeded()
            self._acknowledge(body, version)
        return not self.buffer and not self.batches and not self._patch

    def _acknowledge(self, body: dict[str, Any], version: int) -> None:
        """Forget the record changes in ``body`` (sent, spooled, or refused), keeping any made since."""
        with self._state:
            if "step" in body:
                self._sent_step = body["step"]
            if "total_steps" in body:
                self._sent_total = body["total_steps"]
            if version == self._patch_version:
                self._patch.clear()
            else:  # changed while in flight: drop only what was sent unchanged
                for key, value in body.items():
                    current = self._patch.get(key)
                    if key == "summary" and isinstance(current, dict):
                        for sub, sent in value.items():
                            if sub in current and current[sub] is sent:
                                del current[sub]
                        if not current:
                            del self._patch[key]
                    elif key in self._patch and current is value:
                        del self._patch[key]

    def _succeeded(self) -> None:
        self._last_sent = time.monotonic()
        self._failures = 0
        self._retry_at = 0.0

    def _failed(self, exc: BaseException) -> None:
        self.errors += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        self._failures += 1
        delay = min(defaults.RETRY_BACKOFF_MAX_S, defaults.RETRY_BACKOFF_S * 2 ** (self._failures - 1))
        self._retry_at = time.monotonic() + delay * (0.5 + random.random() / 2)
        if self.pending_points() > defaults.BUFFER_MAX_POINTS:
            self._spill()

    def _lost(self, exc: BaseException, why: str = "is not on the platform any more (deleted?)") -> None:
        dropped = self.pending_points()
        self.errors += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        self._gone = True
        self._create = None
        self.buffer.clear()
        self.batches.clear()
        with self._state:
            self._patch.clear()
        try:
            warnings.warn(
                f"{self.run_id} {why}: {dropped} unsent points dropped. "
                "Start a new run with wai.training_run(...) to keep logging.",
                TrackingWarning,
                stacklevel=2,
            )
        except Exception:  # warnings turned into errors must still not stop the training loop
            pass

    # -- the spool ------------------------------------------------------------

    def _records(self, batches: list[tuple[str, list[Point]]]) -> list[SpoolRecord]:
        """Spool records for ``batches``, after the run's create request when the spool does not hold it yet."""
        head = self._head()  # offline on purpose, records are "held": only `python -m whileai sync` delivers them
        records: list[SpoolRecord] = []
        if self._create is not None and not self._create_spooled:
            records.append({**head, "kind": "create", "body": dict(self._create)})
        records += [{**head, "kind": "points", "batch_id": batch_id, "points": points} for batch_id, points in batches]
        return records

    def _head(self) -> RecordHead:
        head: RecordHead = {"target": self.client.target, "run_id": self.run_id}
        if self.offline:
            head["held"] = True
        return head

    def _spill(self) -> None:
        """Move the oldest batches to disk when an outage has filled memory (BUFFER_MAX_POINTS)."""
        self._cut()
        moved = []
        while len(self.batches) > 1 and self.pending_points() > defaults.BUFFER_MAX_POINTS // 2:
            moved.append(self.batches.popleft())
        if moved:
            records = self._records(moved)
            try:
                kept = self._write(records)
            except _spool._SpoolWriteError as exc:  # what landed stays landed; the rest back to memory
                kept = exc.kept
            except Exception:  # an unwritable spool: the batches stay in memory, where they were
                self.batches.extendleft(reversed(moved))
                return
            back = [batch for batch, flag in zip(moved, kept[len(records) - len(moved):]) if not flag]
            self.batches.extendleft(reversed(back))

    def _write(self, records: list[SpoolRecord]) -> list[bool]:
        try:
            kept = _spool.write_each(records)
        except _spool._SpoolWriteError as exc:
            if exc.kept and records[0]["kind"] == "create" and exc.kept[0]:
                self._create_spooled = True
            self.spool_error = str(exc.cause)
            raise
        if records and records[0]["kind"] == "create" and kept[0]:
            self._create_spooled = True
        return kept

    def spool(self) -> tuple[int, int]:
        """Write everything unsent (points, then record changes) to the spool: (points, run updates) kept there.

        Points the spool refuses for its size cap (SPOOL_MAX_BYTES) are dropped
        and counted in ``lost``. When the disk refuses the write, what landed is
        forgotten here, the rest stays in memory, and _SpoolWriteError is raised.
        """
        self._cut()
        batches = list(self.batches)
        records = self._records(batches)
        body, version = self._patch_body()
        if body:
            records.append({**self._head(), "kind": "patch", "body": body})
        if not records:
            return 0, 0
        error = None
        try:
            kept = self._write(records)
        except _spool._SpoolWriteError as exc:
            kept, error = exc.kept, exc
        offset = len(records) - len(batches) - (1 if body else 0)
        points = 0
        for batch, flag in zip(batches, kept[offset:]):
            if flag:
                points += len(batch[1])
                self.batches.remove(batch)
            elif error is None:  # refused by SPOOL_MAX_BYTES: it cannot be kept anywhere
                self.lost += len(batch[1])
                self.batches.remove(batch)
        patched = bool(body) and kept[-1]
        if body and (patched or error is None):
            self._acknowledge(body, version)  # a note made while this was written stays for the next one
        if error is not None:
            error.landed = (points, 1 if patched else 0)  # what did reach the spool before the disk refused
            raise error
        return points, 1 if patched else 0

    # -- heartbeat ------------------------------------------------------------

    def heartbeat_due(self) -> bool:
        """Whether this process's own running run has sent nothing for RUN_HEARTBEAT_S."""
        return (self.owned and not self.finished and not self._gone and not self.offline
                and self._create is None and time.monotonic() - self._last_sent >= defaults.RUN_HEARTBEAT_S)

    def heartbeat(self) -> None:
        """An empty run update: the platform notes the run's writer is alive (it reads ``crashed`` otherwise)."""
        if not self._send_lock.acquire(blocking=False):
            return  # a send is under way, which says as much
        try:
            self.client.request("PATCH", f"/runs/{self.run_id}", json={}, timeout=defaults.TRACKING_TIMEOUT_S)
        except Exception:  # a missed beat is retried at the next interval; the points' own sends go on
            self._last_sent = time.monotonic() - defaults.RUN_HEARTBEAT_S / 2
        else:
            self._last_sent = time.monotonic()
        finally:
            self._send_lock.release()
