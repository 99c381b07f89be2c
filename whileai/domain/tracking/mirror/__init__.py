"""``report_to``: a copy of a run in the trackers a team already reads (W&B, MLflow, trackio).

A mirror is fed from the run's own logging path, not from transformers' integration callbacks:
:class:`~whileai.domain.tracking.TrainingRun` hands every point it keeps (after its own cleaning:
the same names, steps and values the platform stores, system metrics included) to :meth:`Mirrors.log`,
and its final ``finish`` hands over the status and the summary. transformers' ``WandbCallback`` /
``MLflowCallback`` / ``TrackioCallback`` would see the trainer's raw logs instead (values the platform
skips, none of the job's own points, no held-out result), so the two would disagree.

What each tracker gets:

- config: the run's resolved spec (every knob the job ran with), its id and its page;
- every point, at its step;
- at the end: the held-out before/after, n, each side's interval and the paired test's p, the status,
  the run id and its page (``whileai/...`` keys: W&B summary, MLflow metrics and tags, trackio metrics at
  the last step and an alert carrying the status).

Nothing leaves the machine unless the user names a remote tracker (:mod:`._offline`): every tracker's
telemetry is off, W&B runs offline unless WANDB_MODE or WANDB_API_KEY is set, MLflow writes to
MLFLOW_TRACKING_URI when set, and trackio stays local unless TRACKIO_SPACE_ID names a Space. The local copies are
the account's (:mod:`._place`): ``<data root>/mirrors/<account id>/`` holds its W&B runs, its MLflow store and its
trackio store, whatever WANDB_DIR or TRACKIO_DIR say, so :func:`forget_mirrors` can delete a run's copies
with the run, and an account's with the account. Where a run's copies went is on its summary under
``mirrored_to`` (``{"wandb": folder, "mlflow": tracking URI, "trackio": folder}``).

A mirror never interrupts training. A missing package refuses the run before training
(``pip install 'whileai[mirror]'``); any exception later is a :class:`~whileai.core.errors.MirrorWarning`,
noted on the run's summary under ``mirrors``, and the points keep going to the platform. The sends run on
a thread of their own, so a tracker that stalls delays nothing.

    mirrors = open_mirrors(["mlflow"], run_id=run.id, name=run.name, url=run.url, config=spec_dict)
    run.mirror_to(mirrors)     # every later run.log point is mirrored; run.finish closes them
"""

from __future__ import annotations

import importlib.util
import queue
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypedDict

from whileai.core import defaults as core_defaults
from whileai.core.errors import MirrorWarning, TrainingConfigError

from whileai.domain import defaults
from whileai.domain.tracking.mirror._forget import forget_mirrors
from whileai.domain.tracking.mirror._offline import keep_local
from whileai.domain.tracking.mirror._place import account_folder, current_account

__all__ = ["Sink", "MirrorState", "Mirrors", "open_mirrors", "mirror_problems", "final_fields", "forget_mirrors", "PACKAGES"]

#: tracker -> (the module it imports, the pip package that provides it)
PACKAGES: dict[str, tuple[str, str]] = {"wandb": ("wandb", "wandb"), "mlflow": ("mlflow", "mlflow-skinny"),
                                        "trackio": ("trackio", "trackio")}


class Sink(Protocol):
    """One opened tracker run: ``where`` says where its data goes (a folder, a URI, a project, the run in it);
    ``location`` is the folder or URI alone."""

    name: str
    where: str
    location: str

    def log(self, step: int, metrics: Mapping[str, float]) -> None: ...

    def finish(self, status: str, final: Mapping[str, Any]) -> None: ...


class MirrorState(TypedDict, total=False):
    """One tracker's state as the run's summary shows it under ``mirrors``."""

    to: str  #: where its data goes (``Sink.where``); absent when it failed to open
    status: str  #: ``mirroring``, ``closed``, ``failed to open``, ``failed to close`` or ``not closed``
    points: int  #: points it took
    errors: int
    last_error: str
    dropped: int  #: points dropped because the mirrors' queue was full (MIRROR_QUEUE_MAX)


#: what ``note`` is handed: each tracker's state by its name
MirrorNote = Callable[[dict[str, MirrorState]], None]


def mirror_problems(names: Sequence[str]) -> list[str]:
    """One problem per tracker in ``names`` whose package is not installed here, each naming the extra."""
    problems = []
    for name in names:
        module, package = PACKAGES[name]
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a module set to None in sys.modules (blocked), or a broken install
            found = False
        if not found:
            problems.append(f"report_to={list(names)!r} needs {package} ({name}), which is not installed here; "
                            f"pip install 'whileai[{core_defaults.MIRROR_EXTRA}]' (or pip install {package}), "
                            f"or drop {name} from report_to")
    return problems


def _opener(name: str) -> Callable[..., Sink]:
    if name == "wandb":
        from whileai.domain.tracking.mirror._wandb import open_wandb

        return open_wandb
    if name == "mlflow":
        from whileai.domain.tracking.mirror._mlflow import open_mlflow

        return open_mlflow
    from whileai.domain.tracking.mirror._trackio import open_trackio

    return open_trackio


def open_mirrors(names: Sequence[str], *, run_id: str, name: str | None, url: str, config: Mapping[str, Any],
                 note: MirrorNote | None = None, client: Any = None) -> Mirrors:
    """Open a tracker run for each of ``names`` (``report_to``); raises TrainingConfigError when a package is missing.

    ``config`` is the resolved spec; ``note(state)`` puts the mirrors' state on the run's summary (called
    when they open, when one first fails, and when they close). ``client`` is the platform client the run
    reports through (None: the credential chain's), which tells whose account folder the copies go to. A
    tracker that is installed but fails to open is a MirrorWarning and is left out; the others still run.
    """
    problems = mirror_problems(names)
    if problems:
        raise TrainingConfigError("cannot mirror the run: " + "; ".join(problems), problems)
    keep_local()  # before any tracker is imported: they read their switches at import
    folder = account_folder(current_account(client))
    full = {**config, "whileai_run_id": run_id, "whileai_url": url}
    sinks: list[Sink] = []
    state: dict[str, MirrorState] = {}
    for tracker in names:
        try:
            sink = _opener(tracker)(run_id=run_id, name=name or run_id, url=url, config=full, folder=folder)
        except Exception as exc:  # noqa: BLE001 - an unreachable or misconfigured tracker never stops the run
            state[tracker] = {"status": "failed to open", "errors": 1, "last_error": _text(exc)}
            _warn(f"{run_id}: report_to {tracker} could not open its run ({_text(exc)}); the run goes on without it")
            continue
        sinks.append(sink)
        state[tracker] = {"to": sink.where, "status": "mirroring", "points": 0, "errors": 0}
    return Mirrors(sinks, state, run_id=run_id, url=url, note=note)


def _text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


def _warn(message: str) -> None:
    try:
        warnings.warn(message, MirrorWarning, stacklevel=3)
    except Exception:  # noqa: BLE001 - warnings turned into errors must not stop the training loop either
        pass


def final_fields(summary: Mapping[str, Any], status: str, run_id: str, url: str,
                 error: str | None = None) -> dict[str, Any]:
    """What the mirrors get when the run ends: held-out before/after, n, intervals, p, status and the way back.

    Flat ``whileai/...`` keys, numbers and strings only, so every tracker can store them.
    """
    out: dict[str, Any] = {"whileai/status": status, "whileai/run_id": run_id, "whileai/url": url}
    for key in ("holdout_before", "holdout_after", "holdout_loss_before", "holdout_loss_after"):
        if isinstance(summary.get(key), (int, float)):
            out[f"whileai/{key}"] = float(summary[key])
    found_training = summary.get("training")
    training: Mapping[str, Any] = found_training if isinstance(found_training, Mapping) else {}
    if training.get("metric"):
        out["whileai/holdout_metric"] = str(training["metric"])
    found_stats = training.get("stats")
    stats: Mapping[str, Any] = found_stats if isinstance(found_stats, Mapping) else {}
    if isinstance(stats.get("n"), int):
        out["whileai/holdout_n"] = stats["n"]
    for side in ("before", "after"):
        found = stats.get(side)
        if isinstance(found, Mapping) and isinstance(found.get("ci95"), (list, tuple)):
            out[f"whileai/holdout_{side}_passed"] = found.get("passed")
            out[f"whileai/holdout_{side}_ci95_low"], out[f"whileai/holdout_{side}_ci95_high"] = found["ci95"]
    paired = stats.get("paired")
    if isinstance(paired, Mapping) and isinstance(paired.get("p"), (int, float)):
        out["whileai/holdout_p"] = float(paired["p"])
    if error:
        out["whileai/error"] = str(error)[:500]
    return {k: v for k, v in out.items() if v is not None}


class Mirrors:
    """The run's opened mirrors, fed on a thread of their own: :meth:`log` never blocks and never raises."""

    def __init__(self, sinks: list[Sink], state: dict[str, MirrorState], *, run_id: str, url: str,
                 note: MirrorNote | None = None):
        self.sinks = sinks
        self.state = state
        self.run_id = run_id
        self.url = url
        self.dropped = 0
        self._note = note
        self._queue: queue.Queue[tuple[Any, ...]] = queue.Queue(maxsize=defaults.MIRROR_QUEUE_MAX)
        self._closed = False
        self._thread = threading.Thread(target=self._drain, name="whileai-mirror", daemon=True)
        self._thread.start()
        self._tell()

    @property
    def names(self) -> list[str]:
        return list(self.state)

    @property
    def locations(self) -> dict[str, str]:
        """Where each opened mirror writes: ``{"wandb": folder, "mlflow": tracking URI, "trackio": folder}``."""
        return {sink.name: sink.location for sink in self.sinks}

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Queue one point for every mirror (the platform's own point, as it keeps it)."""
        if self._closed or not self.sinks:
            return
        try:
            self._queue.put_nowait(("log", step, dict(metrics)))
        except queue.Full:
            self.dropped += 1

    def finish(self, status: str, summary: Mapping[str, Any], error: str | None = None) -> dict[str, MirrorState]:
        """Send what is queued, then the final fields and the status, and close every mirror; returns the state.

        Waits at most MIRROR_FINISH_TIMEOUT_S. Calling it again does nothing.
        """
        if self._closed:
            return self.state
        self._closed = True
        final = final_fields(summary, status, self.run_id, self.url, error)
        self._queue.put(("finish", status, final))
        self._thread.join(defaults.MIRROR_FINISH_TIMEOUT_S)
        for entry in self.state.values():
            if entry.get("status") == "mirroring":
                entry["status"] = "not closed"
                entry["last_error"] = f"still sending after MIRROR_FINISH_TIMEOUT_S ({defaults.MIRROR_FINISH_TIMEOUT_S:g} s)"
        if self.dropped:
            for entry in self.state.values():
                entry["dropped"] = self.dropped
        self._tell()
        return self.state

    # -- the mirror thread ----------------------------------------------------

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item[0] == "log":
                for sink in self.sinks:
                    self._call(sink, "log", item[1], item[2])
            else:
                for sink in self.sinks:
                    if self._call(sink, "finish", item[1], item[2]):
                        self.state[sink.name]["status"] = "closed"
                return

    def _call(self, sink: Sink, what: str, *args: Any) -> bool:
        entry = self.state[sink.name]
        try:
            getattr(sink, what)(*args)
        except Exception as exc:  # noqa: BLE001 - any tracker failure is the mirror's, never the training loop's
            entry["errors"] += 1
            entry["last_error"] = _text(exc)
            if entry["errors"] == 1:
                _warn(f"{self.run_id}: report_to {sink.name} failed ({_text(exc)}); the run and its points on the "
                      "platform go on, and the failures are counted on the run's summary under mirrors")
                self._tell()
            if what == "finish":
                entry["status"] = "failed to close"
            return False
        if what == "log":
            entry["points"] += 1
        return True

    def _tell(self) -> None:
        if self._note is None:
            return
        try:
            self._note({name: entry.copy() for name, entry in self.state.items()})
        except Exception:  # noqa: BLE001 - the record of the mirrors is itself telemetry
            pass

