"""The process-wide side of run tracking: one background flush thread, the exit hook, spool delivery.

Every :class:`~whileai.domain.tracking._tracker.Tracker` registers here when it has
something to send. One daemon thread flushes every registered run each
FLUSH_INTERVAL_S; at interpreter exit the hook makes a last send for each run and
spools whatever the platform did not take; ``sys.excepthook`` is chained once so
that hook can tell a crash from a script that forgot ``finish()``.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from typing import Any

from whileai.domain.tracking import _spool
from whileai.domain import defaults

__all__ = ["FLUSHER", "flush_all", "watch_uncaught", "watch_signals", "signalled", "uncaught", "maybe_deliver_spool"]


class _Flusher:
    """One daemon thread per process that flushes every registered run every FLUSH_INTERVAL_S."""

    def __init__(self) -> None:
        self.trackers: set[Any] = set()  # Tracker objects
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.stopping = False
        self.thread: threading.Thread | None = None
        self.pid = 0
        self.exit_hooked = False

    def add(self, tracker: Any) -> None:
        with self.lock:
            self.trackers.add(tracker)
            tracker.registered = True
            if self.thread is None or self.pid != os.getpid() or not self.thread.is_alive():
                self.pid = os.getpid()
                self.stopping = False
                self.thread = threading.Thread(target=self._run, name="whileai-flush", daemon=True)
                self.thread.start()
            if not self.exit_hooked:
                atexit.register(_at_exit)
                self.exit_hooked = True

    def _run(self) -> None:
        while not self.stopping:
            self.wake.wait(defaults.FLUSH_INTERVAL_S)
            self.wake.clear()
            if self.stopping:
                break
            try:
                self.flush_due()
            except Exception:  # the thread must outlive any surprise; the next interval tries again
                pass

    def flush_due(self) -> None:
        for tracker in list(self.trackers):
            if self.stopping:
                return
            if tracker.has_pending() and tracker.due():
                tracker.flush()
            elif tracker.heartbeat_due():
                tracker.heartbeat()
            if not tracker.has_pending() and (tracker.finished or tracker._gone):
                with self.lock:
                    self.trackers.discard(tracker)
                    tracker.registered = False
                if tracker.has_pending():  # something arrived while it was being dropped
                    self.add(tracker)


_FLUSHER = _Flusher()


def flush_all(timeout: float | None = None) -> bool:
    """Flush every run with unsent data in this process; True when all of it landed."""
    return all([tracker.flush(timeout) for tracker in list(_FLUSHER.trackers)])


def _at_exit() -> None:
    """Last send for each run with unsent data, then spool whatever is left; one message says what happened."""
    _FLUSHER.stopping = True
    _FLUSHER.wake.set()
    spooled = [0, 0]
    runs = set()  # runs to tell about: not those that said at their start that they were offline
    lost: dict[str, int] = {}  # run id -> points the spool could not keep
    why: list[str] = []
    for tracker in list(_FLUSHER.trackers):
        try:
            tracker.end_at_exit()
        except Exception:  # pragma: no cover - never let one run keep the others' points from the disk
            pass
        if not tracker.has_pending() and not tracker.lost:
            continue
        got = tracker._send_lock.acquire(timeout=defaults.EXIT_FLUSH_TIMEOUT_S)
        try:
            if got and tracker._failures == 0 and tracker.has_pending():
                tracker._flush_locked(defaults.EXIT_FLUSH_TIMEOUT_S)
            # without the lock the in-flight batch is still listed: spooling it too is safe (same batch_id)
            if tracker.has_pending():
                try:
                    points, updates = tracker.spool()
                except _spool._SpoolWriteError as exc:
                    points, updates = exc.landed
                    tracker.lost += tracker.pending_points()
                    note = f"{exc.cause.strerror or exc.cause}" if isinstance(exc.cause, OSError) else str(exc)
                    if note not in why:
                        why.append(note)
                if not tracker.announced or tracker.lost:
                    spooled[0] += points
                    spooled[1] += updates
                    runs.add(tracker.run_id)
            if tracker.lost:
                lost[tracker.run_id] = tracker.lost
                runs.add(tracker.run_id)
        except Exception as exc:  # pragma: no cover - last resort; say so rather than die silently
            _say(f"whileai: could not keep the unsent points of {tracker.run_id}: {type(exc).__name__}: {exc}")
        finally:
            if got:
                tracker._send_lock.release()
    if not runs:
        return
    line = (f"whileai: the platform did not take {spooled[0]} points and {spooled[1]} run updates of "
            f"{', '.join(sorted(runs))}; they are kept in {_spool.spool_dir()} and will be sent by the next run or "
            "by `python -m whileai sync`")
    if lost:
        total = sum(lost.values())
        reason = f" ({'; '.join(why)})" if why else " (SPOOL_MAX_BYTES)"
        line += (f". {total} points could not be written to the spool{reason} and are lost: "
                 + ", ".join(f"{n} of {run}" for run, n in sorted(lost.items())))
    _say(line)


def _say(line: str) -> None:
    try:
        print(line, file=_stderr())
    except Exception:  # a closed stderr must not turn into a traceback at exit
        pass


_UNCAUGHT: list[BaseException | None] = [None]  # the exception that is ending the process, if any
_HOOKED = [False]


def _watch_uncaught() -> None:
    """Chain sys.excepthook once, so the exit hook can tell a crash from a script that forgot finish()."""
    import sys

    if _HOOKED[0]:
        return
    _HOOKED[0] = True
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        _UNCAUGHT[0] = exc
        previous(exc_type, exc, tb)

    sys.excepthook = hook


def _stderr():
    import sys

    return sys.stderr


_SPOOL_TRIED: dict[tuple[Any, Any, Any], float] = {}


def _maybe_deliver_spool(client: Any) -> None:
    """After a good send, deliver spool files for the same target (at most every SPOOL_RETRY_S)."""
    try:
        target = client.target
        key = _spool.target_key(target)
        now = time.monotonic()
        last = _SPOOL_TRIED.get(key)
        if last is not None and now - last < defaults.SPOOL_RETRY_S:
            return
        _SPOOL_TRIED[key] = now
        if not _spool.pending_files(include_live=False):
            return
        _spool.deliver(lambda t: client if t == target else None, only_target=target)
    except Exception:  # delivering old data must never disturb the current run
        pass


_SIGNALLED: list[int | None] = [None]  # the signal that is ending the process, if one of ours


def _watch_signals() -> None:
    """On SIGTERM, end the process as on Ctrl-C: unwind, then the exit hook flushes and spools what is buffered.

    Python's default for SIGTERM kills the process without running exit hooks;
    SIGINT already raises KeyboardInterrupt, which does. Only installed from the
    main thread and only over the default disposition (a handler the script or
    a framework set is left alone).
    """
    import signal

    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return

        def on_term(signum: int, _frame: Any) -> None:
            _SIGNALLED[0] = signum
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends it at once
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, on_term)
    except (ValueError, OSError, AttributeError):  # not the main interpreter, or no signals here
        pass


def signalled() -> int | None:
    """The signal (SIGTERM) whose handler is ending the process, if any."""
    return _SIGNALLED[0]


def uncaught() -> BaseException | None:
    """The uncaught exception that is ending the process, if any (seen by the hook ``watch_uncaught`` chains)."""
    return _UNCAUGHT[0]


# the names the tracker uses
FLUSHER = _FLUSHER
watch_uncaught = _watch_uncaught
watch_signals = _watch_signals
maybe_deliver_spool = _maybe_deliver_spool
