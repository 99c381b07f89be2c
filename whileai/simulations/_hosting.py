"""Hosted training: ``train`` checks the knobs and the data, then hands the run to the platform's job runner.

``whileai.simulations.training`` re-exports ``train`` (``wai.train``). Nothing
here loads a model (the context check reads the base's tokenizer, never its
weights). ``train`` validates every argument at once
(:class:`TrainingConfigError` lists each problem with the accepted range and
the cited paper's value, from ``TRAINING_KNOBS``), reads the dataset's
``profile`` and ``selection_report`` (the selection gate), warns about what is
probably a mistake, and only then creates the run and asks the platform to
launch its job (``POST /jobs/launch``). The job itself lives in
``whileai.jobs`` (launched by ``whileai.platform.launcher``).
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from whileai.domain import defaults
from whileai.core import defaults as core_defaults
from whileai.simulations._resolve import INHERITED, LORA_SHAPE, DataFacts, Resolved, data_facts, resolve_spec, \
    standing_problems
from whileai.simulations._sent import Sent, sent_as_is
from whileai.core.spec import ALIASES, BOOKKEEPING, GRPOSpec, RunSpec, canonical, continues_runs, same_run
from whileai.core.errors import TrainingConfigError, TrainingSelectionError, TrainingWarning

if TYPE_CHECKING:
    from whileai.domain.rows.context import ContextCheck
    from whileai.domain.rows.selection import DatasetProfile, Dropped, SelectionReport

__all__ = ["train", "train_spec", "selection_gate"]

#: the knobs that were ``train``'s own keyword arguments before every knob was (TRAINING_KNOBS): ``config=`` refuses
#: them, since it was never read for them; the other knobs (TRAINING_HOST_KEYS) it still takes
_KNOB_ARGS = tuple(defaults.TRAINING_KNOBS)


# ---------------------------------------------------------------------------
# The selection gate
# ---------------------------------------------------------------------------


def _dropped_text(report: Mapping[str, Any]) -> str:
    from whileai.domain.rows.selection import dropped_phrase  # the selection report's own wording of each count

    parts = [f"{d['class']}: {dropped_phrase(d, report)} ({d['reason']})" for d in report.get("dropped") or []]
    return "; ".join(parts)


def selection_gate(profile: Mapping[str, Any], method: str, check: str, min_mixed_tasks: int,
                   context: ContextCheck | None = None, per_task: int | None = None,
                   near_pairs: int = 0, policy_samples: bool = False) -> SelectionReport:
    """The selection report for ``method``; refuses what cannot teach, warns about what teaches less.

    SFT with failing rows, a grouped method with no mixed task, and rows whose
    every usable one is longer than the base's context (``context``, from
    ``context.check_context``) raise :class:`TrainingSelectionError`
    (``check="require"``) or warn (``check="warn"``). Fewer mixed tasks than
    ``min_mixed_tasks`` or any dropped class warns either way. A reward model
    with ``near_pairs`` near-miss pairs to train on (``near_misses``) needs no
    mixed task: rows that all pass, as a benchmark's reference calls do, give it
    its pairs; nor does GRPO or DPO drawing on the policy's own samples
    (``policy_samples``), which needs a gold on the tasks instead.
    """
    from whileai.domain.rows.selection import selection_report

    report = selection_report(profile, method, per_task=per_task, context=context, policy_samples=policy_samples)
    grouped = method in ("grpo", "dpo", "rm") and not policy_samples
    refusal = None
    failing = next((d for d in report.get("dropped") or [] if d["class"] == "failing"), None)
    if method == "sft" and failing is not None:
        refusal = (f"sft would train on {failing['rows']} failing rows of {report['rows_given']}: {failing['reason']} "
                   "(Lambert 2025, chapter Rejection Sampling); or pass check='warn' to train anyway")
    elif (profile.get("data_gates") or {}).get("refused_rows"):
        gates = profile["data_gates"]
        shown = "; ".join(f"row {r['row']}" + (f" (task {r['task_id']})" if r.get("task_id") is not None else "")
                          + f": {r['problems'][0]}" for r in gates["refused"])
        refusal = (f"{gates['refused_rows']} of {gates['rows']} rows fail the data gates (tool names, schema types, "
                   f"the gold against the tools): {shown}; fix those rows and push again")
    elif grouped and not report.get("mixed_tasks") and not near_pairs:
        other = {"grpo": "prompt_source='gold'", "dpo": "pair_source='policy_gold'"}.get(method)
        refusal = (f"{method} needs tasks with both a pass and a fail, and this dataset has none "
                   f"({report['tasks_given']} tasks: {profile.get('all_pass_tasks', 0)} all-pass, "
                   f"{profile.get('all_fail_tasks', 0)} all-fail); a unanimous group carries no advantage. "
                   "Push rollouts with several samples per task and mixed outcomes"
                   + (f", or pass {other} to judge the policy's own samples against each task's gold (a "
                      "benchmark's reference calls)" if other else ""))
    elif policy_samples and not report["tasks"] and not _too_long(report):
        refusal = (f"{method} judges the policy's own samples against each task's gold, and none of the "
                   f"{report['tasks_given']} tasks carries a gold first action; grade the rows with a gold "
                   "(docs/rows.md)")
    elif not report["rows"] and (too_long := _too_long(report)) is not None:
        from whileai.domain.rows.selection import dropped_phrase

        limit = report["context"]["limit"]
        refusal = (f"every {report['context']['unit'][:-1]} {method} would train on is longer than the context of "
                   f"{limit} tokens of {report['context']['base_model']}: {dropped_phrase(too_long, report)}; "
                   f"{too_long['reason']}")
    said = []
    if refusal is not None:
        if check == "require":
            raise TrainingSelectionError(refusal, report=report)
        said.append(f"check='warn': {refusal}")
    if grouped and 0 < report.get("mixed_tasks", 0) < min_mixed_tasks:
        said.append(f"{method} uses {report['mixed_tasks']} mixed tasks, fewer than min_mixed_tasks="
                    f"{min_mixed_tasks} (TRAIN_MIN_MIXED_TASKS); profile(dataset)['mixed_tasks'] is the number to grow")
    # rows without a fail still train a reward model with near misses: each is the chosen side of its own pairs
    only_no_fail = near_pairs and all(d["class"] == "no_fail" for d in report.get("dropped") or [])
    if report.get("dropped") and refusal is None and not only_no_fail:
        said.append(f"{method} uses {report['rows']} of {report['rows_given']} rows ({report['tasks']} of "
                    f"{report['tasks_given']} tasks); dropped {_dropped_text(report)}")
    if said:
        warnings.warn("; ".join(said), TrainingWarning, stacklevel=3)
    return report


def _too_long(report: Mapping[str, Any]) -> Dropped | None:
    """The report's ``too_long`` class (rows longer than the base's context), None where it drops none."""
    return next((d for d in report.get("dropped") or [] if d["class"] == "too_long"), None)


# ---------------------------------------------------------------------------
# train
# ---------------------------------------------------------------------------


def _id_or_problem(value: Any, what: str, problems: list[str]) -> str | None:
    found = value.get("id") if isinstance(value, Mapping) else getattr(value, "id", value)
    if isinstance(found, str) and found.startswith("ds_"):
        return found
    problems.append(f"{what}={value!r} is not a pushed dataset; pass the handle wai.push returned or its 'ds_...' id")
    return None


def _closed(name: str, value: Any, accepted: tuple, problems: list[str], none_ok: bool = False) -> None:
    if (value is None and none_ok) or value in accepted:
        return
    problems.append(f"{name}={value!r} is not accepted; pass one of {', '.join(map(repr, accepted))}"
                    + (" or leave it None" if none_ok else ""))


def _start_run(client: Any, init_from: Any, base_model: str | None,
               config: Mapping[str, Any] | None, problems: list[str]) -> dict[str, Any] | None:
    """The finished policy run ``init_from`` names, checked as a start (any method may start from a policy: a
    reward model's backbone then begins as it); None (with problems) when unusable."""
    from whileai.core.errors import NotFoundError

    found = init_from.get("id") if isinstance(init_from, Mapping) else getattr(init_from, "id", init_from)
    if not isinstance(found, str) or not found.startswith("run_"):
        problems.append(f"init_from={init_from!r} is not a run; pass a finished run (the TrainingRun, its record "
                        "from get_run, or its 'run_...' id)")
        return None
    try:
        record = client.request("GET", f"/runs/{found}", params={"series": "false"})
    except NotFoundError:
        problems.append(f"init_from={found!r} is not a run of this account (the platform answered 404); pass one of "
                        "your finished runs, e.g. from wai.list_runs(status='done')")
        return None
    said = len(problems)
    source = canonical(record["config"]) if isinstance(record.get("config"), Mapping) else {}
    summary = record.get("summary") or {}
    if record.get("status") == "running":
        problems.append(f"init_from={found!r} is still running: a stage starts from a finished run's adapter; "
                        "wait for it (run.wait()) and pass it again")
    elif record.get("status") != "done":
        problems.append(f"init_from={found!r} ended {record.get('status')}, so it has no adapter to continue from; "
                        "pick a run that ended done")
    elif not summary.get("adapter") and not summary.get("adapter_remote"):
        problems.append(f"init_from={found!r} has no adapter on its record (only runs that wai.train finished have "
                        "one); pass a run made by wai.train that ended done")
    if not continues_runs(str(source.get("method"))):
        problems.append(f"init_from={found!r} is a reward model (rm): its adapter scores rows, it does not write "
                        "them; pass an sft, grpo or dpo run")
    start_base = source.get("base_model") or (summary.get("training") or {}).get("base_model")
    if base_model is not None and start_base and base_model != start_base:
        problems.append(f"base_model={base_model!r} differs from the base of init_from={found!r} ({start_base!r}): "
                        f"its adapter only fits {start_base!r}; leave base_model None or pass {start_base!r}")
    for key in LORA_SHAPE:
        given = (config or {}).get(key)
        if given is not None and source.get(key) is not None and given != source[key]:
            problems.append(f"config[{key!r}]={given!r} differs from init_from={found!r} ({source[key]!r}): the "
                            "adapter keeps its shape when training continues; leave it out")
    return record if len(problems) == said else None


def _run_id(value: Any) -> Any:
    """A run named by its handle, its record or its id, as the id (anything else as given, for the knob check)."""
    if isinstance(value, Mapping):
        return value.get("id", value)
    return getattr(value, "id", value)


def _warn(message: str, depth: int = 0) -> None:
    """A TrainingWarning pointed at the line that called ``train`` (``depth``: helpers between train and here)."""
    warnings.warn(message, TrainingWarning, stacklevel=3 + depth)


def _running_run(client: Any, dataset_id: str, config: Any) -> dict[str, Any] | None:
    """The hosted run already training this dataset with this very config, if any.

    Each candidate is re-read, which settles a job that died; a run of the same
    dataset with other settings (another point of a sweep) is not an answer.
    """
    params = {"status": "running", "dataset": dataset_id, "kind": defaults.TRAIN_RUN_KIND}
    for record in client.request("GET", "/runs", params=params)["runs"]:
        theirs = record.get("config")
        if not (isinstance(theirs, dict) and isinstance(config, dict) and same_run(theirs, config)):
            continue
        fresh = client.request("GET", f"/runs/{record['id']}", params={"series": "false"})
        if fresh["status"] == "running":
            return fresh
    return None


def train_spec(method: str, arguments: Mapping[str, Any], config: Mapping[str, Any] | None, *,
               base_model: str | None, target: str | None, holdout: str | None,
               start: RunSpec | Mapping[str, Any] | None = None, start_label: str | None = None,
               data: DataFacts | Callable[[], DataFacts | None] | None = None,
               init_from: str | None = None, spec: RunSpec | None = None, data_later: bool = False) -> Resolved:
    """What ``train`` resolves its arguments to: ``resolve_spec`` over ``spec``'s settings, ``config=`` and its
    keyword arguments, each over the one before.

    A knob that is one of ``train``'s documented arguments is refused inside ``config`` (it would not be read);
    ``config["provenance"]`` (the runner's origins of the values it passes) names where each came from, as
    ``spec.provenance`` does for the spec's own. ``init_from`` is the id of the run this one continues, recorded
    on the spec; ``data`` and ``data_later`` are ``resolve_spec``'s (``data`` read only when nothing else is wrong).
    """
    config = canonical(config or {})
    from_spec, origin = _given_of(spec)
    if start is not None:  # what the spec took from the stage it continues is taken again from the run it continues
        from_spec = {k: v for k, v in from_spec.items()
                     if not (k in LORA_SHAPE and origin.get(k, "").startswith(INHERITED))}
    origin.update({k: "argument" for k, v in arguments.items() if v is not None})
    given_origins = config.pop("provenance", None)
    if isinstance(given_origins, Mapping):
        origin.update({str(k): str(v) for k, v in given_origins.items()})
    problems = [f"config key {name!r} is a train() argument, not a host key: config={{{name!r}: {value!r}}} would "
                f"not be read; pass {name}={value!r} to train() instead" for name, value in config.items()
                if name in _KNOB_ARGS]
    given = {**from_spec, **{k: v for k, v in config.items() if k not in _KNOB_ARGS},
             **{k: v for k, v in arguments.items() if v is not None}}
    resolution = resolve_spec(method, given, origin=origin, base_model=base_model, target=target, holdout=holdout,
                              start=start, start_label=start_label, data=None if problems else data,
                              given_label="argument", init_from=init_from, data_later=data_later)
    if problems:
        return Resolved(None, resolution.values, resolution.provenance, problems + resolution.problems,
                        resolution.notes)
    return resolution


#: A spec's fields that are not settings it was given: what it is, where it runs and what it starts from (``train``'s
#: own arguments), where each value came from, a user's notes (given key by key), and the launcher's bookkeeping.
_NOT_GIVEN = ("spec_version", "method", "base_model", "target", "holdout", "init_from", "provenance", "extra",
              *BOOKKEEPING)


def _given_of(spec: RunSpec | None) -> tuple[dict[str, Any], dict[str, str]]:
    """``(the settings spec was given, where each came from)``: its knobs and config keys that were set (a resolved
    spec sets them all; the knobs the dataset decides stay unset until the submit reads it), its notes key by key."""
    if spec is None:
        return {}, {}
    given = {name: getattr(spec, name) for name in spec.model_fields_set if name not in _NOT_GIVEN}
    given.update(spec.extra or {})
    return given, {**(spec.provenance or {})}


def train(dataset: Any, method: str | None = None, *, spec: RunSpec | None = None, holdout: Any = None,
          base_model: str | None = None, check: str = "require", config: Mapping[str, Any] | None = None,
          wait: bool = False, target: str | None = None, init_from: Any = None, name: str | None = None,
          **settings: Any) -> Any:
    """Start a hosted LoRA fine-tune on a pushed dataset and return its run at once.

    ``method`` is "sft" (every row as pushed: push ``scored.passes()``; the default), "grpo" (prompts with both a
    pass and a fail; reward = the first action against the row's gold), "dpo" (a pass against a fail per prompt,
    length matched) or "rm" (a reward model on those pairs; ``reward_model(run)`` is then a judge).

    Every setting is given the same way, whichever it is: as a keyword argument named as the spec names it
    (``steps``, ``beta``, ``learning_rate``, ``lora_rank``, ``batch_size``, ``prompt_source``, ``gpu``, ... every
    knob of ``whileai.core.spec``, listed in ``inspect.signature(wai.train)`` and docs/knobs.md), or in a run spec
    object, ``spec=GRPOSpec(beta=0.02)`` (``from whileai.core.spec import GRPOSpec``; its method is the run's; the
    runner hands over the frozen spec it resolved), with keyword arguments beside it changing its settings. An
    unknown keyword is refused naming the nearest settings and every accepted one. ``config=`` still takes the host keys (``{"lora_rank": 8}``, ``{"epsilonHigh": 0.3}``: the reference's
    spellings are aliases) and notes kept on the run. Before any model is loaded, every setting is checked
    (TrainingConfigError lists each problem with the range and the paper's value from TRAINING_KNOBS; None takes the
    declared default) and the dataset's ``selection_report`` decides (``check``: "require" refuses what cannot
    teach with TrainingSelectionError, "warn" says so and starts, "off" skips the read). The report counts the
    rows longer than the base's context with the base's tokenizer alone (``report["context"]``; a hub base not on
    this machine is left to the job, and the report says so). Every knob, defaults included, lands on the run's
    config. Submitting what is already training (the same dataset, method and resolved config: knobs, export
    settings, base, init_from and target) answers with that run instead of a second, so a double submit trains
    once; any other config on the same dataset, such as each point of a sweep, starts its own run. ``target`` is
    "local" (a detached process here) or "modal"; None takes the platform's default (TRAIN_TARGET_ENV).
    ``wait=True`` blocks until the run ends. ``name`` titles the run on the pages; None names it by the method and
    the dataset's name. ``holdout`` names the held-out set (None: the train set's split sibling from
    ``datasets.cut``).

    ``init_from`` (a finished run: the TrainingRun, its record or its id) makes this run a stage after that one: it
    loads that run's adapter on its base, trainable, and keeps training it, so the result is one adapter that
    ``serve`` puts on the same base. The base (and LoRA shape) come from that run; a different ``base_model`` is
    refused, and so is ``method="rm"``, which starts from the base. The run's config names it under ``init_from``.

    ``mask_mode``, ``unroll``, ``strip_think`` and ``max_tool_output_chars`` are the export settings of
    ``export_dataset`` (same names, same meanings), applied by the job when it builds what the trainer reads: SFT
    reads all four, DPO the last two (TRAINING_KNOBS says which method reads which).

    ``reward`` (GRPO) is what the policy is paid: ``"first_action"`` (the default, the exact judge),
    ``"fine_grained"`` (ToolRL's decomposed score), ``"rm"`` (the reward-model run ``reward_model`` names: a
    TrainingRun, its record or its id) or ``"python:MODULE:FUNCTION"`` (your own TRL reward function, imported and
    tried on two sample rows before the run exists); a list sums several, weighted by ``reward_weights``. Any reward
    but the exact judge is watched by the HackMonitor against the exact judge.

        run = wai.train(ds, method="sft", lora_rank=8, wait=True)
        grpo = wai.train(ds_mixed, method="grpo", init_from=run, beta=0.02, wait=True)
        again = wai.train(ds_mixed, spec=GRPOSpec(beta=0.02, prompt_source="gold"), init_from=run)
    """
    from whileai.domain.client import get_client

    method, problems = _method_of(method, spec)
    holdout, base_model, target, init_from = _placement(spec, holdout, base_model, target, init_from)
    problems += _argument_problems(method, check, target, wait, name, base_model, config)
    knobs = _settings_of(settings, config, problems)
    config = canonical(config) if isinstance(config, Mapping) else None  # camelCase host keys recorded in snake_case
    dataset_id = _id_or_problem(dataset, "dataset", problems)
    holdout_id = _id_or_problem(holdout, "holdout", problems) if holdout is not None else None
    client = start = None
    if init_from is not None and method in core_defaults.TRAIN_METHODS:
        client = get_client()
        start = _start_run(client, init_from, base_model, {**_given_of(spec)[0], **(config or {}), **knobs},
                           problems)
    data = _DatasetRows(dataset_id)
    sent, notes = _resolved_or_refused(method, knobs, config, problems, base_model=base_model, target=target,
                                       holdout=holdout_id, start=start, spec=spec,
                                       data=data.facts if method == "grpo" and check != "off" else None)
    client = client or get_client()
    record = client.request("GET", f"/datasets/{data.dataset_id}")
    if holdout_id is None and record.get("split") == "train" and record.get("sibling"):
        sent = replace(sent, holdout=record["sibling"])  # the split's held-out half, written beside the spec
    report = _gate(sent.spec, check, data) if check != "off" else None
    for note in notes:
        _warn(note)
    _warn_unserved(sent.spec.base_model)
    run, found = _make_or_find_run(client, sent, name or f"{method} {record.get('name') or data.dataset_id}",
                                   data.dataset_id, report)
    if not found:
        _launch(client, run, sent, data.dataset_id, target)
    if wait:
        run.wait()
    return run


#: What ``train`` takes as keyword arguments: every knob of every method, as declared (whileai.core.spec), and the
#: config keys the platform reads (TRAINING_CONFIG_KEYS); the older spellings (ALIASES) are read as these.
SETTINGS: tuple[str, ...] = tuple(dict.fromkeys([*defaults.TRAINING_KNOBS, *defaults.TRAINING_HOST_KEYS,
                                                  *defaults.TRAINING_CONFIG_KEYS]))


def _signature() -> inspect.Signature:
    """``train``'s signature as help() and IDEs show it: its own arguments, then every setting as a keyword argument
    (None: the declared default), in place of ``**settings``."""
    own = inspect.signature(train)
    named = [p for p in own.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    settings = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None) for name in SETTINGS]
    return own.replace(parameters=[*named, *settings])


setattr(train, "__signature__", _signature())  # noqa: B010  (a function's signature is not a declared attribute)


def _method_of(method: Any, spec: Any) -> tuple[str, list[str]]:
    """The run's method (``spec``'s, else ``method``, else "sft") and what is wrong with the two together."""
    if spec is None:
        return ("sft" if method is None else method), []
    if not isinstance(spec, RunSpec):
        return ("sft" if method is None else method), [
            f"spec={spec!r} is not a run spec; pass a method's spec object (SFTSpec, GRPOSpec, DPOSpec or RMSpec "
            "of whileai.core.spec), or leave spec None and give the settings as keyword arguments"]
    if method is not None and method != spec.method:
        return spec.method, [f"method={method!r} differs from the spec's method ({spec.method!r}); leave method out, "
                             f"or pass a {method} spec"]
    return spec.method, []


def _settings_of(settings: Mapping[str, Any], config: Any, problems: list[str]) -> dict[str, Any]:
    """``train``'s keyword settings in canonical form, a run named by its handle or record as its id; each unknown
    name (with the nearest settings) and each setting also given in ``config`` with another value is a problem."""
    import difflib

    out: dict[str, Any] = {}
    for key, value in settings.items():
        name = ALIASES.get(key, key)
        if name not in SETTINGS:
            near = difflib.get_close_matches(name, SETTINGS, n=3, cutoff=0.6)
            problems.append(f"{key}={value!r} is not a setting of train()"
                            + (f" (did you mean {' or '.join(near)}?)" if near else "")
                            + f"; pass one of the settings: {', '.join(sorted(SETTINGS))}")
            continue
        out[name] = _run_id(value) if name in ("reward_model", "gold_judge") else value
    given = canonical(config) if isinstance(config, Mapping) else {}
    for name, value in out.items():
        if name in given and given[name] is not None and value is not None and given[name] != value:
            problems.append(f"{name} is given twice: {name}={value!r} and config[{name!r}]={given[name]!r}; pass it "
                            "once, as the keyword argument")
    return out


def _placement(spec: RunSpec | None, holdout: Any, base_model: str | None, target: str | None,
               init_from: Any) -> tuple[Any, str | None, str | None, Any]:
    """``(holdout, base_model, target, init_from)``: each as given to ``train``, else as ``spec`` names it."""
    if not isinstance(spec, RunSpec):
        return holdout, base_model, target, init_from
    return (spec.holdout if holdout is None else holdout, base_model or spec.base_model,
            spec.target if target is None else target, spec.init_from if init_from is None else init_from)


def _argument_problems(method: str, check: str, target: str | None, wait: Any, name: Any, base_model: Any,
                       config: Any) -> list[str]:
    """What is wrong with ``train``'s plain arguments (the knobs are resolve_spec's)."""
    problems: list[str] = []
    _closed("method", method, core_defaults.TRAIN_METHODS, problems)
    _closed("check", check, core_defaults.TRAIN_CHECKS, problems)
    _closed("target", target, core_defaults.TRAIN_TARGETS, problems, none_ok=True)
    if not isinstance(wait, bool):
        problems.append(f"wait={wait!r} is not True or False")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        problems.append(f"name={name!r} is not a title; pass a non-empty string or leave it None")
    if base_model is not None and (not isinstance(base_model, str) or not base_model.strip()):
        problems.append(f"base_model={base_model!r} is not a model name or path; pass a string or leave it None")
    if config is not None and not isinstance(config, Mapping):
        problems.append(f"config={config!r} is not a mapping; pass a dict of host keys or leave it None")
    return problems


class _DatasetRows:
    """A pushed dataset's rows and profile, read once, when first wanted (GRPO's facts, the selection gate)."""

    def __init__(self, dataset_id: str | None):
        self.dataset_id = dataset_id
        self._read: tuple[list[Any], DatasetProfile] | None = None

    def rows(self) -> tuple[list[Any], DatasetProfile]:
        """``(rows, profile)``."""
        if self._read is None:
            from whileai.domain.rows.selection import profile_rows
            from whileai.domain.rows.rowsource import rows_of

            rows = rows_of(self.dataset_id)
            self._read = rows, profile_rows(rows, source=self.dataset_id)
        return self._read

    def temperatures(self) -> list[float]:
        return [float(t) for t in self.rows()[1].get("temperatures") or []]

    def facts(self) -> DataFacts:
        """What GRPO fills its unset group size and temperature from (``resolve_spec``'s ``data``)."""
        return data_facts(self.rows()[1])


def _resolved_or_refused(method: str, knobs: Mapping[str, Any], config: Mapping[str, Any] | None,
                         problems: list[str], *, base_model: str | None, target: str | None, holdout: str | None,
                         start: Mapping[str, Any] | None, spec: RunSpec | None,
                         data: Callable[[], DataFacts] | None) -> tuple[Sent, list[str]]:
    """What the submit sends and the resolution's notes: a resolved ``spec`` it fills nothing of as it is
    (``_sent.sent_as_is``, asked again what its model cannot check: ``standing_problems``), else the spec resolved
    from everything given; raises TrainingConfigError listing ``problems`` with the resolution's own and what this
    machine cannot run (a local job runs here)."""
    resolution = sent = None
    if not problems and start is None:
        sent = sent_as_is(spec, knobs, config, holdout=holdout, base_model=base_model, target=target)
    if sent is not None:
        resolution = Resolved(sent.spec, {}, {}, standing_problems(sent.spec))
    elif method in core_defaults.TRAIN_METHODS:
        resolution = train_spec(method, knobs, config, base_model=base_model, target=target, holdout=holdout,
                                start=_start_config(start), start_label=start["id"] if start is not None else None,
                                data=None if problems else data, init_from=start["id"] if start is not None else None,
                                spec=spec if isinstance(spec, RunSpec) else None)
        problems = problems + resolution.problems
        if target != "modal":
            problems += _machine_problems(method, resolution)
    if problems or resolution is None or resolution.spec is None:  # a dataset without an id is among the problems
        listed = "\n".join(f"  - {p}" for p in problems)
        raise TrainingConfigError(f"train() cannot start: {len(problems)} problem(s)\n{listed}", problems)
    return sent or Sent(resolution.spec), resolution.notes


def _start_config(start: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The config of the run this one continues, with its base (a record of before the base was on the config
    keeps it in its summary); None without one."""
    if start is None:
        return None
    config = canonical(start["config"]) if isinstance(start.get("config"), Mapping) else {}
    if not config.get("base_model"):
        config["base_model"] = (start["summary"].get("training") or {}).get("base_model")
    return config


def _machine_problems(method: str, resolution: Resolved) -> list[str]:
    """What this machine cannot run of the spec (its placement), and the trackers it cannot mirror to."""
    from whileai.core.launch import machine_problems
    from whileai.core.spec import SPEC_MODELS

    model = SPEC_MODELS[method]
    placed = resolution.spec or model.model_construct(**{  # unchecked: only its placement is read
        k: v for k, v in resolution.values.items() if k in model.model_fields})
    problems = []
    try:
        problems += machine_problems(placed)
    except (TypeError, AttributeError):  # placement itself malformed: already among the problems
        pass
    if resolution.spec is not None and resolution.spec.report_to:  # the job mirrors from here: its packages
        from whileai.domain.tracking.mirror import mirror_problems

        problems += mirror_problems(resolution.spec.report_to)
    return problems


def _gate(spec: RunSpec, check: str, data: _DatasetRows) -> SelectionReport:
    """The selection gate on the dataset's rows as the job will use them under ``spec``; warns when GRPO samples
    at another temperature than the rollouts were measured at."""
    from whileai.domain.rows.selection import near_miss_count, pairs_per_task, samples_the_policy, with_near_misses
    from whileai.domain.rows.context import check_context

    rows, prof = data.rows()
    method, knobs = spec.method, spec.knobs()  # the knob values, as the readers of a user's config take them
    per_task = pairs_per_task(method, knobs, len(rows))  # balance=False: every length-matched pair
    # tokenizer only; in an environment a GRPO prompt is an episode's, capped as one (EPISODE_MAX_LENGTH)
    context = check_context(rows, method, spec.base_model, {**knobs, "environment": getattr(spec, "environment", None)},
                            per_task)
    near = near_miss_count(rows, method, knobs)  # rm: the pairs its job adds
    report = selection_gate(prof, method, check, spec.min_mixed_tasks, context, per_task, near,
                            policy_samples=samples_the_policy(method, knobs))
    report = with_near_misses(report, rows, method, knobs, near)
    temps = data.temperatures()
    if isinstance(spec, GRPOSpec) and temps and spec.temperature not in temps:
        seen = ", ".join(f"{t:g}" for t in temps)
        _warn(f"temperature={spec.temperature:g} differs from the dataset's sampling.temperature ({seen}): "
              "the run samples at another temperature than the rollouts were measured at, so before/after is "
              "not like for like; pass temperature= to match", depth=1)
    return report


def _warn_unserved(base: str | None) -> None:
    from whileai.core.basefolder import names_a_path
    from whileai.kit import is_gguf_base

    # a folder of the user's serves where the platform trained on it
    if base not in defaults.SERVED_BASES and not is_gguf_base(base) and not (base and names_a_path(base)):
        _warn(f"base_model={base!r} is not in SERVED_BASES, so this run's adapter cannot be "
              f"served afterwards; the served bases are {', '.join(defaults.SERVED_BASES)}", depth=1)


def _make_or_find_run(client: Any, sent: Sent, title: str, dataset_id: str | None,
                      report: SelectionReport | None) -> tuple[Any, bool]:
    """``(run, found)``: the run already training this dataset with this config (found, with a warning), else a
    new one. The platform looks again in the same transaction as its insert."""
    from whileai.domain.tracking import TrainingRun, jsonable

    body: dict[str, Any] = {"name": title, "dataset": dataset_id, "config": sent.config(),
                            "kind": defaults.TRAIN_RUN_KIND}
    if report is not None:
        body["summary"] = {"selection": jsonable(report, "selection")}
    existing = _running_run(client, str(dataset_id), body["config"])
    if existing is None:  # one run per config
        made = client.request("POST", "/runs", json={**body, "once": True})
        if not made.pop("created", True):
            existing = made
    if existing is not None:
        _warn(f"{dataset_id} is already training in {existing['id']} with this same config ({sent.spec.method}); "
              "returning that run instead of starting a second (change a knob to start another)", depth=1)
    run = TrainingRun(existing if existing is not None else made, client)
    run.selection = report
    return run, existing is not None


def _launch(client: Any, run: Any, sent: Sent, dataset_id: str | None, target: str | None) -> None:
    """Ask the platform to start the run's job with the job's own copy of the spec ``sent`` (its run and dataset
    named)."""
    try:
        client.request("POST", "/jobs/launch", json={"run_id": run.id, "kind": sent.spec.method, "target": target,
                                                     "spec": sent.job(run.id, dataset_id)})
    except Exception:
        try:  # the platform failed the run with the reason; show it on the handle too
            run.refresh()
        except Exception:
            pass
        raise
    run.refresh()
