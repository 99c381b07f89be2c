"""One hosted training job from start to finish, the same on this machine and on Modal.

``run_job`` loads the base, measures the held-out rate before, trains with the
method's TRL trainer (logging through ``TrainerCallback`` into the run),
measures after, saves the adapter, and finishes the run with
``note(adapter=..., training={...})`` and ``holdout(before, after)``; ``training``
keeps the per-prompt outcomes before and after and how sure the result is
(``stats``: n, Wilson intervals, exact McNemar; ``whileai.core.stats``). The
method modules (``sft``, ``grpo``, ``dpo``, ``rm``) each are a :class:`JobBody`:
``load``, ``evaluate`` and ``fit``.
"""

from __future__ import annotations

import importlib
import json
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from whileai.core.jobrow import JobPlatform
from whileai.core.spec import RunSpec, read_spec
from whileai.jobs import _kept_measure
from whileai.jobs._measure import HeldOutMeasure
from whileai.jobs._training_fields import (BaseNotes, CaseNotes, DataGates, FitFields, HeldOutStats, NoSummary,
                                           ResumedNote, TrainedBatch, TrainerSetup, TrainingSummary, WorldFields)
from whileai.domain.tracking import TrainingRun

if TYPE_CHECKING:
    from whileai.jobs.distributed import World

__all__ = ["JobRun", "OtherRankRun", "JobBody", "run_job", "job_spec", "stored_pairs", "METHOD_MODULES",
           "BEFORE_FILE"]

#: the held-out "before" measurement, kept beside the run's checkpoints so a resumed job reuses it
BEFORE_FILE = "before.json"

METHOD_MODULES = {m: f"whileai.jobs.{m}" for m in ("sft", "grpo", "dpo", "rm")}


class JobRun(TrainingRun):
    """A run a job finishes itself: the trainer's end does not finish it, ``finish`` after ``release`` does.

    ``TrainerCallback`` finishes its run at train end; a job still has to measure
    the held-out rate and save the adapter, and a run marked done before then
    would let ``wait()`` return without an adapter. While held, ``finish("done")``
    only flushes.
    """

    def __init__(self, record: dict[str, Any], client: Any = None):
        super().__init__(record, client)
        self._held = True

    def release(self) -> None:
        self._held = False

    def finish(self, status: str = "done", error: Any = None) -> bool:
        if self._held and status == "done":
            return self.flush()
        return super().finish(status, error)


class _DiscardingTracker:
    """The tracker of a rank past the first: progress and points go nowhere (rank 0 logs them)."""

    def progress(self, *_args: Any, **_kwargs: Any) -> None:
        return None

    def log(self, *_args: Any, **_kwargs: Any) -> None:
        return None


class OtherRankRun:
    """The run as a rank past the first sees it: the same calls as :class:`JobRun`, none of them written.

    Only rank 0 creates and writes the run (points, notes, summary, monitor looks), so a point
    is stored once whatever the world size.
    """

    def __init__(self, run_id: str):
        self.id = run_id
        self.status = "running"
        self._tracker = _DiscardingTracker()

    def note(self, **_fields: Any) -> None:
        return None

    def log(self, *_args: Any, **_kwargs: Any) -> None:
        return None

    def holdout(self, *_args: Any, **_kwargs: Any) -> None:
        return None

    def release(self) -> None:
        return None

    def flush(self) -> bool:
        return True

    def finish(self, status: str = "done", error: Any = None) -> bool:
        return True


def stored_pairs(series: Any) -> frozenset[tuple[str, int]]:
    """The ``(metric, step)`` pairs a run's series holds (``GET /runs/{id}``'s ``series``)."""
    pairs: set[tuple[str, int]] = set()
    for point in series or []:
        step = point.get("step") if isinstance(point, dict) else None
        if isinstance(step, int):
            pairs.update((name, step) for name in point.get("metrics") or {})
    return frozenset(pairs)


def _resume_note(run: JobRun | OtherRankRun, start: Path) -> ResumedNote:
    """The run's ``resumed`` note: from which checkpoint's step, and how many times it was resumed; the fields
    the platform wrote into the note the run holds (its JSON, read back as that note) are kept."""
    earlier = getattr(run, "summary", {}).get("resumed")
    times = int(earlier.get("times") or 0) if isinstance(earlier, dict) else 0
    kept = {k: v for k, v in earlier.items() if k not in ("from_step", "times")} if isinstance(earlier, dict) else {}
    return cast(ResumedNote, {**kept, "from_step": int(start.name.partition("-")[2]), "times": times + 1})


def _log_history(run: JobRun, start: Path) -> None:
    """Log what the checkpoint's trainer logged up to its step and the run does not hold: points the
    interrupted job logged but never delivered (it was killed between two sends)."""
    try:
        history = json.loads((start / "trainer_state.json").read_text()).get("log_history") or []
    except (OSError, ValueError):
        return
    for entry in history:
        if isinstance(entry, dict) and isinstance(entry.get("step"), int):
            run.log(step=entry["step"], **{k: v for k, v in entry.items() if k != "step" and v is not None})


def job_spec(spec: RunSpec | Mapping[str, Any]) -> RunSpec:
    """The job's typed spec from its JSON (a job row's ``spec``, which holds the spec alone: the platform's fields
    are its ``platform``, ``whileai.core.jobrow``), or the spec as given.

    Raises ``ValueError`` naming every problem when it is not a spec of its method.
    """
    return spec if isinstance(spec, RunSpec) else read_spec(spec)


def _builds_kit_base(spec: RunSpec) -> str | None:
    """What to say when this job pre-trains the kit's demo base first (once per data root), else None."""
    from whileai.kit import defaults as kit_defaults

    if spec.base_model != kit_defaults.KIT_BASE_NAME or spec.target == "modal":
        return None
    from whileai.kit import demo_base_trains
    from whileai.kit.defaults import DEMO_BASE_BUILD_S

    if not demo_base_trains():  # the packaged base is copied in a moment
        return None
    return (f"building the kit's base (once per data root, about {DEMO_BASE_BUILD_S} s on a laptop CPU; "
            "later runs load it at once)")


def _measured(result: HeldOutMeasure, holdout_rows: list[dict[str, Any]] | None) -> str:
    """What a held-out measurement counted: its prompts (or pairs and rows), of the held-out rows given."""
    given = f"of {len(holdout_rows or [])} held-out rows"
    if result.metric == "loss":
        return f"{result.rows} rows ({given})"
    if result.metric in ("pair_accuracy", "row_accuracy"):
        return f"{result.prompts} pairs of {result.rows} rows ({given})"
    if result.metric == "episode_pass_rate":
        return f"{result.prompts} distinct episodes played whole ({given})"
    return f"{result.prompts if result.prompts is not None else result.rows} distinct prompts ({given})"


@runtime_checkable
class JobBody(Protocol):
    """What a method module gives ``run_job`` (``whileai.jobs.sft``, ``grpo``, ``dpo``, ``rm``).

    ``spec`` is the job's typed, frozen run spec (its method's model of ``whileai.core.spec``):
    every knob holds the value that runs.
    """

    def load(self, spec: Any) -> tuple[Any, Any]:
        """``(model, tokenizer)``: the base, with the start run's adapter when the spec has ``init_from``."""
        ...

    def evaluate(self, spec: Any, model: Any, tokenizer: Any, rows: list[dict[str, Any]]) -> HeldOutMeasure:
        """The held-out measurement: its metric and value, with per-prompt outcomes where there are prompts."""
        ...

    def fit(self, spec: Any, model: Any, tokenizer: Any, rows: list[dict[str, Any]], folder: Path,
            callbacks: list[Any], holdout: list[dict[str, Any]] | None = None,
            run: Any = None) -> tuple[Any, FitFields]:
        """Train; returns the trained model and the fields it adds to the run's ``training`` summary (those every
        method adds, and its own beside them)."""
        ...

    # Optional: ``keeps_measure(spec) -> bool``, True when ``evaluate`` is the plain first-action pass rate, which
    # is then kept beside the adapter and read back as the "before" of a stage started from it (_kept_measure).


def _method(name: str) -> JobBody:
    if name not in METHOD_MODULES:
        raise ValueError(f"method={name!r} has no job body; accepted: {', '.join(METHOD_MODULES)}")
    module = importlib.import_module(METHOD_MODULES[name])
    if not isinstance(module, JobBody):
        missing = [n for n in ("load", "evaluate", "fit") if not callable(getattr(module, n, None))]
        raise TypeError(f"{METHOD_MODULES[name]} is not a job body: it lacks {', '.join(missing)}; "
                        "a method module defines load, evaluate and fit (whileai.jobs.body.JobBody)")
    return module


def _held_out_stats(before: HeldOutMeasure | None, after: HeldOutMeasure | None) -> HeldOutStats:
    """The per-prompt (rm: per-pair) outcomes before and after, and how sure the result is.

    ``outcomes`` keeps both sides in prompt order so the test can be recomputed;
    ``stats`` is ``whileai.core.stats.holdout_result`` over them (n, Wilson intervals,
    exact McNemar on the prompts that changed); ``by_group`` the same per group
    where the prompts name one. A metric without per-prompt outcomes (held-out
    loss) adds nothing.
    """
    from whileai.core.stats import holdout_result

    sides = {name: list(side.outcomes) for name, side in (("before", before), ("after", after))
             if side is not None and side.outcomes is not None}
    result = holdout_result(sides.get("before"), sides.get("after"))
    if result is None:
        return {}
    out: HeldOutStats = {"outcomes": {"before": sides.get("before"), "after": sides.get("after")}, "stats": result}
    out.update(_by_group(before, after, sides))
    return out


def _by_group(before: HeldOutMeasure | None, after: HeldOutMeasure | None,
              sides: dict[str, list[int]]) -> HeldOutStats:
    """``by_group``: the before/after of each group of held-out prompts (``groups``: a BFCL row's category)."""
    from whileai.core.defaults import HOLDOUT_GROUP_FIELD
    from whileai.core.stats import group_results

    found = (after.groups if after is not None else None) or (before.groups if before is not None else None)
    by_group = group_results(sides.get("before"), sides.get("after"), found, HOLDOUT_GROUP_FIELD)
    return {"by_group": by_group} if by_group else {}


def _mirror(spec: RunSpec, run: TrainingRun) -> str:
    """Open the ``report_to`` mirrors on rank 0 and hand them the run; what to say in the job's log.

    Raises TrainingConfigError naming the extra when a tracker's package is not installed.
    """
    from whileai.domain.tracking.mirror import open_mirrors

    mirrors = open_mirrors(spec.report_to, run_id=run.id, name=run.name, url=run.url,
                           config=spec.model_dump(mode="json", exclude={"provenance"}),
                           note=lambda state: run.note(mirrors=state))
    run.mirror_to(mirrors)
    where = "; ".join(f"{name} -> {entry.get('to') or entry.get('last_error')}" for name, entry in mirrors.state.items())
    return f"mirroring the run (report_to): {where}"


@dataclass(frozen=True)
class _Job:
    """What every step of one job reads: the typed spec, its run, its method, and this process's place."""

    spec: RunSpec
    run: JobRun | OtherRankRun
    method: JobBody
    place: World
    started: float

    def say(self, what: str) -> None:
        """One line per phase in the job's log, stamped with the seconds since the job started."""
        _say(self.started, what)


def _say(started: float, what: str) -> None:
    print(f"[{time.time() - started:7.1f} s] {what}", flush=True)


@dataclass(frozen=True)
class _Trained:
    """What the trainer hands back: the trained model, its ``training`` fields, its time and its setup."""

    model: Any
    extra: FitFields
    seconds: float
    setup: TrainerSetup


def run_job(spec: RunSpec | Mapping[str, Any], rows: list[dict[str, Any]], holdout_rows: list[dict[str, Any]] | None,
            run: JobRun | OtherRankRun, adapter_path: Path, folder: Path, checkpoints: Path | None = None,
            logged: Callable[[], frozenset[tuple[str, int]]] | None = None,
            on_checkpoint: Callable[[], None] | None = None,
            platform: JobPlatform | None = None) -> TrainingSummary | NoSummary:
    """Train ``spec.method`` on ``rows`` and finish ``run``; returns the ``training`` summary (rank 0; an empty
    one on a rank past the first).

    ``checkpoints`` is the run's checkpoint folder (None: the job saves none): the trainer saves its state
    there every ``save_steps`` and, when it holds one already (an interrupted job of the same run), starts
    from the newest; the held-out "before" is then read back from BEFORE_FILE instead of measured again,
    and ``logged()`` (the run's stored ``(metric, step)`` pairs) keeps the re-run steps from storing a point
    twice. ``on_checkpoint`` runs after each save (a Modal Volume's commit). The folder goes once the run is done.
    ``platform`` is the job row's platform fields (the judges the launch resolved, where a ``python:`` reward is
    imported from), which the job's loaders read while it runs (``_loading.JOB_PLATFORM``); None outside a
    platform job.

    Raises whatever the trainer raises; the caller fails the run with it.
    """
    from whileai.jobs import _loading

    # The one typed spec: every knob the method reads, with its type, in canonical spelling (a spec
    # recorded before the typed spec reads too). A spec that is not one fails the job here, by name.
    with _loading.job_platform(platform):
        job = _setup(job_spec(spec), run)
        rows, holdout_rows, gates = _setup_data(job, rows, holdout_rows)
        model, tokenizer = _setup_model(job, folder)
        resumed = _resume(job, checkpoints, logged)
        key = _kept_key(job, tokenizer, holdout_rows)
        before = _measure_before(job, model, tokenizer, holdout_rows, checkpoints, resumed is not None, key)
        trained = _train(job, model, tokenizer, rows, holdout_rows, folder, checkpoints, on_checkpoint)
        if not job.place.first:  # rank 0 measures, saves the adapter and finishes the run
            job.say(f"rank {job.place.rank} of {job.place.size}: trained its share "
                    f"({trained.extra.get('steps')} steps)")
            return {}
        after = _measure_after(job, trained, tokenizer, holdout_rows)
        saved = _loading.save_adapter(trained.model, tokenizer, adapter_path)
        if after is not None and key is not None:  # a stage started from this adapter reads it back as its "before"
            _kept_measure.keep(saved, key, after)
        training = _summary(job, trained, tokenizer, before, after, holdout_rows, gates, resumed)
        _note_episodes(job, before, after)
        _finish(job, training, saved, checkpoints)
        return training


def _setup(spec: RunSpec, run: JobRun | OtherRankRun) -> _Job:
    """What fails before anything loads fails here: what this machine cannot run, a tracker's missing
    package (``report_to``), a method without a job body."""
    from whileai.jobs.distributed import machine_problems, world

    started = time.time()
    problems = machine_problems(spec)
    if problems:  # before anything loads: what this machine cannot run, each with its reason
        raise ValueError("this machine cannot run the spec: " + "; ".join(problems))
    place = world()
    if spec.report_to and place.first and isinstance(run, TrainingRun):  # before anything loads: a missing package
        _say(started, _mirror(spec, run))                                # refuses the run here, naming the extra
    return _Job(spec, run, _method(spec.method), place, started)


def _setup_data(job: _Job, rows: list[dict[str, Any]], holdout_rows: list[dict[str, Any]] | None,
                ) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None, DataGates]:
    """The rows through the data gates, what the gates did to them, and the held-out rows this rank measures
    (rank 0 only)."""
    from whileai.domain.rows.datagate import gate_rows

    # the data gates' unambiguous mappings (wire tool names, JSON-Schema types): what the selection gate counted
    rows, report = gate_rows(rows)
    gates: DataGates = {"tool_names_mapped": report["tool_names_mapped"], "types_mapped": report["types_mapped"],
                        "refused_rows": report["refused_rows"]}
    if holdout_rows:
        holdout_rows, _ = gate_rows(holdout_rows)
    if not job.place.first:  # the held-out set is measured once, on rank 0
        holdout_rows = None
    return rows, holdout_rows, gates


def _setup_model(job: _Job, folder: Path) -> tuple[Any, Any]:
    """Threads and seeds set, then the base loaded (built first when it is the kit's, not built yet)."""
    from whileai.jobs import _environment

    spec = job.spec
    _environment.cpu_threads()
    _environment.seed_all(spec.seed)
    folder.mkdir(parents=True, exist_ok=True)
    building = _builds_kit_base(spec)
    job.run.note(phase=building or "loading the base")
    if building:
        job.say(building)
    job.say(f"loading {spec.base_model}" + (f" with the adapter of {spec.init_from}" if spec.init_from else ""))
    return job.method.load(spec)


def _resume(job: _Job, checkpoints: Path | None,
            logged: Callable[[], frozenset[tuple[str, int]]] | None) -> ResumedNote | None:
    """The run's ``resumed`` note when the run holds a checkpoint of an interrupted job, else None.

    The points the interrupted job logged are logged again, and the run's stored ones kept from being
    stored twice.
    """
    from whileai.jobs import _trainer_setup

    start = _trainer_setup.last_checkpoint(checkpoints)
    if start is None:
        return None
    run = job.run
    resumed = _resume_note(run, start)
    job.say(f"resuming the run from its checkpoint at step {resumed['from_step']} (resume {resumed['times']})")
    run.note(resumed=resumed)
    if isinstance(run, JobRun) and logged is not None:
        run._tracker.stored = logged()  # the steps re-run after the checkpoint keep their stored points
        _log_history(run, start)
    return resumed


def _kept_key(job: _Job, tokenizer: Any,
              holdout_rows: list[dict[str, Any]] | None) -> _kept_measure.MeasureKey | None:
    """What this job's held-out measurement depends on, when its method keeps it beside the adapter (else None)."""
    keeps = getattr(job.method, "keeps_measure", None)
    if not holdout_rows or keeps is None or not keeps(job.spec):
        return None
    return _kept_measure.measure_key(job.spec, tokenizer, holdout_rows)


def _measure_before(job: _Job, model: Any, tokenizer: Any, holdout_rows: list[dict[str, Any]] | None,
                    checkpoints: Path | None, resuming: bool,
                    key: _kept_measure.MeasureKey | None) -> HeldOutMeasure | None:
    """The held-out rate before training: read back from BEFORE_FILE when resuming, or from the start run's own
    "after" when it was measured the same way on the same adapter (``_kept_measure``), else measured (and kept)."""
    from whileai.jobs import _trainer_setup

    spec, before = job.spec, None
    kept = checkpoints / BEFORE_FILE if checkpoints is not None else None
    if resuming and holdout_rows and kept is not None and kept.is_file():
        before = HeldOutMeasure.from_json(json.loads(kept.read_text()))
        job.say(f"held-out before: read back from the interrupted job ({kept}), not measured again")
    if before is None and key is not None and spec.init_adapter:
        before = _kept_measure.read_back(Path(spec.init_adapter), key)
        if before is not None:
            before = replace(before, read_back_from=spec.init_from)
            job.say(f"held-out before: the start run {spec.init_from}'s own held-out after, read back (the same "
                    "adapter, prompts, reply cap, chat template and device), not measured again")
    if before is None:
        job.say("measuring the held-out set before training" if holdout_rows else "no held-out set: nothing to measure")
        if holdout_rows:
            job.run.note(phase="measuring the held-out set before training")
        before = job.method.evaluate(spec, model, tokenizer, holdout_rows) if holdout_rows else None
        if before is not None and kept is not None and _trainer_setup.checkpoints_on(spec):
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(json.dumps(before.to_json()))
    if before is not None:  # shown on the page while the trainer runs
        job.say(f"held-out before: {before.metric} {before.value} on {_measured(before, holdout_rows)}")
        job.run.note(training={"method": spec.method, "before": before.value, "metric": before.metric})
    return before


def _train(job: _Job, model: Any, tokenizer: Any, rows: list[dict[str, Any]],
           holdout_rows: list[dict[str, Any]] | None, folder: Path, checkpoints: Path | None,
           on_checkpoint: Callable[[], None] | None) -> _Trained:
    """The method's trainer, with the run's callbacks: the finite guard, points (rank 0), the trainer's record,
    system metrics, and the checkpoint commit."""
    from whileai.jobs import _trainer_setup
    from whileai.jobs._finite_guard import FiniteGuard
    from whileai.jobs.system import SystemMetrics
    from whileai.jobs.trainer_record import TrainerRecord
    from whileai.domain.tracking.callback import TrainerCallback

    spec, run = job.spec, job.run
    job.say(f"training {spec.method}: {len(rows)} train-side rows given, the method selects what it trains on")
    run.note(phase="training")
    train_started = time.time()
    system = SystemMetrics(run, base_model=spec.base_model)
    # a rank past the first logs nothing: its run is an OtherRankRun, which TrainerCallback does not take
    logging = [TrainerCallback(run)] if job.place.first else []
    committing = [_trainer_setup.on_save(on_checkpoint)] if on_checkpoint is not None else []
    guard = FiniteGuard(spec, run.id)  # every rank: each stops at the same non-finite step (fit_trainer raises)
    with _trainer_setup.checkpointing(checkpoints):
        model, extra = job.method.fit(spec, model, tokenizer, rows, folder,
                                      [guard, *logging, TrainerRecord(run), system, *committing],
                                      holdout=holdout_rows, run=run)
    return _Trained(model, extra, time.time() - train_started, system.setup)


def _measure_after(job: _Job, trained: _Trained, tokenizer: Any,
                   holdout_rows: list[dict[str, Any]] | None) -> HeldOutMeasure | None:
    """What the trainer received, then the held-out rate after training (None without a held-out set)."""
    spec, extra = job.spec, trained.extra
    too_long = extra.get("left_out_too_long") or 0
    job.say(f"trained {spec.method} on {extra.get('trainer_received')} {extra.get('unit', 'rows')} "
            f"({extra.get('steps')} steps" + (f"; {too_long} left out, longer than the model's context)" if too_long else ")"))
    job.say("measuring the held-out set after training" if holdout_rows else "no held-out set: nothing to measure")
    if holdout_rows:
        job.run.note(phase="measuring the held-out set after training")
    after = job.method.evaluate(spec, trained.model, tokenizer, holdout_rows) if holdout_rows else None
    if after is not None:
        job.say(f"held-out after: {after.metric} {after.value} on {_measured(after, holdout_rows)}")
    return after


def _summary(job: _Job, trained: _Trained, tokenizer: Any, before: HeldOutMeasure | None,
             after: HeldOutMeasure | None, holdout_rows: list[dict[str, Any]] | None, gates: DataGates,
             resumed: ResumedNote | None) -> TrainingSummary:
    """The run's ``training`` summary: the result, where and how long it trained, and the trainer's fields; the
    JSON the run is noted with and ``run_job`` returns, put together from the typed pieces (``_training_fields``)."""
    from whileai.jobs import _environment

    spec = job.spec
    first, last = before or after, after or before  # the metric is the first side's, the prompts the last side's
    seconds = round(time.time() - job.started, 2)
    gpu = _environment.gpu_name(spec)
    return {
        "method": spec.method,
        "base_model": spec.base_model,
        "before": before.value if before else None,
        "after": after.value if after else None,
        "metric": first.metric if first else "pass_rate",
        "holdout": spec.holdout,
        "holdout_prompts": after.prompts if after else None,
        "holdout_digest": last.prompt_digest if last else None,  # which prompts, in which order
        "holdout_rows_given": len(holdout_rows or []),
        # the run's time (and so its cost) counts the interrupted jobs' time too
        "seconds": seconds if resumed is None else round(seconds + float(resumed.get("earlier_seconds") or 0.0), 2),
        "train_seconds": round(trained.seconds, 2),
        "gpu": gpu,
        "device": _environment.device(),
        "compute": _environment.compute_path(),  # the CPU kernel path and threads the float sums took
        "target": spec.target or "local",
        **_batch(trained.setup),
        **_world(spec, job.place),
        "data_gates": gates.copy(),
        **trained.extra,
        **_held_out_stats(before, after),
        **_case_notes(spec, tokenizer, before, after, holdout_rows, resumed, seconds, gpu),
    }


def _batch(setup: TrainerSetup) -> TrainedBatch:
    """The LoRA rank and batch sizes of the trainer's setup, in its order: what the summary repeats of it."""
    batch: TrainedBatch = {}
    for key in ("lora_rank", "batch_per_device", "gradient_accumulation", "batch_size"):  # each a key of both
        if key in setup:
            batch[key] = setup[key]
    return batch


def _world(spec: RunSpec, place: World) -> WorldFields:
    """How many processes trained, and (past one) the strategy they shared the model's state by."""
    world: WorldFields = {"world_size": place.size, "processes": spec.processes, "nodes": spec.nodes}
    if place.size > 1:
        world["strategy"] = spec.strategy
    return world


def _case_notes(spec: RunSpec, tokenizer: Any, before: HeldOutMeasure | None, after: HeldOutMeasure | None,
                holdout_rows: list[dict[str, Any]] | None, resumed: ResumedNote | None, seconds: float,
                gpu: str | None) -> CaseNotes:
    """The summary's fields that depend on the case: a proxy reward against the exact judge, the base's notes, the
    start run, a resume (``seconds``: this job's own), the reward model's cut, the cost basis, why before/after is
    missing."""
    from whileai.jobs import _loading
    from whileai.jobs._rewards import proxy_vs_gold

    notes: CaseNotes = {}
    versus = proxy_vs_gold(before, after)  # a reward other than the exact judge: did it rise more than the task?
    if versus is not None:
        notes["reward_vs_exact"] = versus
    _add_base_notes(notes, _loading.base_notes(spec, tokenizer))  # the tool convention used, a GGUF base's import
    if spec.init_from:  # a stage: before is the start run's policy, measured here or read back from its "after"
        notes["init_from"] = spec.init_from
        if before and before.read_back_from:
            notes["before_read_back"] = before.read_back_from
    if resumed is not None:  # continued from a checkpoint of an interrupted job of this run
        notes["resumed"] = resumed
        notes["job_seconds"] = seconds
    if after and after.threshold is not None:  # rm: the cut that best separates the held-out rows
        notes["threshold"] = after.threshold
        notes["threshold_row_accuracy"] = after.row_accuracy
    if after and after.by_failure:  # rm: held-out pairs right per failure kind, before and after
        notes["pairs_by_failure"] = {"before": before.by_failure if before else None, "after": after.by_failure}
    if gpu is None:
        notes["cost_basis"] = "no estimate: the job ran on a CPU, which has no GPU price (GPU_USD_PER_HOUR)"
    if not holdout_rows:
        notes["holdout_note"] = (
            "no held-out set: pass holdout= or cut the dataset with wai.datasets.cut to measure before/after"
        )
    elif before and before.value is None:
        notes["holdout_note"] = before.why
    return notes


def _add_base_notes(notes: CaseNotes, base: BaseNotes) -> None:
    """Copy what the run records of its base into the case's notes, key by key in the order it lists them."""
    for key in ("tool_format", "base_import", "base_weights"):  # each a key of both
        if key in base:
            notes[key] = base[key]


def _note_episodes(job: _Job, before: HeldOutMeasure | None, after: HeldOutMeasure | None) -> None:
    """Held-out episodes played before and after: each one's verdict and conversation under the summary's
    ``episodes`` (``whileai.domain.episodes.record``), for the run's page to show turn by turn."""
    sides = [side.records if side else None for side in (before, after)]
    if all(records is None for records in sides):
        return
    from whileai.domain.episodes import EPISODES_KEY, episodes_summary

    job.run.note(**{EPISODES_KEY: episodes_summary(sides[0] or [], sides[1] or [])})


def _finish(job: _Job, training: TrainingSummary, saved: Any, checkpoints: Path | None) -> None:
    """Note the adapter and the summary, record before/after, finish the run and drop its checkpoints."""
    from whileai.core.stats import describe

    run = job.run
    run.note(adapter=str(saved), training=training, phase="done")
    if training["before"] is not None and training["after"] is not None:
        metric = "loss" if training["metric"] == "loss" else "pass_rate"
        run.holdout(training["before"], training["after"], metric=metric)
    run.release()
    run.finish("done")
    if checkpoints is not None and checkpoints.is_dir():  # a done run has nothing to resume
        shutil.rmtree(checkpoints, ignore_errors=True)
    sure = describe(training["before"], training["after"], training.get("stats"))
    job.say(f"done: {training['metric']} {sure}, adapter in {saved}")
