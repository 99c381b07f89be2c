"""A validated spec turned into library calls, in order, each visible in the output.

    load and grade the dataset -> push -> cut by task -> per stage: the set it trains on, profile and
    selection report -> export with gates (the file beside the run) -> wai.train on the target ->
    follow it (held-out before and after are measured by the job) -> delta_report when there are
    after-rollouts -> serve and one chat completion -> the expect checks

Every step is a public name of ``whileai.simulations``; the spec arrives as a
plain dict (``cli`` resolved and validated it) and leaves as keyword arguments.
Exit codes: 0 done, 1 a run failed, 3 an expect line failed, 4 an export gate
or the selection gate refused the data, 130 interrupted (the hosted run is
stopped first).
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from whileai.core.stats import describe, group_lines

from . import defaults
from ._progress import Progress
from .expect import settle
from .provenance import runner_record
from .stages import plan_stages, stage_inputs

__all__ = ["Context", "run_spec", "EXIT_FAILED", "EXIT_EXPECT", "EXIT_GATE", "EXIT_INTERRUPTED"]

EXIT_FAILED, EXIT_EXPECT, EXIT_GATE, EXIT_INTERRUPTED = 1, 3, 4, 130


@dataclass
class Context:
    """Where a spec came from and where its files go (filled by the CLI, ``reproduce`` or a test)."""

    recipe: str | None
    overrides: list[str]
    choices: dict[str, Any]
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


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------


def _read_tools(value: Any) -> Any:
    if isinstance(value, str):
        with open(value, encoding="utf-8") as f:
            return json.load(f)
    return value


def load_rows(data: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """The dataset's rows, graded as ``data["grade"]`` says, and a one-line description."""
    import whileai.simulations as wai

    if data["source"] == "sample":
        if data.get("sample_tasks"):  # the shipped file's generator, extended: its first 400 tasks are the file's
            from whileai.kit.sample_task import generate

            rows = generate(n_tasks=int(data["sample_tasks"]))
            what = f"the kit's sample tool-use task, {data['sample_tasks']} tasks generated"
        else:
            from whileai.kit import load_sample

            rows, what = load_sample(), "the kit's sample tool-use task"
    elif data["source"] == "jsonl":
        loaded = wai.SimulationData.load(data["path"])
        system, tools = data.get("system_prompt"), _read_tools(data.get("tools"))
        if system is not None or tools is not None:
            loaded = wai.SimulationData(loaded.trajectories, system_prompt=system or loaded.system_prompt,
                                        tools=tools if tools is not None else loaded.tools, name=loaded.name)
        rows, what = loaded.rows(), data["path"]
    elif data["source"] == "bfcl" and data.get("categories"):
        from ._bfcl_data import bfcl_folder

        folder = bfcl_folder(data)[0]
        rows, what = list(wai.datasets.from_bfcl_folder(folder, data["categories"])), (
            f"BFCL {', '.join(data['categories'])} ({folder})")
    elif data["source"] == "bfcl":
        rows, what = list(wai.datasets.from_bfcl(data["questions"], data["answers"])), data["questions"]
    else:
        rows, what = wai.datasets.load_rows(data["id"]), data["id"]
    if data.get("tasks"):
        keys = sorted({str(r.get("task_id") or r.get("prompt_hash") or i) for i, r in enumerate(rows)})
        keep = set(keys[: int(data["tasks"])])
        rows = [r for i, r in enumerate(rows) if str(r.get("task_id") or r.get("prompt_hash") or i) in keep]
    if data["grade"] == "first_action":
        rows = list(wai.evaluate(rows, wai.first_action_judge).rows)
    elif data["grade"] == "reward_model":
        rows = list(wai.evaluate(rows, wai.reward_model(data["reward_model"])).rows)
    return rows, what


# ---------------------------------------------------------------------------
# Steps
# ---------------------------------------------------------------------------


def trained_rows(rows: list[dict[str, Any]], method: str, balance: bool | None) -> list[dict[str, Any]]:
    """The rows of ``rows`` the method's job trains on: SFT every row it is given; GRPO the row each prompt
    comes from (the job's own ``mixed_rows``), so the exported file counts what the trainer gets."""
    if method == "grpo":
        from whileai.jobs.grpo import mixed_rows

        return [row for _, row, _ in mixed_rows(rows, True if balance is None else bool(balance))]
    return rows


def _export(rows: list[dict[str, Any]], method: str, export: dict[str, Any], path: Path,
            balance: bool | None = None, near_misses: int = 0, seed: int = 0,
            base_model: str | None = None, tool_format: str | None = None) -> dict[str, Any]:
    """The artifact in the chosen format with the gates on; raises ExportValidationError when a gate refuses.

    What is exported is what the job trains on: SFT's rows, GRPO's one row per prompt, DPO's and RM's
    pairs (the job's own ``preference_pairs``, ``balance`` as the run gives it), and RM's near-miss
    pairs (``near_misses`` per passing row, drawn with the run's ``seed`` as the job draws them).
    Beside it, the chat template the job renders the rows with for ``base_model`` under the run's
    ``tool_format``, and a manifest naming the convention (``export/_template.py``); where the base's
    tokenizer cannot be read here (a hub base a GPU container fetches) the report says why instead.
    """
    report = _export_rows(rows, method, export, path, balance, near_misses, seed)
    if base_model:
        from whileai.simulations.export import write_template_files

        try:
            report.update(write_template_files(path, base_model, tool_format))
        except LookupError as exc:
            report["chat_template"] = None
            report["chat_template_why"] = str(exc)
    return report


def _export_rows(rows: list[dict[str, Any]], method: str, export: dict[str, Any], path: Path,
                 balance: bool | None, near_misses: int, seed: int) -> dict[str, Any]:
    import whileai.simulations as wai

    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rows carry their own system prompt and tools
        if method in ("dpo", "rm"):
            from whileai.jobs.dpo import preference_pairs

            pairs = preference_pairs(rows, True if balance is None else bool(balance))
            if method == "rm" and near_misses:
                from whileai.simulations.judges import near_miss_pairs

                pairs += near_miss_pairs(rows, near_misses, seed)[0]
            return wai.export_preference(pairs, path, format=export["format"], validate=export["validate"],
                                         strip_think=export["strip_think"],
                                         max_tool_output_chars=export["max_tool_output_chars"])
        return wai.export_dataset(trained_rows(rows, method, balance), path, format=export["format"],
                                  validate=export["validate"], mask_mode=export["mask_mode"], unroll=export["unroll"],
                                  strip_think=export["strip_think"],
                                  max_tool_output_chars=export["max_tool_output_chars"])


def _short_export(report: dict[str, Any]) -> dict[str, Any]:
    keep = ("output", "format", "kind", "rows_in", "rows_out", "pairs_out", "mask_mode", "unroll", "strip_think",
            "max_tool_output_chars", "roundtrip", "privileged_leaks", "argument_encoding", "tool_format",
            "chat_template", "manifest", "chat_template_why")
    return {k: report[k] for k in keep if k in report}


def _follow(run: Any, label: str, progress: Progress) -> str:
    """Poll the run until it ends, showing its steps; Ctrl-C stops it (run.stop()) and re-raises."""
    bar = progress.training(label)
    try:
        while True:
            try:
                run.refresh()
            except Exception as exc:  # a platform restarting mid-run is read again next time
                progress.line(f"  (could not read {run.id}: {exc}; retrying)")
            bar.update(run)
            if run.status != "running":
                return cast(str, run.status)
            time.sleep(defaults.PROGRESS_POLL_S)
    except KeyboardInterrupt:
        bar.close()
        progress.line(f"- interrupted: stopping {run.id} ...")
        run.stop()
        deadline = time.monotonic() + defaults.STOP_CONFIRM_S
        while run.status == "running" and time.monotonic() < deadline:
            time.sleep(0.2)
            run.refresh()
        progress.interrupted(run)  # hook: whileai/runner/_progress.py says what resume will do
        raise
    finally:
        bar.close()


def _serve(run: Any, serve: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Serve the run's adapter and ask the endpoint one chat completion.

    The completion travels through the SDK's client seam (``chat_completion``), so
    it reaches a platform server when one is configured and the embedded platform
    in process otherwise, with the credential chain's key as the bearer.
    """
    import os

    import whileai.simulations as wai
    from whileai.simulations.training import chat_completion

    if serve["target"] == "modal":
        os.environ.setdefault("WHILEAI_SERVE_TARGET", "modal")  # the platform's serve target (docs/serving.md)
    served = wai.serve(run, serve["name"])
    out = {"name": served.get("name"), "version": served.get("version"), "endpoint": served.get("endpoint")}
    from whileai.kit import load_sample

    row = load_sample()[0]
    first_reply = next(i for i, m in enumerate(row["messages"]) if m["role"] == "assistant")
    ask = row["messages"][:first_reply]  # the system prompt and the user's ask of one sample task
    answer = chat_completion(served["name"], ask, tools=row.get("tools"), timeout=defaults.SERVE_CHECK_TIMEOUT_S,
                             max_tokens=defaults.SERVE_CHECK_MAX_TOKENS, temperature=0)
    message = answer["choices"][0]["message"]
    out["chat"] = (message.get("content") or json.dumps(message.get("tool_calls")))[: defaults.SERVE_CHECK_REPLY_CHARS]
    return out


# ---------------------------------------------------------------------------
# run_spec
# ---------------------------------------------------------------------------


def _write_runs(context: Context, runs: list[dict[str, Any]], closing: dict[str, Any] | None = None) -> None:
    context.output_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Any] = {"sweep_id": context.sweep_id, "runs": runs, "overrides": context.overrides}
    if closing is not None:
        written["summary"] = closing
    (context.output_dir / defaults.RUN_FILE).write_text(json.dumps(written, indent=1, default=str) + "\n")


def run_spec(spec: dict[str, Any], context: Context) -> int:
    """Run a validated spec; returns the exit code (see the module docstring).

    Steps and progress go to stderr; the closing summary (``_closing``) to stdout, as lines or,
    with ``context.json``, one JSON object, whatever way the run ended. A job of a sweep run with
    ``--json`` leaves its summary in its runs file instead: the sweep prints one object for all jobs.
    """
    from ._closing import emit, summary

    progress = context.progress or Progress()
    facts: dict[str, Any] = {"recipe": context.recipe, "sweep_id": context.sweep_id, "runs": [], "datasets": {},
                             "status": "failed"}
    try:
        code = _run(spec, context, progress, facts)
    except KeyboardInterrupt:
        progress.line("- interrupted")
        code = EXIT_INTERRUPTED
        facts.update(status="interrupted", error="interrupted (Ctrl-C); the hosted run was stopped")
    facts["exit_code"] = code
    closing = facts.get("closing") or summary(facts)
    closing["exit_code"] = code
    _write_runs(context, facts["runs"], closing)
    if not (context.json and context.sweep_id):
        emit(closing, as_json=context.json, run=facts.get("run"))
    return code


def run_label(context: Context, stage_name: str, method: str, last: bool) -> str:
    """What a run is, as its title: ``grpo_tooluse · grpo · beta=0.04 seed=1`` (recipe, stage, method, knobs).

    An earlier stage says so (``grpo_tooluse · sft stage``); the knobs are a sweep's swept ones (each
    job's own values, so names differ within a sweep), else the knobs typed on the command line, and of
    those only the ones this stage's method reads (an SFT stage is not named ``beta=0.04``).
    """
    from whileai.core.spec import SPEC_MODELS, knob_fields

    parts = [context.recipe or "no recipe"]
    if last:
        parts.append(method)
    else:
        parts.append(f"{stage_name} stage" + (f" · {method}" if stage_name != method else ""))
    every = {name for model in SPEC_MODELS.values() for name in knob_fields(model)}
    reads = set(knob_fields(SPEC_MODELS[method])) if method in SPEC_MODELS else every
    words = [w for w in context.label if w.split("=", 1)[0].lstrip("+~") not in every - reads]
    if words:
        parts.append(" ".join(words))
    return " · ".join(parts)


def _say_power(held_rows: list[dict[str, Any]], spec: dict[str, Any], progress: Progress) -> dict[str, Any]:  # hook (issue 29)
    from ._power import power_note

    text, warning = power_note(held_rows, spec)
    progress.line(f"- held-out: {text}" + (f"\n  warning: {warning}" if warning else ""))
    return {"note": text, "warning": warning}


def _say_smoke(data: dict[str, Any], progress: Progress) -> None:
    from ._bfcl_data import smoke_note

    note = smoke_note(data)
    if note:
        progress.line(note)


def _run(spec: dict[str, Any], context: Context, progress: Progress, facts: dict[str, Any]) -> int:
    import whileai.simulations as wai

    record = runner_record(spec, context)
    data = spec["dataset"]
    _say_smoke(data, progress)  # first: a run on the committed BFCL sample measures nothing
    progress.line(f"whileai run {context.recipe or '(no recipe)'}: {spec['method']}"
                  + (f" after {', '.join(spec['stages'])}" if spec.get("stages") else "")
                  + f", output {context.output_dir}")
    with progress.step("load and grade the dataset") as note:
        rows, what = load_rows(data)
        note["result"] = f"{len(rows)} rows of {what}, graded by {data['grade']}"
    with progress.step("push") as note:
        pushed = wai.push(rows, name=spec.get("name") or "dataset")
        record["dataset"] = {"id": pushed.id, "content_hash": pushed.content_hash, "rows": pushed.rows}
        note["result"] = f"{pushed.id} ({pushed.rows} rows, content {str(pushed.content_hash)[: defaults.HASH_SHOWN_CHARS]})"
        facts["datasets"]["pushed"] = pushed.id
    with progress.step("cut by task") as note:
        train_side, held = wai.datasets.cut(pushed, holdout=data["holdout"], seed=data["cut_seed"])
        note["result"] = f"train {train_side.id} ({train_side.rows} rows), holdout {held.id} ({held.rows} rows)"
        facts["datasets"].update(train=train_side.id, holdout=held.id)
    record["held_out"] = _say_power(wai.datasets.load_rows(held), spec, progress)  # hook (issue 29): whileai/runner/_power.py
    train_rows = wai.datasets.load_rows(train_side)
    runs: list[dict[str, Any]] = facts["runs"]
    stage_runs: dict[str, str] = {}
    by_stage: dict[str, Any] = {}
    run: Any = None
    start: Any = None  # the run the current stage continues (init_from), None for a first stage or an rm
    stages = plan_stages(spec)
    submit_only = spec["target"]["name"] == "modal" and context.sweep_id is not None
    for index, stage in enumerate(stages):
        stage_name, method, last = stage.name, stage.method, stage.last
        label = f"{stage_name} ({method})" if len(stages) > 1 else method
        with progress.step(f"{label}: training set, profile and selection report") as note:
            if method == "sft":
                passes = [r for r in train_rows if r.get("passed")]
                train_set = wai.push(passes, name=f"{spec.get('name') or 'dataset'}:train:passes")
                used_rows = passes
            else:
                train_set, used_rows = train_side, train_rows
            kwargs, config = stage_inputs(stage, spec, stage_runs, context.origin)
            # the base's tokenizer counts the rows longer than its context, as wai.train will (a stage after
            # another trains that one's base; a reward model always starts from its own)
            start = by_stage.get(stage.start) if stage.start is not None else None
            inherited: str | None = start.config.get("base_model") if start is not None else None
            base: str = inherited or stage.settings.get("base_model") or wai.defaults.KIT_BASE_NAME
            report = wai.selection_report(train_set, method, base_model=base,
                                          config={**kwargs, **{k: v for k, v in config.items() if k != "provenance"}})
            if train_set.id != train_side.id:
                facts["datasets"][f"{stage_name}:{method}"] = train_set.id
            note["result"] = (f"{train_set.id}; " if train_set.id != train_side.id else "") + (
                report.get("summary") or f"{report.get('rows')} of {report.get('rows_given')} rows")
        export_path = context.output_dir / "export" / f"{stage_name}.{spec['export']['format']}.jsonl"
        try:
            with progress.step(f"{label}: export with gates") as note:
                export_report = _export(used_rows, method, spec["export"], export_path, stage.settings.get("balance"),
                                        int(stage.settings.get("near_misses") or 0), int(kwargs.get("seed") or 0),
                                        base, {**kwargs, **config}.get("tool_format"))
                note["result"] = f"{export_path} ({_exported(export_report)})"
        except wai.ExportValidationError as exc:
            progress.line(f"- export gate refused the data; nothing was trained:\n{exc}")
            facts.update(status="refused", error=f"an export gate refused the data: {str(exc).splitlines()[0]}")
            return EXIT_GATE
        # a reward model scores rows, it is no policy: it trains from the base and no stage continues it (plan_stages)
        stage_record = {**record, "stage": stage_name, "stage_index": index, "stages": [s.name for s in stages],
                        "previous_run": start.id if start is not None else None,
                        "export": _short_export(export_report)}
        try:
            with progress.step(f"{label}: wai.train on {spec['target']['name']}") as note:
                with warnings.catch_warnings(record=True) as said:
                    warnings.simplefilter("always")
                    run = wai.train(
                        train_set, method=method, holdout=held,
                        base_model=None if start is not None else stage.settings.get("base_model"),
                        check=stage.settings.get("check") or spec["check"], target=spec["target"]["name"],
                        init_from=start, config={**config, "runner": stage_record},
                        name=run_label(context, stage_name, method, last), **kwargs,
                    )
                for warning in said:
                    progress.line(f"  warning: {warning.message}")
                run.note(export=_short_export(export_report))
                note["result"] = f"{run.id} \"{run.name}\" {run.url}"
        except wai.TrainingSelectionError as exc:  # the data cannot teach the method (the gate refuses before it warns)
            progress.line(f"- the selection gate refused the data; nothing was trained:\n{exc}")
            facts.update(status="refused", error=f"the selection gate refused the data: {str(exc).splitlines()[0]}")
            return EXIT_GATE
        runs.append({"id": run.id, "stage": stage_name, "method": method, "name": run.name})
        stage_runs[stage_name] = run.id
        by_stage[stage_name] = run
        facts["run"] = run
        _write_runs(context, runs)
        if index == 0:
            _say_base_build(stage.settings, progress)
        if submit_only and last:
            progress.line(f"- submitted {run.id} (sweep {context.sweep_id}); follow it with "
                          f"`python -m whileai wait {context.sweep_id}`")
            facts["status"] = "submitted"
            return 0
        status = _follow(run, label, progress)
        if status != "done":
            progress.line(f"- {run.id} ended {status}: {(run.error or '').splitlines()[0] if run.error else ''}")
            facts.update(status=status, error=(run.error or "").splitlines()[0] if run.error else None)
            return EXIT_FAILED
        training = run.training or {}
        progress.line(f"- {label}: held-out {training.get('metric') or 'pass_rate'} "
                      f"{describe(training.get('before'), training.get('after'), training.get('stats'))}")
        for line in group_lines(training.get("by_group")):  # per category, where the rows name one
            progress.line(f"  {line}")
    # the last stage's start (the run it continued, init_from) is what stage_gain_min compares against
    return _finish(spec, context, progress, run, start, held, facts)


def _exported(report: dict[str, Any]) -> str:
    said = f"{report['pairs_out']} pairs" if "pairs_out" in report else f"{report.get('rows_out')} rows"
    used = (report.get("tool_format") or {}).get("used")
    if report.get("chat_template") and report.get("rows_in") and report.get("rows_without_tools") == report["rows_in"]:
        said += "; no row has tools, so none are rendered; its chat template and manifest beside it"
    elif report.get("chat_template") and used:
        convention = "hermes" if used == "hermes" else "base template's own"
        said += f"; tools in the {convention} convention, its chat template and manifest beside it"
    return said


def _say_base_build(stage: dict[str, Any], progress: Progress) -> None:
    """On a data root without the kit's base, say once that the first job builds it, and how long that takes."""
    from whileai.kit import demo_base_built
    from whileai.kit.defaults import DEMO_BASE_BUILD_S
    from whileai.simulations import defaults as sdk

    if (stage.get("base_model") or sdk.KIT_BASE_NAME) == sdk.KIT_BASE_NAME and not demo_base_built():
        progress.line(f"- first run on this data root: the job builds the kit's base first (once per data root, "
                      f"about {DEMO_BASE_BUILD_S} s on a laptop CPU); later runs load it at once")


def _finish(spec: dict[str, Any], context: Context, progress: Progress, run: Any, previous: Any, held: Any,
            facts: dict[str, Any]) -> int:
    import whileai.simulations as wai

    from ._closing import summary

    if spec["dataset"].get("after"):
        with progress.step("delta_report (held-out rollouts before vs after)") as note:
            after_rows = wai.SimulationData.load(spec["dataset"]["after"]).rows()
            report = wai.attach_delta(run, wai.datasets.load_rows(held), after_rows)
            run.refresh()
            note["result"] = f"verdict {report.get('verdict')}: {report.get('reason')}"
    served = None
    if spec["serve"]["target"] != "none":
        with progress.step(f"serve on {spec['serve']['target']}") as note:
            served = _serve(run, spec["serve"], progress)
            note["result"] = f"{served['name']} v{served['version']} at {served['endpoint']}; reply: {served['chat']}"
    outcome, checked = settle(run, previous, spec.get("expect") or {}, context.expect_lines, context.recipe)
    facts["status"] = run.status
    facts["closing"] = summary(facts, run, outcome, served, checked)
    return 0 if checked["passed"] else EXIT_EXPECT
