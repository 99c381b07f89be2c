"""A validated spec turned into library calls, in order, each visible in the output.

    load and grade the dataset -> push -> cut by task -> per stage: the set it trains on, profile and
    selection report -> export with gates (the file beside the run) -> wai.train on the target ->
    follow it (held-out before and after are measured by the job) -> delta_report when there are
    after-rollouts -> serve and one chat completion -> the expect checks

Every step is a public name of ``whileai.simulations``; the spec arrives as the
typed :class:`~whileai.runner.schema.RecipeSpec` (``cli`` composed and validated
it), each stage is resolved once as ``wai.train`` resolves it, and it leaves as
keyword arguments.
Exit codes: 0 done, 1 a run failed, 3 an expect line failed, 4 an export gate
or the selection gate refused the data, 130 interrupted (the hosted run is
stopped first).
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

from whileai.core.runnerrecord import CutNote, HeldOutNote, PushedNote, RunnerRecord
from whileai.core.spec import DPOSpec, GRPOSpec, RMSpec, RunSpec, updated
from whileai.core.stats import describe, group_lines

from whileai.runner import _estimate, defaults
from whileai.runner._effective import resolve_stages, stage_specs
from whileai.runner._facts import RunFact, RunFacts
from whileai.runner._label import run_label
from whileai.runner._progress import Progress
from whileai.runner._summary import ClosingSummary, Served
from whileai.runner.expect import settle
from whileai.runner.provenance import runner_record
from whileai.runner.quick import is_quick, note as quick_note, sft_rows
from whileai.runner.schema import Dataset, Environment, Export, RecipeSpec, Serve
from whileai.runner.stages import Stage, stage_check, stage_refs

if TYPE_CHECKING:
    from whileai.domain.export import PreferenceExport, TrainingExport
    from whileai.domain.tracking import TrainingRun
    from whileai.simulations.datasets import Split

__all__ = ["Context", "ReadRows", "run_spec", "EXIT_FAILED", "EXIT_EXPECT", "EXIT_GATE", "EXIT_INTERRUPTED"]

EXIT_FAILED, EXIT_EXPECT, EXIT_GATE, EXIT_INTERRUPTED = 1, 3, 4, 130


@dataclass
class Context:
    """Where a spec came from and where its files go (filled by the CLI, ``reproduce`` or a test)."""

    recipe: str | None
    overrides: list[str]
    #: Hydra's choice of each config group; None: not known (a reproduction of a record that did not record them)
    choices: dict[str, Any] | None
    command: str
    output_dir: Path
    sweep_id: str | None = None
    expect_lines: dict[str, str] = field(default_factory=dict)
    reproduces: str | None = None
    progress: Progress | None = None
    #: ``--json``: the closing summary is one JSON object on stdout instead of lines
    json: bool = False
    #: ``key=value`` words the run's name ends with: a sweep's swept knobs, else the knobs typed
    label: list[str] = field(default_factory=list)
    #: ``origin(dotted key)``: where a key of the spec was set (recipe file:line, command line), for provenance
    origin: Callable[[str], str] | None = None
    #: the dataset's rows, read before the stages were resolved (``_rundata``); None: the run loads them
    rows: ReadRows | None = None


@dataclass(frozen=True)
class ReadRows:
    """A dataset's rows as ``load_rows`` read them, its description, and the cut's sides drawn from them
    (``datasets.cut_sides``) to resolve a stage: the run pushes those sides, drawing nothing twice; and each
    ``train_tasks`` share of the train side, drawn once for both the stage's resolution and its training set."""

    rows: list[dict[str, Any]]
    what: str
    sides: Split
    #: ``(share, cut seed)`` -> indices into the train side's rows (``datasets.task_share``), drawn when first asked
    shares: dict[tuple[tuple[float, float], int | None], list[int]] = field(default_factory=dict, compare=False)

    def train_rows(self) -> list[dict[str, Any]]:
        """The train side's rows, in the order the cut gives them (``Cut.train_rows``)."""
        return [self.rows[i] for i in self.sides.train]

    def share(self, tasks: tuple[float, float], seed: int | None) -> list[dict[str, Any]]:
        """The train side's rows of the ``tasks`` share (a stage's ``train_tasks``), drawn with ``seed`` once."""
        import whileai.simulations as wai

        train = self.train_rows()
        if (tasks, seed) not in self.shares:
            self.shares[tasks, seed] = wai.datasets.task_share(train, tasks, seed)
        return [train[i] for i in self.shares[tasks, seed]]


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------


def _read_tools(value: Any) -> Any:
    if isinstance(value, str):
        with open(value, encoding="utf-8") as f:
            return json.load(f)
    return value


def load_rows(data: Dataset, environment: Environment | None = None) -> tuple[list[dict[str, Any]], str]:
    """The dataset's rows, graded as ``data.grade`` says, and a one-line description. ``environment`` is the spec's
    (``dataset=bfcl_episodes`` reads its category when ``dataset.categories`` names none)."""
    import whileai.simulations as wai

    if data.source == "sample":
        if data.sample_tasks:  # the shipped file's generator, extended: its first 400 tasks are the file's
            from whileai.kit.sample_task import generate

            rows = generate(n_tasks=data.sample_tasks)
            what = f"the kit's sample tool-use task, {data.sample_tasks} tasks generated"
        else:
            from whileai.kit import load_sample

            rows, what = load_sample(), "the kit's sample tool-use task"
    elif data.source == "jsonl":
        loaded = wai.SimulationData.load(str(data.path))
        system, tools = data.system_prompt, _read_tools(data.tools)
        if system is not None or tools is not None:
            loaded = wai.SimulationData(loaded.trajectories, system_prompt=system or loaded.system_prompt,
                                        tools=tools if tools is not None else loaded.tools, name=loaded.name)
        rows, what = loaded.rows(), str(data.path)
    elif data.source == "bfcl" and data.categories:
        from whileai.runner._bfcl_data import bfcl_folder

        folder = bfcl_folder(data)[0]
        rows, what = list(wai.datasets.from_bfcl_folder(folder, data.categories)), (
            f"BFCL {', '.join(data.categories)} ({folder})")
    elif data.source == "bfcl":
        rows, what = list(wai.datasets.from_bfcl(str(data.questions), str(data.answers))), str(data.questions)
    elif data.source == "episodes":
        from whileai.domain.episodes import kit_episode_rows, kit_tasks

        tasks = kit_tasks(data.episode_tasks)
        rows, what = kit_episode_rows(tasks), f"the kit environment's gold episodes, {len(tasks)} tasks"
    elif data.source == "bfcl_episodes":
        from whileai.runner._bfcl_data import load_bfcl_episodes

        rows, what = load_bfcl_episodes(data, environment)
    else:
        rows, what = wai.datasets.load_rows(str(data.id)), str(data.id)
    if data.tasks:
        keys = sorted({str(r.get("task_id") or r.get("prompt_hash") or i) for i, r in enumerate(rows)})
        keep = set(keys[: data.tasks])
        rows = [r for i, r in enumerate(rows) if str(r.get("task_id") or r.get("prompt_hash") or i) in keep]
    if data.grade == "first_action":
        rows = list(wai.evaluate(rows, wai.first_action_judge).rows)
    elif data.grade == "reward_model":
        rows = list(wai.evaluate(rows, wai.reward_model(str(data.reward_model))).rows)
    return rows, what


# ---------------------------------------------------------------------------
# Steps
# ---------------------------------------------------------------------------


def _balance(spec: RunSpec) -> bool:
    """The resolved ``balance`` of a method that reads it (SFT trains every row it is given: True)."""
    return spec.balance if isinstance(spec, (GRPOSpec, DPOSpec, RMSpec)) else True


def trained_rows(rows: list[dict[str, Any]], spec: RunSpec) -> list[dict[str, Any]]:
    """The rows of ``rows`` the method's job trains on: SFT every row it is given; GRPO the row each prompt
    comes from (the job's own ``mixed_rows``), so the exported file counts what the trainer gets."""
    if isinstance(spec, GRPOSpec):
        from whileai.jobs.grpo import mixed_rows

        return [row for _, row, _ in mixed_rows(rows, _balance(spec), spec.prompt_source)]
    return rows


def _export(rows: list[dict[str, Any]], spec: RunSpec, export: Export, path: Path) -> TrainingExport | PreferenceExport:
    """The artifact in the chosen format with the gates on; raises ExportValidationError when a gate refuses.

    What is exported is what the job trains on, read off the stage's resolved ``spec``: SFT's rows,
    GRPO's one row per prompt, DPO's and RM's pairs (the job's own ``preference_pairs``, with its
    ``balance``), and RM's near-miss pairs (``near_misses`` per passing row, drawn with its ``seed``
    as the job draws them). Beside it, the chat template the job renders the rows with for its
    ``base_model`` under its ``tool_format``, and a manifest naming the convention
    (``export/_template.py``); where the base's tokenizer cannot be read here (a hub base a GPU
    container fetches) the report says why instead.
    """
    report = _export_rows(rows, spec, export, path)
    if spec.base_model:
        from whileai.domain.export import write_template_files

        try:
            report.update({**write_template_files(path, spec.base_model, spec.tool_format)})
        except LookupError as exc:
            report["chat_template"] = None
            report["chat_template_why"] = str(exc)
    return report


class _ExportShape(TypedDict):
    """The spec's export settings both exporters take: the artifact's format, whether its gates run, and what the
    trained turns keep."""

    format: str
    validate: bool
    strip_think: bool
    max_tool_output_chars: int | None


def _export_rows(rows: list[dict[str, Any]], spec: RunSpec, export: Export, path: Path
                 ) -> TrainingExport | PreferenceExport:
    import whileai.simulations as wai

    path.parent.mkdir(parents=True, exist_ok=True)
    shape: _ExportShape = {"format": export.format, "validate": export.validate_, "strip_think": export.strip_think,
                           "max_tool_output_chars": export.max_tool_output_chars}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rows carry their own system prompt and tools
        if spec.method in ("dpo", "rm"):
            from whileai.jobs.dpo import preference_pairs

            pairs = preference_pairs(rows, _balance(spec))
            if isinstance(spec, RMSpec) and spec.near_misses:
                from whileai.domain.judges.judging import near_miss_pairs

                pairs += near_miss_pairs(rows, spec.near_misses, spec.seed)[0]
            return wai.export_preference(pairs, path, **shape)
        return wai.export_dataset(trained_rows(rows, spec), path, mask_mode=export.mask_mode, unroll=export.unroll,
                                  **shape)


def _short_export(report: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("output", "format", "kind", "rows_in", "rows_out", "pairs_out", "mask_mode", "unroll", "strip_think",
            "max_tool_output_chars", "roundtrip", "privileged_leaks", "argument_encoding", "tool_format",
            "chat_template", "manifest", "chat_template_why")
    return {k: report[k] for k in keep if k in report}


def _follow(run: Any, label: str, progress: Progress, expected: _estimate.Estimate | None = None) -> str:
    """Follow the run until it ends, showing its steps; Ctrl-C stops it (run.stop()) and re-raises.

    Each read is a long poll (``refresh(wait=...)``): it answers when the run's record changes, so a step or the
    end shows at once rather than at the next poll. Past ESTIMATE_OVER_FACTOR times ``expected``, it says so once."""
    bar = progress.training(label)
    said = 0  # the alarms printed so far
    began, over_said = time.monotonic(), False
    try:
        while True:
            try:
                run.refresh(wait=defaults.PROGRESS_POLL_S)
            except Exception as exc:  # a platform restarting mid-run is read again next time
                progress.line(f"  (could not read {run.id}: {exc}; retrying)")
                time.sleep(defaults.PROGRESS_POLL_S)
            bar.update(run)
            said = _say_alarms(run, said, progress)
            over = _estimate.say_over(label, expected, began, over_said)
            if over is not None:
                progress.line(over)
                over_said = True
            if run.status != "running":
                return cast(str, run.status)
    except KeyboardInterrupt:
        bar.close()
        progress.line(f"- interrupted: stopping {run.id} ...")
        run.stop()
        deadline = time.monotonic() + defaults.STOP_CONFIRM_S
        while run.status == "running" and time.monotonic() < deadline:
            time.sleep(0.2)
            run.refresh()
        progress.interrupted(run)  # tells the user what `python -m whileai resume` will do with the stopped run
        raise
    finally:
        bar.close()


def _say_alarms(run: Any, said: int, progress: Progress) -> int:
    """Print the monitor's alarms that fired since the ``said`` printed ones (``_closing.fired_lines``), the moment
    the run's record shows them; returns how many are printed now."""
    from whileai.runner._closing import fired_lines

    monitor = (run.summary or {}).get("monitor")
    alarms = monitor.get("alarms") if isinstance(monitor, dict) else None
    if not isinstance(alarms, list):
        return said
    for alarm in alarms[said:]:
        if isinstance(alarm, dict):
            progress.line("\n".join(fired_lines(alarm, str(run.id))))
    return max(said, len(alarms))


def _serve(run: Any, serve: Serve, progress: Progress) -> Served:
    """Serve the run's adapter and ask the endpoint one chat completion.

    The completion travels through the SDK's client seam (``chat_completion``), so
    it reaches a platform server when one is configured and the embedded platform
    in process otherwise, with the credential chain's key as the bearer.
    """
    import os

    import whileai.simulations as wai
    from whileai.simulations.training import chat_completion

    if serve.target == "modal":
        os.environ.setdefault("WHILEAI_SERVE_TARGET", "modal")  # the platform's serve target (docs/serving.md)
    served = wai.serve(run, serve.name)
    from whileai.kit import load_sample

    row = load_sample()[0]
    first_reply = next(i for i, m in enumerate(row["messages"]) if m["role"] == "assistant")
    ask = row["messages"][:first_reply]  # the system prompt and the user's ask of one sample task
    answer = chat_completion(served["name"], ask, tools=row.get("tools"), timeout=defaults.SERVE_CHECK_TIMEOUT_S,
                             max_tokens=defaults.SERVE_CHECK_MAX_TOKENS, temperature=0)
    message = answer["choices"][0]["message"]
    return {"name": served.get("name"), "version": served.get("version"), "endpoint": served.get("endpoint"),
            "chat": (message.get("content") or json.dumps(message.get("tool_calls")))[: defaults.SERVE_CHECK_REPLY_CHARS]}


# ---------------------------------------------------------------------------
# run_spec
# ---------------------------------------------------------------------------


class RunsFile(TypedDict):
    """The runs file a run leaves in its output folder (``RUN_FILE``): its sweep, its runs, the command line's
    overrides, and the closing summary once the run ended."""

    sweep_id: str | None
    runs: list[dict[str, str | None]]
    overrides: list[str]
    summary: NotRequired[ClosingSummary]


def _write_runs(context: Context, runs: list[RunFact], closing: ClosingSummary | None = None) -> None:
    context.output_dir.mkdir(parents=True, exist_ok=True)
    written: RunsFile = {"sweep_id": context.sweep_id, "runs": [entry.to_json() for entry in runs],
                         "overrides": context.overrides}
    if closing is not None:
        written["summary"] = closing
    (context.output_dir / defaults.RUN_FILE).write_text(json.dumps(written, indent=1, default=str) + "\n")


def run_spec(spec: RecipeSpec, context: Context, stages: list[tuple[Stage, RunSpec]] | None = None) -> int:
    """Run a validated spec; returns the exit code (see the module docstring).

    ``stages`` are its stages as the validation resolved them (``_effective.validated_stages``), each spec carried
    from there to ``wai.train``; None resolves them here.

    Steps and progress go to stderr; the closing summary (``_closing``) to stdout, as lines or,
    with ``context.json``, one JSON object, whatever way the run ended. A job of a sweep run with
    ``--json`` leaves its summary in its runs file instead: the sweep prints one object for all jobs.
    """
    from whileai.runner._closing import emit, summary

    progress = context.progress or Progress()
    facts = RunFacts(recipe=context.recipe, sweep_id=context.sweep_id, status="failed")
    try:
        code = _run(spec, context, progress, facts, stages)
    except KeyboardInterrupt:
        progress.line("- interrupted")
        code = EXIT_INTERRUPTED
        facts.status, facts.error = "interrupted", "interrupted (Ctrl-C); the hosted run was stopped"
    facts.exit_code = code
    closing = facts.closing or summary(facts)
    closing["exit_code"] = code
    _write_runs(context, facts.runs, closing)
    if not (context.json and context.sweep_id):
        emit(closing, as_json=context.json, run=facts.run)
    return code


@dataclass
class _Plan:
    """One run of the spec as it goes: where it goes, the data it cut, each stage resolved once, and the runs so far."""

    spec: RecipeSpec
    context: Context
    progress: Progress
    facts: RunFacts
    #: the runner's record each stage's run carries (``provenance.runner_record``, plus the data's cut and held-out
    #: note): JSON the platform stores as it is
    record: RunnerRecord
    #: the stages in order, each with its resolved spec (what ``wai.train`` resolves it to)
    stages: list[tuple[Stage, RunSpec]]
    train_side: Any = None
    held: Any = None
    train_rows: list[dict[str, Any]] = field(default_factory=list)
    #: the held-out side's rows, read once (the power note and each stage's estimate count its prompts)
    held_rows: list[dict[str, Any]] = field(default_factory=list)
    #: stage name -> its run (and its id, which ``stages.NAME`` references resolve to)
    runs: dict[str, TrainingRun] = field(default_factory=dict)
    run_ids: dict[str, str] = field(default_factory=dict)

    def start_of(self, stage: Stage) -> TrainingRun | None:
        """The run ``stage`` continues (init_from), None for a first stage or one that continues nothing."""
        return self.runs.get(stage.start) if stage.start is not None else None


def _say_smoke(data: Dataset, progress: Progress) -> None:
    from whileai.runner._bfcl_data import smoke_note

    note = smoke_note(data)
    if note:
        progress.line(note)


def _resolved_stages(spec: RecipeSpec, origin: Callable[[str], str] | None) -> list[tuple[Stage, RunSpec]]:
    """Each stage with its resolved spec, by the resolution ``validate`` checks, for a caller that hands over none
    (a refusal here is a spec that skipped validation)."""
    stages, problems = stage_specs(resolve_stages(spec, origin))
    if problems:
        raise ValueError("; ".join(str(p) for p in problems))
    return stages


def _run(spec: RecipeSpec, context: Context, progress: Progress, facts: RunFacts,
         stages: list[tuple[Stage, RunSpec]] | None) -> int:
    plan = _Plan(spec, context, progress, facts, runner_record(spec.plain(), context),
                 stages if stages is not None else _resolved_stages(spec, context.origin))
    _say_smoke(spec.dataset, progress)  # first: a run on the committed BFCL sample measures nothing
    progress.line(f"whileai run {context.recipe or '(no recipe)'}: {spec.method}"
                  + (f" after {', '.join(spec.stages)}" if spec.stages else "")
                  + f", output {context.output_dir}")
    _load_push_cut(plan)
    _import_gguf_bases(plan)
    last_stage, last_spec = plan.stages[-1]
    plan.record = updated(plan.record, held_out=_say_power(plan, last_spec))
    for index, (stage, resolved) in enumerate(plan.stages):
        code = _run_stage(plan, index, stage, resolved)
        if code is not None:
            return code
    # the last stage's start (the run it continued, init_from) is what stage_gain_min compares against
    return _finish(plan, plan.runs[last_stage.name], plan.start_of(last_stage))


def _load_push_cut(plan: _Plan) -> None:
    """Load and grade the dataset, push it, and cut it by task into the train side and the held-out set."""
    import whileai.simulations as wai

    progress, data, facts = plan.progress, plan.spec.dataset, plan.facts
    with progress.step("load and grade the dataset") as note:
        read = plan.context.rows  # read to resolve a stage (runner/_rundata.py): timed there
        rows, what = (read.rows, read.what) if read is not None else load_rows(data, plan.spec.environment)
        note["result"] = (f"{len(rows)} rows of {what}, graded by {data.grade}"
                          + (" (read while the stages were resolved)" if read is not None else ""))
    with progress.step("push") as note:
        pushed = wai.push(rows, name=plan.spec.name or "dataset")
        plan.record = updated(plan.record, dataset=PushedNote(id=pushed.id, content_hash=pushed.content_hash,
                                                              rows=pushed.rows))
        note["result"] = f"{pushed.id} ({pushed.rows} rows, content {str(pushed.content_hash)[: defaults.HASH_SHOWN_CHARS]})"
        facts.datasets["pushed"] = pushed.id
    with progress.step("cut by task") as note:
        # from the rows in hand, under the pushed dataset's name: the sides cut(pushed) makes (pushing equal rows
        # answers the same ids), without reading the pushed rows or the train side back
        own = own_split(data, rows)
        sides = wai.datasets.cut_rows(rows, data.holdout, data.cut_seed, pushed.name or plan.spec.name or "dataset",
                                      held_out=own, sides=read.sides if read is not None else None)
        plan.train_side, plan.held, plan.train_rows = sides.train, sides.holdout, sides.train_rows
        # the run's record says how many held-out tasks moved because training asks the same prompt
        cut = CutNote(moved_to_train={k: sides.moved[k] for k in ("tasks", "rows")},
                      moved_task_ids=sides.moved["task_ids"][: defaults.CUT_MOVED_RECORDED])
        plan.record = updated(plan.record, cut=cut)
        moved = wai.datasets.moved_text(sides.moved)
        note["result"] = (f"train {plan.train_side.id} ({plan.train_side.rows} rows), "
                          f"holdout {plan.held.id} ({plan.held.rows} rows)" + (f"; {moved}" if moved else "")
                          + ("; BFCL's own split by scenario (BFCL_MULTI_TURN_HOLDOUT)" if own is not None else ""))
        facts.datasets.update(train=plan.train_side.id, holdout=plan.held.id)


def own_split(data: Dataset, rows: list[dict[str, Any]]) -> list[bool] | None:
    """A dataset's own held-out side, row by row, where it fixes one (BFCL's multi-turn scenarios, so a held-out
    entry never trains in any category); None where the cut draws ``dataset.holdout`` of the tasks."""
    if data.source != "bfcl_episodes":
        return None
    from whileai.domain.episodes.bfcl_rows import held_out_flags

    return held_out_flags(rows)


def _import_gguf_bases(plan: _Plan) -> None:
    """A GGUF base this data root has not imported yet is imported here, as its own step with its own line (once per
    file: it dequantises every tensor), not inside the training set's step that first reads its tokenizer."""
    from whileai.kit import gguf_imported, import_gguf, is_gguf_base

    for name in dict.fromkeys(str(resolved.base_model) for _, resolved in plan.stages if resolved.base_model):
        if is_gguf_base(name) and not gguf_imported(name):
            with plan.progress.step(f"import the GGUF base {name} (once per data root)") as note:
                note["result"] = f"a transformers folder in {import_gguf(name)}"


def _say_power(plan: _Plan, last: RunSpec) -> HeldOutNote:
    """Before anything trains, what the held-out prompts the last stage measures can show (``_power``), so a
    spec whose expect asks for significance on too few prompts hears so before its first step."""
    import whileai.simulations as wai

    from whileai.runner._power import power_note

    plan.held_rows = wai.datasets.load_rows(plan.held)
    text, warning = power_note(plan.held_rows, last, plan.spec.expect.holdout_gain_significant, plan.spec.dataset)
    plan.progress.line(f"- held-out: {text}" + (f"\n  warning: {warning}" if warning else ""))
    return {"note": text, "warning": warning}


def _run_stage(plan: _Plan, index: int, stage: Stage, resolved: RunSpec) -> int | None:
    """One stage: its training set and selection report, the export with gates, ``wai.train``, then following
    the run to its end. Returns the exit code when the run stops here, None when the next stage goes on."""
    import whileai.simulations as wai

    label = f"{stage.name} ({stage.method})" if len(plan.stages) > 1 else stage.method
    train_set, used_rows = _training_set(plan, stage, label, resolved)
    try:
        export_report = _export_step(plan, stage, label, used_rows, resolved)
    except wai.ExportValidationError as exc:
        return _refused(plan, "export gate", "an export gate", exc)
    try:
        run = _train_step(plan, index, stage, label, train_set, export_report, resolved)
    except wai.TrainingSelectionError as exc:  # the data cannot teach the method (the gate refuses before it warns)
        return _refused(plan, "the selection gate", "the selection gate", exc)
    if index == 0:
        _say_base_build(resolved, plan.progress)
    if stage.last and plan.spec.target.name == "modal" and plan.context.sweep_id is not None:
        plan.progress.line(f"- submitted {run.id} (sweep {plan.context.sweep_id}); follow it with "
                           f"`python -m whileai wait {plan.context.sweep_id}`")
        plan.facts.status = "submitted"
        return 0
    prompts, expected = _say_estimate(plan, label, resolved)
    code = _follow_to_end(plan, run, label, expected)
    if code is None and prompts is not None:  # times kept only with the prompt count the next estimate uses
        _estimate.record(resolved, run.training or {}, prompts)
    return code


def _say_estimate(plan: _Plan, label: str, resolved: RunSpec) -> tuple[int | None, _estimate.Estimate | None]:
    """Before a stage that will take over ESTIMATE_SAY_S, about how long, from this data root's earlier stages;
    returns the held-out prompts counted (None where counting failed) and the estimate (None where there is none)."""
    from whileai.runner._power import heldout_prompts

    try:
        prompts = heldout_prompts(plan.held_rows, getattr(resolved, "holdout_rows", None))
        expected = _estimate.estimate(resolved, prompts)
    except Exception:  # an estimate is a courtesy: nothing about it may stop the run
        return None, None
    if expected is not None and expected.seconds >= defaults.ESTIMATE_SAY_S:
        plan.progress.line(expected.line(label))
    return prompts, expected


def _training_set(plan: _Plan, stage: Stage, label: str, resolved: RunSpec) -> tuple[Any, list[dict[str, Any]]]:
    """The set the stage trains on (SFT: the passing rows, pushed; the rest: the train side) and its rows, with
    the selection report the base's tokenizer counts (the rows longer than its context, as wai.train will)."""
    import whileai.simulations as wai

    with plan.progress.step(f"{label}: training set, profile and selection report") as note:
        pool, share = _stage_tasks(plan, stage)
        suffix = f":tasks{share}" if share else ""
        if stage.method == "sft":
            used_rows = [r for r in pool if r.get("passed")]
            if is_quick():  # the rows 4 capped steps reach, not all of them tokenized and checked (quick.sft_rows)
                used_rows = sft_rows(used_rows, getattr(resolved, "batch_size", None), resolved.seed)
            train_set = wai.push(used_rows, name=f"{plan.spec.name or 'dataset'}:train{suffix}:passes")
        elif stage.tasks is not None:
            train_set, used_rows = wai.push(pool, name=f"{plan.spec.name or 'dataset'}:train{suffix}"), pool
        else:
            train_set, used_rows = plan.train_side, plan.train_rows
        # the knobs and the environment, as wai.train's own gate reads them
        report = wai.selection_report(train_set, stage.method, base_model=resolved.base_model,
                                      config={**resolved.knobs(), "environment": getattr(resolved, "environment", None)})
        fresh = train_set.id != plan.train_side.id
        if fresh:
            plan.facts.datasets[f"{stage.name}:{stage.method}"] = train_set.id
        shared = f" (train_tasks {share} of the train side's tasks)" if share else ""
        note["result"] = (f"{train_set.id}{shared}; " if fresh else "") + (
            report.get("summary") or f"{report.get('rows')} of {report.get('rows_given')} rows") + _filter_clause(resolved, report.get("prompts"))
    return train_set, used_rows


def _filter_clause(resolved: RunSpec, prompts: object = None) -> str:
    """What the job does to the selected prompts before GRPO sees them, said where it does something: with
    ``prompt_filter_pool`` it plays a pool of them (all ``prompts``, the count selected, where that is fewer) and keeps
    those whose start episodes were paid differently (how many, the job says in its summary's ``start_filter``); ""
    otherwise."""
    if not isinstance(resolved, GRPOSpec) or resolved.prompt_filter_pool is None:
        return ""
    pool = min(resolved.prompt_filter_pool, prompts) if isinstance(prompts, int) else resolved.prompt_filter_pool
    return (f"; the job then plays {pool} of these prompts {resolved.generations} times each "
            "from the start and trains on those whose episodes were paid differently (prompt_filter_pool; the "
            "number kept is in the run's start_filter)")


def _stage_tasks(plan: _Plan, stage: Stage) -> tuple[list[dict[str, Any]], str]:
    """The train side's rows of the stage's ``train_tasks`` share (all of them when it has none), and the share's
    label (``0-0.5``, or "")."""
    import whileai.simulations as wai

    if stage.tasks is None:
        return plan.train_rows, ""
    label, seed, read = f"{stage.tasks[0]:g}-{stage.tasks[1]:g}", plan.spec.dataset.cut_seed, plan.context.rows
    if read is not None:  # the rows the stages were resolved from: their share is drawn already (the same train side)
        return read.share(stage.tasks, seed), label
    return [plan.train_rows[i] for i in wai.datasets.task_share(plan.train_rows, stage.tasks, seed)], label


def _export_step(plan: _Plan, stage: Stage, label: str, used_rows: list[dict[str, Any]],
                 resolved: RunSpec) -> TrainingExport | PreferenceExport:
    """The stage's export with its gates, beside the run (raises ExportValidationError when a gate refuses)."""
    export_path = plan.context.output_dir / "export" / f"{stage.name}.{plan.spec.export.format}.jsonl"
    with plan.progress.step(f"{label}: export with gates") as note:
        report = _export(used_rows, resolved, plan.spec.export, export_path)
        note["result"] = f"{export_path} ({_exported(report)})"
    return report


def _train_step(plan: _Plan, index: int, stage: Stage, label: str, train_set: Any,
                export_report: TrainingExport | PreferenceExport,
                resolved: RunSpec) -> Any:
    """``wai.train`` for the stage, its warnings shown, and the run recorded (raises TrainingSelectionError).

    The stage's resolved spec goes to ``wai.train`` as it is; what only this run knows goes beside it: the held-out
    set, the run it continues, the runs a ``stages.NAME`` setting names, and the runner's record. ``wai.train``
    reads the dataset for what it decides (GRPO's group size and temperature, where the spec leaves them). A stage
    that continues no run and names none is sent as it is, validated once (``simulations/_sent.py``)."""
    import whileai.simulations as wai

    spec, start = plan.spec, plan.start_of(stage)
    # quick: the note as this stage's rows left it (quick.sft_rows counts an SFT stage's rows into it)
    stage_record = updated(plan.record, stage=stage.name, stage_index=index, stages=[s.name for s, _ in plan.stages],
                           previous_run=start.id if start is not None else None, export=_short_export(export_report),
                           quick=quick_note())
    with plan.progress.step(f"{label}: wai.train on {spec.target.name}") as note:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            run = wai.train(
                train_set, spec=resolved, holdout=plan.held, check=stage_check(stage, spec),
                target=spec.target.name, init_from=start, runner=stage_record,
                name=run_label(plan.context, stage.name, stage.method, stage.last, set(stage.from_spec)),
                **stage_refs(resolved, plan.run_ids),
            )
        for warning in said:
            plan.progress.line(f"  warning: {warning.message}")
        run.note(export=_short_export(export_report))
        note["result"] = f"{run.id} \"{run.name}\" {run.url}"
    plan.facts.runs.append(RunFact(id=run.id, stage=stage.name, method=stage.method, name=run.name))
    plan.run_ids[stage.name] = run.id
    plan.runs[stage.name] = run
    plan.facts.run = run
    _write_runs(plan.context, plan.facts.runs)
    return run


def _refused(plan: _Plan, said: str, recorded: str, exc: Exception) -> int:
    """A gate refused the stage's data: say so (``said``), record why (``recorded``), end the run with EXIT_GATE."""
    plan.progress.line(f"- {said} refused the data; nothing was trained:\n{exc}")
    plan.facts.status, plan.facts.error = "refused", f"{recorded} refused the data: {str(exc).splitlines()[0]}"
    return EXIT_GATE


def _follow_to_end(plan: _Plan, run: Any, label: str, expected: _estimate.Estimate | None = None) -> int | None:
    """Follow the stage's run to its end: EXIT_FAILED when it did not end done, else None (the held-out line said)."""
    status = _follow(run, label, plan.progress, expected)
    if status != "done":
        first = (run.error or "").splitlines()[0] if run.error else None
        plan.progress.line(f"- {run.id} ended {status}: {first or ''}")
        plan.facts.status, plan.facts.error = status, first
        return EXIT_FAILED
    training = run.training or {}
    plan.progress.line(f"- {label}: held-out {training.get('metric') or 'pass_rate'} "
                       f"{describe(training.get('before'), training.get('after'), training.get('stats'))}")
    for line in group_lines(training.get("by_group")):  # per category, where the rows name one
        plan.progress.line(f"  {line}")
    return None


def _exported(report: Mapping[str, Any]) -> str:
    said = f"{report['pairs_out']} pairs" if "pairs_out" in report else f"{report.get('rows_out')} rows"
    used = (report.get("tool_format") or {}).get("used")
    if report.get("chat_template") and report.get("rows_in") and report.get("rows_without_tools") == report["rows_in"]:
        said += "; no row has tools, so none are rendered; its chat template and manifest beside it"
    elif report.get("chat_template") and used:
        convention = "hermes" if used == "hermes" else "base template's own"
        said += f"; tools in the {convention} convention, its chat template and manifest beside it"
    return said


def _say_base_build(first: RunSpec, progress: Progress) -> None:
    """When the first job pre-trains the kit's base (a base the package does not ship), say so, and how long."""
    from whileai.kit import demo_base_trains
    from whileai.kit.defaults import DEMO_BASE_BUILD_S
    from whileai.kit import defaults as kit_defaults

    if first.base_model == kit_defaults.KIT_BASE_NAME and demo_base_trains():
        progress.line(f"- first run on this data root: the job builds the kit's base first (once per data root, "
                      f"about {DEMO_BASE_BUILD_S} s on a laptop CPU); later runs load it at once")


def _finish(plan: _Plan, run: Any, previous: Any) -> int:
    import whileai.simulations as wai

    from whileai.runner._closing import summary

    spec, progress = plan.spec, plan.progress
    if spec.dataset.after:
        with progress.step("delta_report (held-out rollouts before vs after)") as note:
            after_rows = wai.SimulationData.load(spec.dataset.after).rows()
            report = wai.attach_delta(run, wai.datasets.load_rows(plan.held), after_rows)
            run.refresh()
            note["result"] = f"verdict {report.get('verdict')}: {report.get('reason')}"
    served = None
    if spec.serve.target != "none":
        with progress.step(f"serve on {spec.serve.target}") as note:
            served = _serve(run, spec.serve, progress)
            note["result"] = f"{served['name']} v{served['version']} at {served['endpoint']}; reply: {served['chat']}"
    outcome, checked = settle(run, previous, spec.expect.model_dump(), plan.context.expect_lines, plan.context.recipe)
    plan.facts.status = run.status
    plan.facts.closing = summary(plan.facts, run, outcome, served, checked)
    return 0 if checked["passed"] else EXIT_EXPECT
