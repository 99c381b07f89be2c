"""Runs on the platform: track a fine-tune, read it back, and put its results on its page.

    import whileai.simulations as wai

    run = wai.training_run(dataset="ds_...", config={"lr": 2e-4})
    trainer.add_callback(wai.TrainerCallback(run))
    trainer.train()          # the callback logs every step and finishes the run
    print(run)               # run_... done, step 40/40, http://127.0.0.1:8470/runs/run_...

The sending machinery (buffer, background flush, retries, the spool) lives in
:mod:`._tracking`; this module is the surface people call.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Mapping
from typing import Any

from . import defaults
from ._client import Client, get_client
from whileai.core.paths import data_root
from ._tracking import FINAL_STATUSES, Tracker, jsonable, to_float
from whileai.core.errors import PlatformError, TrainingConfigError
from ._hosting import (
    _LORA_SHAPE,
    _closed,
    _id_or_problem,
    _running_run,
    _start_run,
    _warn,
    resolve_config,
    selection_gate,
)

__all__ = [
    "TrainingRun",
    "TrainerCallback",
    "training_run",
    "get_run",
    "list_runs",
    "delete_run",
    "attach_holdout",
    "attach_delta",
]

_STATUSES = ("running", *FINAL_STATUSES)
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


def _holdout_fields(before: Any, after: Any, metric: str) -> dict[str, float]:
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


def _id_of(value: Any, prefix: str, what: str) -> str:
    """The id in ``value``: an id string, a record with "id", or a handle with ``.id``."""
    found = value.get("id") if isinstance(value, dict) else getattr(value, "id", value)
    if not isinstance(found, str) or not found:
        raise ValueError(f"{what}={value!r} is not a {prefix}... id; pass the id string or the handle that carries it")
    return found


def _client_of(value: Any, api_key: str | None) -> Client:
    if api_key is None and isinstance(value, TrainingRun):
        return value._client
    return get_client(api_key=api_key)


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
        self.selection: dict[str, Any] | None = None
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
        self._remote_step = record.get("step")
        self._remote_total = record.get("total_steps")
        self._record_url = record.get("url")
        tracker.finished = self.status in FINAL_STATUSES

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
        self._summarize(_holdout_fields(before, after, metric))

    def delta(self, before: Any, after: Any, by: str | None = None, proxy: str | None = None) -> dict[str, Any]:
        """Compute ``delta_report(before, after, by=, proxy=)``, keep it on the run and return it.

        It is sent with finish under ``summary["delta"]`` (right away when the
        run has already finished), and the run's page draws it.
        """
        from .report import delta_report

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
        self.status, self.error = status, error
        self._tracker.update(fields={"status": status, "error": error})
        self._tracker.finished = True
        return self._tracker.flush()

    def fail(self, error: Any) -> bool:
        """Finish the run as failed with ``error`` (an exception or a message)."""
        return self.finish("failed", error=error)

    def __enter__(self) -> TrainingRun:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if self.status == "running":
            if exc_type is None:
                self.finish("done")
            elif issubclass(exc_type, KeyboardInterrupt):
                self.finish("stopped", error="interrupted (KeyboardInterrupt)")
            else:
                self.fail(exc if exc is not None else exc_type.__name__)
        return False

    # -- hosted runs -----------------------------------------------------------

    def refresh(self) -> TrainingRun:
        """Read the run's state from the platform: status, adapter, training (with cost), error."""
        record = self._client.request("GET", f"/runs/{self.id}", params={"series": "false"})
        self._apply(record)
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
            from ._hosting import TrainingWarning

            warnings.warn(answer.get("detail") or f"{self.id} already ended {self.status}", TrainingWarning,
                          stacklevel=2)
        return self.status

    def wait(self, poll: float | None = None, timeout: float | None = None) -> str:
        """Block until the run ends and return its final status; TimeoutError after ``timeout`` seconds.

        Reads the run every ``poll`` seconds (TRAINING_POLL_S when None), never
        faster than TRAINING_POLL_MIN_S.
        """
        every = defaults.TRAINING_POLL_S if poll is None else float(poll)
        every = max(every, defaults.TRAINING_POLL_MIN_S)
        deadline = None if timeout is None else time.monotonic() + float(timeout)
        while True:
            try:
                self.refresh()
            except PlatformError as exc:  # a platform restarting mid-wait is read again at the next poll
                if exc.status != 0 and exc.status < 500:
                    raise
            if self.status in FINAL_STATUSES:
                return self.status
            now = time.monotonic()
            if deadline is not None and now + every > deadline:
                time.sleep(max(0.0, deadline - now))
                raise TimeoutError(
                    f"{self.id} is still {self.status} after {timeout} s (step {self.step}/{self.total_steps}); "
                    f"call wait() again with a longer timeout, or watch {self.url}"
                )
            time.sleep(every)

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


# ---------------------------------------------------------------------------
# Functions over runs by id
# ---------------------------------------------------------------------------


def training_run(
    dataset: Any = None,
    after_dataset: Any = None,
    config: Any = None,
    api_key: str | None = None,
    name: str | None = None,
) -> TrainingRun:
    """Create a run on the platform (status running) and return the handle to log into.

    ``dataset`` is the ``ds_...`` set trained on and ``after_dataset`` the
    post-training rollouts, when there are some (ids or the handles ``push``
    returns). ``config`` is anything JSON-shaped, shown on the page as given.
    A run the process never finishes is marked stopped when the process exits
    (failed, with the exception, when an uncaught exception ended it).

        with wai.training_run(dataset="ds_...", config={"lr": 2e-4}) as run:
            for step in range(100):
                run.log(step=step, loss=train_step())
    """
    body: dict[str, Any] = {"name": name}
    if dataset is not None:
        body["dataset"] = _id_of(dataset, "ds_", "dataset")
    if after_dataset is not None:
        body["after_dataset"] = _id_of(after_dataset, "ds_", "after_dataset")
    if config is not None:
        body["config"] = jsonable(config, "config")
    body = {k: v for k, v in body.items() if v is not None}
    client = get_client(api_key=api_key)
    run = TrainingRun(client.request("POST", "/runs", json=body), client)
    run._tracker.own()
    return run


def get_run(run_id: Any, api_key: str | None = None) -> dict[str, Any]:
    """The run's record with its summary, its ``series`` (points, oldest first) and its cost.

    ``cost_usd`` is seconds / 3600 x GPU_USD_PER_HOUR[gpu] when the summary
    names the GPU, with ``cost_basis`` saying which price and when it was read.
    """
    return _client_of(run_id, api_key).request("GET", f"/runs/{_id_of(run_id, 'run_', 'run_id')}")


def list_runs(
    status: str | None = None,
    dataset: Any = None,
    name: str | None = None,
    limit: int | None = None,
    api_key: str | None = None,
) -> list[dict[str, Any]]:
    """The account's runs, newest first, filtered by status, dataset and name (the platform's limit when None)."""
    if status is not None and status not in _STATUSES:
        raise ValueError(f"status={status!r} is not a run status; accepted: {', '.join(map(repr, _STATUSES))}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit={limit!r} is not a positive int; pass e.g. limit=20, or None for the default")
    params = {
        "status": status,
        "dataset": None if dataset is None else _id_of(dataset, "ds_", "dataset"),
        "name": name,
        "limit": limit,
    }
    return get_client(api_key=api_key).request("GET", "/runs", params=params)["runs"]


def delete_run(run_id: Any, api_key: str | None = None) -> dict[str, Any]:
    """Delete a run and its points. Returns ``{"id": ..., "deleted": True}``."""
    return _client_of(run_id, api_key).request("DELETE", f"/runs/{_id_of(run_id, 'run_', 'run_id')}")


def attach_holdout(
    run_id: Any, before: float, after: float, metric: str = "pass_rate", api_key: str | None = None
) -> dict[str, Any]:
    """Put the held-out before/after on a run that has already finished; returns the updated record.

    Pass rates are 0 to 1; ``metric="loss"`` sends held-out loss (lower is
    better). The status is left as it is; sending again is a correction.

        wai.attach_holdout("run_...", before=0.42, after=0.58)
    """
    fields = _holdout_fields(before, after, metric)
    if isinstance(run_id, TrainingRun):
        run_id.summary.update(fields)
    return _client_of(run_id, api_key).request(
        "PATCH", f"/runs/{_id_of(run_id, 'run_', 'run_id')}", json={"summary": fields}
    )


def attach_delta(
    run_id: Any, before: Any, after: Any, by: str | None = None, proxy: str | None = None, api_key: str | None = None
) -> dict[str, Any]:
    """Compute ``delta_report(before, after, by=, proxy=)`` and put it on a finished run's page.

    The summary is sent again with ``delta`` added and the status unchanged.
    Returns the report.
    """
    from .report import delta_report

    identifier = _id_of(run_id, "run_", "run_id")
    report = delta_report(before, after, by=by, proxy=proxy)
    fields = {"delta": jsonable(report, "delta_report(...)")}
    if isinstance(run_id, TrainingRun):
        run_id.summary.update(fields)
    _client_of(run_id, api_key).request("PATCH", f"/runs/{identifier}", json={"summary": fields})
    return report


# ---------------------------------------------------------------------------
# Hosted training (the checks live in _hosting.py)
# ---------------------------------------------------------------------------


def train(
    dataset: Any,
    method: str = "sft",
    steps: int | None = None,
    epochs: float | None = None,
    holdout: Any = None,
    base_model: str | None = None,
    check: str = "require",
    min_mixed_tasks: int | None = None,
    generations: int | None = None,
    beta: float | None = None,
    learning_rate: float | None = None,
    seed: int | None = None,
    max_completion_length: int | None = None,
    loss_type: str | None = None,
    temperature: float | None = None,
    truncated: str = "mask",
    config: Mapping[str, Any] | None = None,
    wait: bool = False,
    target: str | None = None,
    init_from: Any = None,
    mask_mode: str | None = None,
    unroll: bool | None = None,
    strip_think: bool | None = None,
    max_tool_output_chars: int | None = None,
) -> Any:
    """Start a hosted LoRA fine-tune on a pushed dataset and return its run at once.

    ``method`` is "sft" (every row as pushed: push ``scored.passes()``),
    "grpo" (prompts with both a pass and a fail; reward = the first action
    against the row's gold), "dpo" (a pass against a fail per prompt, length
    matched) or "rm" (a reward model on those pairs; ``reward_model(run)`` is
    then a judge). Before any model is loaded, every argument is checked
    (TrainingConfigError lists each problem with the range and the paper's
    value from TRAINING_KNOBS) and the dataset's ``selection_report`` decides
    (``check``: "require" refuses what cannot teach with
    TrainingSelectionError, "warn" says so and starts, "off" skips the read).
    Every knob, defaults included, lands on the run's config. A dataset that is
    already training answers with that run. ``target`` is "local" (a detached
    process here) or "modal"; None takes the platform's default
    (TRAIN_TARGET_ENV). ``wait=True`` blocks until the run ends.

    ``init_from`` (a finished run: the TrainingRun, its record or its id)
    makes this run a stage after that one: it loads that run's adapter on its
    base, trainable, and keeps training it, so the result is one adapter that
    ``serve`` puts on the same base. The base (and LoRA shape) come from that
    run; a different ``base_model`` is refused, and so is ``method="rm"``,
    which starts from the base. The run's config names it under ``init_from``.

    ``mask_mode``, ``unroll``, ``strip_think`` and ``max_tool_output_chars``
    are the export settings of ``export_dataset`` (same names, same meanings),
    applied by the job when it builds what the trainer reads: SFT reads all
    four, DPO the last two (TRAINING_KNOBS says which method reads which).
    None keeps the exporter's default.

        run = wai.train(ds, method="sft", wait=True)
        run.training["before"], run.training["after"], run.adapter
        grpo = wai.train(ds_mixed, method="grpo", init_from=run, wait=True)
    """
    problems: list[str] = []
    _closed("method", method, defaults.TRAIN_METHODS, problems)
    _closed("check", check, defaults.TRAIN_CHECKS, problems)
    _closed("target", target, defaults.TRAIN_TARGETS, problems, none_ok=True)
    if not isinstance(wait, bool):
        problems.append(f"wait={wait!r} is not True or False")
    if base_model is not None and (not isinstance(base_model, str) or not base_model.strip()):
        problems.append(f"base_model={base_model!r} is not a model name or path; pass a string or leave it None")
    if config is not None and not isinstance(config, Mapping):
        problems.append(f"config={config!r} is not a mapping; pass a dict of host keys or leave it None")
        config = None
    dataset_id = _id_or_problem(dataset, "dataset", problems)
    holdout_id = _id_or_problem(holdout, "holdout", problems) if holdout is not None else None
    knobs = {"steps": steps, "epochs": epochs, "generations": generations, "beta": beta,
             "learning_rate": learning_rate, "seed": seed, "max_completion_length": max_completion_length,
             "loss_type": loss_type, "temperature": temperature, "truncated": truncated,
             "min_mixed_tasks": min_mixed_tasks, "mask_mode": mask_mode, "unroll": unroll,
             "strip_think": strip_think, "max_tool_output_chars": max_tool_output_chars}
    client = None
    start = None
    if init_from is not None and method in defaults.TRAIN_METHODS:
        client = get_client()
        start = _start_run(client, init_from, method, base_model, config, problems)
    start_config = (start.get("config") if isinstance(start.get("config"), Mapping) else {}) if start else {}
    if start is not None:
        base_model = start_config.get("base_model") or (start["summary"].get("training") or {}).get("base_model")
        inherited = {k: start_config[k] for k in _LORA_SHAPE if start_config.get(k) is not None}
        config = {**dict(config or {}), **inherited}
    resolved: dict[str, Any] = {}
    notes: list[str] = []
    if method in defaults.TRAIN_METHODS:
        resolved, knob_problems, notes = resolve_config(method, knobs, config, base_model=base_model,
                                                        target=target, holdout=holdout_id)
        problems += knob_problems
    if problems:
        listed = "\n".join(f"  - {p}" for p in problems)
        raise TrainingConfigError(f"train() cannot start: {len(problems)} problem(s)\n{listed}", problems)
    if start is not None:
        resolved["init_from"] = start["id"]

    client = client or get_client()
    record = client.request("GET", f"/datasets/{dataset_id}")
    if holdout_id is None and record.get("split") == "train" and record.get("sibling"):
        holdout_id = resolved["holdout"] = record["sibling"]

    report = None
    if check != "off":
        from .datasets import profile

        prof = profile(dataset_id)
        report = selection_gate(prof, method, check, int(resolved["min_mixed_tasks"]))
        if method == "grpo" and generations is None and (prof.get("repeats") or {}).get("common"):
            lo, hi = defaults.TRAINING_KNOBS["generations"]["grpo"]["range"]
            resolved["generations"] = min(max(int(prof["repeats"]["common"]), lo), hi)
        temps = [float(t) for t in prof.get("temperatures") or []]
        if method == "grpo" and temperature is None and len(temps) == 1:
            resolved["temperature"] = temps[0]  # roll out where the rows were measured: like for like
        if method == "grpo" and temps and float(resolved["temperature"]) not in temps:
            seen = ", ".join(f"{t:g}" for t in temps)
            _warn(f"temperature={resolved['temperature']:g} differs from the dataset's sampling.temperature ({seen}): "
                  "the run samples at another temperature than the rollouts were measured at, so before/after is "
                  "not like for like; pass temperature= to match")
    for note in notes:
        _warn(note)
    if resolved["base_model"] not in defaults.SERVED_BASES:
        _warn(f"base_model={resolved['base_model']!r} is not in SERVED_BASES, so this run's adapter cannot be "
              f"served afterwards; the served bases are {', '.join(defaults.SERVED_BASES)}")

    existing = _running_run(client, dataset_id)
    if existing is not None:
        theirs = existing.get("config") if isinstance(existing.get("config"), dict) else {}
        differs = sorted(k for k, v in resolved.items() if k != "target" and theirs.get(k) != v)
        _warn(f"{dataset_id} is already training in {existing['id']} ({theirs.get('method')}); returning that run "
              "instead of starting a second" + (f" (its settings differ: {', '.join(differs)})" if differs else ""))
        run = TrainingRun(existing, client)
        run.selection = report
        if wait:
            run.wait()
        return run

    body = {
        "name": f"{method} {record.get('name') or dataset_id}",
        "dataset": dataset_id,
        "config": jsonable(resolved, "config"),
        "kind": defaults.TRAIN_RUN_KIND,
    }
    if report is not None:
        body["summary"] = {"selection": jsonable(report, "selection")}
    run = TrainingRun(client.request("POST", "/runs", json=body), client)
    run.selection = report
    spec = {**body["config"], "run_id": run.id, "dataset": dataset_id, "holdout": holdout_id}
    try:
        client.request("POST", "/jobs/launch", json={"run_id": run.id, "kind": method, "target": target, "spec": spec})
    except Exception:
        try:  # the platform failed the run with the reason; show it on the handle too
            run.refresh()
        except Exception:
            pass
        raise
    run.refresh()
    if wait:
        run.wait()
    return run


# ---------------------------------------------------------------------------
# TrainerCallback (built on first use, so importing this module does not import transformers)
# ---------------------------------------------------------------------------


def _define_trainer_callback() -> type:
    import transformers

    class TrainerCallback(transformers.TrainerCallback):
        """Log a Transformers or TRL trainer into a run: ``trainer.add_callback(wai.TrainerCallback(run))``.

        Takes the step count from the trainer at train begin, records every
        numeric value the trainer logs (loss, learning_rate, eval_loss, epoch,
        grad_norm, mean_token_accuracy, TRL's rewards/..., kl, ...) at the
        trainer's global step, and finishes the run as done at train end,
        keeping notes. If training raises, the run stays running: use the run
        as a context manager around ``trainer.train()`` or call ``run.fail``.
        """

        def __init__(self, run: TrainingRun):
            if not isinstance(run, TrainingRun):
                raise TypeError(
                    f"TrainerCallback needs the TrainingRun to log into, got {type(run).__name__}; "
                    "make one with wai.training_run(...)"
                )
            self.run = run

        def on_train_begin(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                total = state.max_steps if state.max_steps and state.max_steps > 0 else None
                self.run._tracker.progress(state.global_step, total)

        def on_step_end(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                self.run._tracker.progress(state.global_step, None)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and state.is_world_process_zero:
                # a trainer reports None for a metric with no value at this step (TRL's GRPO does for
                # clip_ratio/low_min when nothing was clipped): absent, not a bad value to warn about
                self.run._tracker.log(state.global_step, {k: v for k, v in logs.items() if v is not None})

        def on_train_end(self, args, state, control, **kwargs):
            if state.is_world_process_zero and self.run.status == "running":
                self.run.finish("done")

    TrainerCallback.__module__ = __name__
    TrainerCallback.__qualname__ = "TrainerCallback"
    return TrainerCallback


def __getattr__(name: str) -> Any:
    if name == "TrainerCallback":
        value = globals()["TrainerCallback"] = _define_trainer_callback()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

from ._models import delete_model, models, reward_model, serve, unserve  # noqa: E402,F401
