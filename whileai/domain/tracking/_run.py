"""The run handle: :class:`TrainingRun`, one fine-tune as the platform sees it.

``whileai.simulations.training`` re-exports it (``wai.TrainingRun``); the
functions over runs by id and ``TrainerCallback`` live there, ``train`` in
``_hosting``. The sending machinery is ``_tracker`` (per run) and ``_flush``
(per process).
"""

from __future__ import annotations

import sys
import time
import warnings
from typing import TYPE_CHECKING, Any, Literal

from whileai.domain.tracking import _flush
from whileai.domain import defaults
from whileai.domain.client import Client, get_client
from whileai.core.paths import data_root
from whileai.domain.tracking._tracker import FINAL_STATUSES, Tracker, jsonable, to_float
from whileai.core.errors import PlatformError, TrainingWarning
from whileai.core.statuses import FINISHED_STATUSES

if TYPE_CHECKING:
    from whileai.domain.report import DeltaReport
    from whileai.domain.rows.selection import SelectionReport

__all__ = ["TrainingRun", "holdout_fields"]

_HOLDOUT_METRICS = ("pass_rate", "loss")


_HINTED = False


def _embedded_hint(url: str) -> None:
    """Say once per process how to see an embedded run's page (nothing serves it until a server starts)."""
    global _HINTED
    if _HINTED:
        return
    _HINTED = True
    print(
        f"whileai: this run is on the embedded platform ({data_root()}); to see its page ({url}), run "
        f"`python -m whileai open {url.rstrip('/').rsplit('/', 1)[-1]}`",
        file=sys.stderr,
    )


def holdout_fields(before: Any, after: Any, metric: str) -> dict[str, float]:
    """The summary keys for a held-out before/after, validated (see attach_holdout)."""
    if metric not in _HOLDOUT_METRICS:
        raise ValueError(
            f"metric={metric!r} is not a held-out metric; accepted: 'pass_rate' (0 to 1, higher is better) "
            "or 'loss' (held-out loss, lower is better)"
        )
    values = {}
    for name, value in (("before", before), ("after", after)):
        number = None if isinstance(value, bool) else to_float(value)
        if number is None:
            raise ValueError(f"{name}={value!r} is not a finite number; pass the held-out {metric} as a float")
        if metric == "pass_rate" and not 0.0 <= number <= 1.0:
            hint = f" (did you mean {number / 100:g}?)" if 1.0 < number <= 100.0 else ""
            raise ValueError(
                f"{name}={value!r} is outside [0, 1]: a pass rate is a fraction of tasks passed{hint}; "
                "pass a value from 0 to 1, or metric='loss' for a held-out loss"
            )
        values[name] = number
    prefix = "holdout" if metric == "pass_rate" else "holdout_loss"
    return {f"{prefix}_before": values["before"], f"{prefix}_after": values["after"]}


class TrainingRun:
    """One fine-tune as the platform sees it: its points, progress, status and summary.

    Create one with :func:`training_run` (or get one back from ``wai.train``).
    ``log`` only buffers; a background thread sends every FLUSH_INTERVAL_S, and
    ``flush``/``finish`` send now. Failed sends are retried, counted in
    ``errors`` and never raised; what the platform has not taken when the
    process exits is spooled to disk and sent later. Use it as a context
    manager to finish it done (or failed with the exception's text).

    ``TrainingRun(record, client)`` wraps a run the platform already has.
    """

    def __init__(self, record: dict[str, Any], client: Client | None = None):
        self._client = client if client is not None else get_client()
        self.id: str = record["id"]
        self._tracker = Tracker(self._client, self.id)
        #: the selection report ``wai.train`` decided on (None for runs made by training_run)
        self.selection: SelectionReport | None = None
        self._apply(record)

    # -- reading the record ----------------------------------------------------

    def _apply(self, record: dict[str, Any]) -> None:
        tracker = self._tracker
        with tracker._state:  # changes not yet acknowledged by the platform stay on top
            pending = dict(tracker._patch)
            pending_summary = dict(pending.get("summary") or {})
        self.name: str | None = record.get("name")
        self.status: str = pending.get("status") or record.get("status") or "running"
        self.error: str | None = pending.get("error") if "status" in pending else record.get("error")
        self.config: Any = record.get("config")
        self.dataset: str | None = record.get("dataset")
        self.after_dataset: str | None = record.get("after_dataset")
        self.summary: dict[str, Any] = {**(record.get("summary") or {}), **pending_summary}
        self.cost_usd: float | None = record.get("cost_usd")
        self.cost_basis: Any = record.get("cost_basis")
        self.adapter: Any = self.summary.get("adapter")
        training = self.summary.get("training")
        if isinstance(training, dict):
            training = dict(training)
            if self.cost_usd is not None or self.cost_basis is not None:
                training["cost_usd"] = self.cost_usd
                training["cost_basis"] = self.cost_basis
        self.training: dict[str, Any] | None = training
        self._updated_at: float | None = record.get("updated_at")
        self._remote_step = record.get("step")
        self._remote_total = record.get("total_steps")
        self._record_url = record.get("url")
        tracker.finished = self.status in FINISHED_STATUSES  # crashed among them: settled by the platform

    @property
    def url(self) -> str:
        """The run's page on the platform (in embedded mode, once per process, how to start the server)."""
        url = self._record_url or self._client.url(f"/runs/{self.id}")
        if self._client.embedded:
            _embedded_hint(url)
        return url

    @property
    def errors(self) -> int:
        """Sends that failed so far (each one retried later; nothing is dropped)."""
        return self._tracker.errors

    @property
    def skipped(self) -> int:
        """Logged values that were not finite numbers and so were not recorded."""
        return self._tracker.skipped

    @property
    def step(self) -> int | None:
        local = self._tracker.step
        return local if local is not None else self._remote_step

    @property
    def logged_step(self) -> int | None:
        """The step of the newest point this process logged (None before the first); ``step`` also follows progress."""
        return self._tracker.logged_step

    @property
    def total_steps(self) -> int | None:
        local = self._tracker.total_steps
        return local if local is not None else self._remote_total

    # -- recording ---------------------------------------------------------------

    def log(self, step: int | None = None, **metrics: Any) -> None:
        """Record one point; only buffers, never blocks on the network, never raises.

        Any finite int or float (numpy and torch scalars too) is a metric. Other
        values (NaN, inf, strings, None) are skipped and counted in ``skipped``.
        ``step`` defaults to one past the previous point's step.

            run.log(step=10, loss=0.42, learning_rate=2e-4)
        """
        self._tracker.log(step, metrics)

    def flush(self) -> bool:
        """Send buffered points now; True when nothing is left unsent. Never raises."""
        return self._tracker.flush()

    def progress(self, step: int | None = None, total_steps: int | None = None) -> None:
        """Advance the progress bar without a metric; ``total_steps`` (re)sets its end."""
        values = {}
        for name, value in (("step", step), ("total_steps", total_steps)):
            if value is None:
                continue
            number = to_float(value)
            if number is None or number < 0 or number != int(number):
                raise ValueError(f"{name}={value!r} is not a whole number >= 0; pass an int or None")
            values[name] = int(number)
        self._tracker.progress(values.get("step"), values.get("total_steps"))

    def note(self, **fields: Any) -> None:
        """Put fields on the run's summary; the summary keeps them whichever callback finishes the run.

        Before finish they travel with it (or with an earlier background send);
        after finish they are sent right away.

            run.note(base_model="kit-base", lora_rank=8)
        """
        clean = {key: jsonable(value, key) for key, value in fields.items()}
        self._summarize(clean)

    def _summarize(self, fields: dict[str, Any]) -> None:
        self.summary.update(fields)
        self._tracker.update(summary=fields)
        if self.status in FINAL_STATUSES:
            self._tracker.flush()

    def holdout(self, before: float, after: float, metric: str = "pass_rate") -> None:
        """Record the held-out result before and after training: what the run's page opens with.

        Pass rates are 0 to 1 (ValueError otherwise); ``metric="loss"`` records
        held-out loss, where lower is better. After finish the summary is sent
        again with the status unchanged; calling again corrects the numbers.
        """
        self._summarize(holdout_fields(before, after, metric))

    def delta(self, before: Any, after: Any, by: str | None = None, proxy: str | None = None) -> DeltaReport:
        """Compute ``delta_report(before, after, by=, proxy=)``, keep it on the run and return it.

        It is sent with finish under ``summary["delta"]`` (right away when the
        run has already finished), and the run's page draws it.
        """
        from whileai.domain.report import delta_report

        report = delta_report(before, after, by=by, proxy=proxy)
        self._summarize({"delta": jsonable(report, "delta_report(...)")})
        return report

    # -- ending ------------------------------------------------------------------

    def finish(self, status: str = "done", error: Any = None) -> bool:
        """Flush, then mark the run done, failed or stopped. True when the platform has it all.

        When the platform cannot be reached the status waits with the points
        (retried in the background, spooled at exit); nothing raises.
        """
        if status not in FINAL_STATUSES:
            accepted = ", ".join(repr(s) for s in FINAL_STATUSES)
            raise ValueError(f"status={status!r} does not end a run; accepted: {accepted}")
        if isinstance(error, BaseException):
            error = f"{type(error).__name__}: {error}"
        elif error is not None:
            error = str(error)
        mirror = self._tracker.mirror
        if mirror is not None:  # report_to: the final fields and the status, then closed (their state noted here)
            self._tracker.mirror = None
            mirror.finish(status, self.summary, error)
        self.status, self.error = status, error
        self._tracker.update(fields={"status": status, "error": error})
        self._tracker.finished = True
        return self._tracker.flush()

    def mirror_to(self, mirrors: Any) -> None:
        """Copy this run to other trackers from now on: ``mirrors`` from ``whileai.domain.tracking.mirror.open_mirrors``.

        Every point ``log`` keeps goes to them as the platform gets it; ``finish`` sends them the held-out
        result and the status and closes them. Their state is on the summary under ``mirrors``, and where each
        copy went under ``mirrored_to`` (``{"wandb": folder, "mlflow": tracking URI, "trackio": folder}``).
        """
        self._tracker.mirror = mirrors
        locations = getattr(mirrors, "locations", None)
        if locations:
            self.note(mirrored_to=dict(locations))

    def fail(self, error: Any) -> bool:
        """Finish the run as failed with ``error`` (an exception or a message)."""
        return self.finish("failed", error=error)

    def __enter__(self) -> TrainingRun:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        if self.status == "running":
            if exc_type is None:
                self.finish("done")
            elif issubclass(exc_type, KeyboardInterrupt):
                self.finish("stopped", error="interrupted (KeyboardInterrupt)")
            elif issubclass(exc_type, SystemExit) and _flush.signalled():
                self.finish("stopped", error=f"terminated by signal {_flush.signalled()} (SIGTERM)")
            else:
                self.fail(exc if exc is not None else exc_type.__name__)
        return False

    # -- hosted runs -----------------------------------------------------------

    def refresh(self, wait: float | None = None) -> TrainingRun:
        """Read the run's state from the platform: status, adapter, training (with cost), error.

        With ``wait`` (seconds), a long poll: returns as soon as the run's record has changed since this handle
        last read it (a point, a status, a summary) or the run has ended, and after ``wait`` seconds in any case
        (the platform holds the answer for at most its RUN_WAIT_MAX_S; a platform that answers at once, unchanged,
        is waited out here, so a loop of ``refresh(wait=...)`` never spins).
        """
        began = time.monotonic()
        hold = float(wait) if wait is not None and wait > 0 and self._updated_at is not None else 0.0
        params: dict[str, Any] = {"series": "false"}
        if hold:
            params.update(since=self._updated_at, wait=f"{hold:g}")
        record = self._client.request("GET", f"/runs/{self.id}", params=params,
                                      timeout=defaults.CLIENT_TIMEOUT_S + hold if hold else None)
        unchanged = record.get("updated_at") == self._updated_at and record.get("status") == self.status
        self._apply(record)
        if hold and unchanged:
            left = hold - (time.monotonic() - began)
            if left > 0:
                time.sleep(left)
        return self

    def stop(self) -> str:
        """Stop this hosted run and return its status: "stopped", or how it had already ended.

        The platform ends the run's job (a local worker with its whole process
        group, a Modal call cancelled), marks the run stopped and keeps it so,
        and removes any adapter the job had written: a stopped run has no result
        to serve or continue from. Stopping a run that has already ended changes
        nothing and warns that it is already done (or failed, or stopped).
        Another account's run answers NotFoundError.

            run = wai.train(ds, method="grpo")
            run.stop()               # "stopped"
        """
        answer = self._client.request("POST", f"/runs/{self.id}/stop")
        with self._tracker._state:  # what this handle had not sent yet would only be refused now
            self._tracker._patch.clear()
        self._apply(answer["run"])
        if not answer.get("stopped"):
            warnings.warn(answer.get("detail") or f"{self.id} already ended {self.status}", TrainingWarning,
                          stacklevel=2)
        return self.status

    def wait(self, poll: float | None = None, timeout: float | None = None) -> str:
        """Block until the run ends and return its final status; TimeoutError after ``timeout`` seconds.

        Each read is a long poll of up to ``poll`` seconds (TRAINING_POLL_S when
        None, never under TRAINING_POLL_MIN_S): the platform answers as soon as
        the run's record changes, so the end is seen within a fraction of a
        second, not at the next poll.
        """
        every = defaults.TRAINING_POLL_S if poll is None else float(poll)
        every = max(every, defaults.TRAINING_POLL_MIN_S)
        deadline = None if timeout is None else time.monotonic() + float(timeout)
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            hold = every if left is None else min(every, left)
            try:  # a handle that already reads ended is read once more, plainly
                self.refresh(wait=hold if self.status not in FINAL_STATUSES else None)
            except PlatformError as exc:  # a platform restarting mid-wait is read again at the next poll
                if exc.status != 0 and exc.status < 500:
                    raise
                time.sleep(hold)
            if self.status in FINAL_STATUSES:
                return self.status
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(
                    f"{self.id} is still {self.status} after {timeout} s (step {self.step}/{self.total_steps}); "
                    f"call wait() again with a longer timeout, or watch {self.url}"
                )

    # -- showing ------------------------------------------------------------------

    def _cost_text(self) -> str | None:
        basis = self.cost_basis if isinstance(self.cost_basis, dict) else {}
        training = self.training if isinstance(self.training, dict) else {}
        gpu = basis.get("gpu") or training.get("gpu") or self.summary.get("gpu")
        if gpu and (basis.get("count") or 1) > 1:
            gpu = f"{basis['count']} x {gpu}"
        seconds = to_float(basis.get("seconds", training.get("seconds", self.summary.get("seconds"))))
        shown_seconds = f"{seconds:.0f} s" if seconds is not None else None
        if self.cost_usd is not None:
            details = ", ".join(x for x in (gpu, shown_seconds, "estimate") if x)
            amount = f"about ${self.cost_usd:.2f}" if self.cost_usd >= 0.005 else "under $0.01"
            return f"{amount} ({details})"
        if gpu and shown_seconds:
            return f"cost unknown ({gpu}, {shown_seconds}: no list price in GPU_USD_PER_HOUR)"
        return None

    def __str__(self) -> str:
        head = f"{self.id} ({self.name})" if self.name else self.id
        parts = [head, self.status]
        if self.step is not None:
            parts.append(f"step {self.step}/{self.total_steps}" if self.total_steps else f"step {self.step}")
        parts.append(self.url)
        cost = self._cost_text()
        if cost:
            parts.append(cost)
        if self.error and self.status == "failed":
            parts.append(f"error: {self.error.splitlines()[0][:120]}")
        if self._tracker.has_pending() and self.errors:
            parts.append(f"{self.errors} sends failed so far (retrying)")
        return ", ".join(parts)

    def __repr__(self) -> str:
        return f"<TrainingRun {self}>"
