"""``python -m whileai run`` and ``validate``: one ``@hydra.main`` function behind both.

The dispatcher (``whileai/__main__.py``) pops the subcommand and hands the rest
of the command line here; Hydra parses it, so ``--help``, ``--cfg job``,
``-m``/``--multirun`` and ``hydra/launcher=...`` are Hydra's own. Only
``--recipes DIR`` is read (and removed) first, because it decides which
recipes Hydra can see. Key typos and unknown group options are caught before
Hydra composes, so they are reported with the nearest name and together with
every problem of the composed spec.

This is the only module (with ``_origin``) that touches Hydra and OmegaConf:
the composed config is validated here, once, into the typed ``RecipeSpec`` the
rest of the runner reads.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from whileai.runner import defaults
from whileai.runner._locate import Sources, data_root, new_token, register, sources
from whileai.runner.quick import is_quick, pop_quick

if TYPE_CHECKING:
    from whileai.core.spec import RunSpec

    from whileai.runner.pipeline import ReadRows
    from whileai.runner._rundata import RunData
    from whileai.runner.schema import Problem, RecipeSpec, Target
    from whileai.runner.stages import Stage

__all__ = ["run_main", "validate_main", "register_resolvers", "new_token", "report_problems"]


class _State(TypedDict):
    """What run_main/validate_main set for the task function (the same process; a joblib worker re-reads the env):
    run or validate, the overrides' problems, the config sources, the exit code so far and the command line."""

    mode: str
    problems: list[Problem]
    found: Sources | None  # None until ``_prepare`` located them
    exit: int
    argv: list[str]
    added: NotRequired[set[str]]  # the overrides given "++" so that Hydra takes a key the root config lacks


_STATE: _State = {"mode": "run", "problems": [], "found": None, "exit": 0, "argv": []}
_MODE_ENV = "WHILEAI_RUNNER_MODE"
#: set (to "1") by ``--json``: the closing summary is one JSON object on stdout (read by joblib workers too)
_JSON_ENV = "WHILEAI_RUNNER_JSON"
#: the keys a sweep sweeps, comma-separated (a joblib worker names its run by them too)
_SWEPT_ENV = "WHILEAI_RUNNER_SWEPT"
#: ``recipe=none`` (or ``recipe=null``): run the root spec and the command line's values, without a recipe
_NO_RECIPE = ("none", "null")

#: What ``validate`` adds to Hydra's overrides so that it leaves no folder behind: no ``.hydra/``
#: files, and a run directory that already exists (the working directory, which Hydra does not
#: change: conf/config.yaml sets hydra.job.chdir false and job logging to none, so no log file).
VALIDATE_HYDRA_OVERRIDES = ("hydra.output_subdir=null", "hydra.run.dir=.")


def _knob_default(name: str, *, _root_: Any) -> Any:
    from whileai.domain import defaults as sdk

    table = sdk.TRAINING_KNOBS if name in sdk.TRAINING_KNOBS else sdk.TRAINING_HOST_KEYS
    method = _root_.get("method")
    spec = table.get(name, {}).get(method)
    if spec is None:
        raise ValueError(f"wai.knob:{name}: {name} is not read by method={method}")
    return spec["default"]


#: where ``${wai.const:NAME}`` looks, in order: settings live with their owner (docs/architecture.md)
_CONST_HOMES = ("whileai.domain.defaults", "whileai.kit.defaults", "whileai.platform.defaults",
                "whileai.jobs.defaults", "whileai.core.defaults")


def _const(name: str) -> Any:
    from whileai.core import defaults as core
    from whileai.jobs import defaults as jobs
    from whileai.kit import defaults as kit
    from whileai.platform import defaults as platform
    from whileai.domain import defaults as sdk

    for home in (sdk, kit, platform, jobs, core):
        if hasattr(home, name):
            value = getattr(home, name)
            return list(value) if isinstance(value, tuple) else value
    where = ", ".join(m.replace(".", "/") + ".py" for m in _CONST_HOMES)
    raise ValueError(f"wai.const:{name}: no such constant in {where}")


def register_resolvers() -> None:
    """``${wai.knob:NAME}`` (the method's default from TRAINING_KNOBS), ``${wai.const:NAME}`` (a constant of a defaults module, _CONST_HOMES)."""
    from omegaconf import OmegaConf

    from whileai.runner.knobs_doc import help_lines
    from whileai.runner.schema import HOST_KEYS, KNOBS

    OmegaConf.register_new_resolver("wai.knob", _knob_default, replace=True)
    OmegaConf.register_new_resolver("wai.const", _const, replace=True)
    OmegaConf.register_new_resolver("wai.knob_names", lambda: ", ".join((*KNOBS, *HOST_KEYS)), replace=True)
    OmegaConf.register_new_resolver("wai.knob_help", lambda: "\n" + help_lines(), replace=True)


def _pop_recipes_flag(argv: list[str]) -> tuple[list[str], str | None]:
    out: list[str] = []
    chosen = None
    it = iter(argv)
    for arg in it:
        if arg == "--recipes":
            chosen = next(it, None)
            if chosen is None:
                raise SystemExit("--recipes needs a folder: --recipes DIR (or set WHILEAI_RECIPES)")
        elif arg.startswith("--recipes="):
            chosen = arg.split("=", 1)[1]
        elif arg == "--json":
            os.environ[_JSON_ENV] = "1"
        else:
            out.append(arg)
    return out, chosen


def _no_recipe(argv: list[str]) -> tuple[list[str], bool]:
    """(argv without ``recipe=none``, whether it was there): the root spec's own empty recipe choice."""
    words = {f"{defaults.RECIPE_GROUP}={v}" for v in _NO_RECIPE}
    return [a for a in argv if a not in words], any(a in words for a in argv)


def _names_a_recipe(argv: list[str]) -> bool:
    """A recipe, or a dataset of the user's own (``dataset=jsonl dataset.path=FILE``): enough to say what to run."""
    keys = [a.lstrip("+").split("=", 1)[0] for a in argv if "=" in a]
    return defaults.RECIPE_GROUP in keys or any(k == "dataset" for k in keys)


def _is_multirun(argv: list[str]) -> bool:
    return any(a in ("-m", "--multirun") for a in argv) or "hydra.mode=MULTIRUN" in argv


def refuse_bare_run(found: Any) -> int:
    """``python -m whileai run`` without a recipe: what to type instead, and the recipes there are."""
    names = found.names(defaults.RECIPE_GROUP)
    lines = ["python -m whileai run needs a recipe: python -m whileai run recipe=NAME [knob=value ...]",
             "", "the recipes:"]
    for name in names:
        lines.append(f"  recipe={name:<20} {_recipe_line(found.option_file(defaults.RECIPE_GROUP, name))}")
    lines += ["", "the main job: python -m whileai run recipe=sft_tooluse",
              "your own folder of recipes: --recipes DIR (or WHILEAI_RECIPES=DIR)",
              "the root spec and your own values, without a recipe: python -m whileai run recipe=none knob=value ..."]
    print("\n".join(lines), file=sys.stderr)
    return 2


def _recipe_line(path: Path | None) -> str:
    """The first comment line after a recipe's ``# @package`` header: what it runs."""
    if path is None:
        return ""
    with open(path, encoding="utf-8") as f:
        for line in f:
            text = line.strip()
            if text.startswith("#") and not text.startswith("# @package") and text.strip("# "):
                first = text.lstrip("# ")
                return first.split(". ")[0].rstrip(".") + "." if ". " in first or first.endswith(".") else first + " ..."
            if text and not text.startswith("#"):
                break
    return ""


def _cfg_job(argv: list[str]) -> tuple[list[str], bool]:
    """(argv without ``--cfg job`` / ``-c job`` / ``--resolve``, whether they were there).

    ``--cfg job`` is answered like ``validate``: the spec checked with every problem listed, and
    shown resolved with the values the job will use; ``--cfg hydra`` and ``--cfg all`` stay Hydra's.
    """
    if any(a in ("--package", "-p") for a in argv):
        return argv, False
    out: list[str] = []
    found = False
    i = 0
    while i < len(argv):
        if argv[i] in ("--cfg", "-c") and i + 1 < len(argv) and argv[i + 1] == "job":
            found = True
            i += 2
            continue
        if argv[i] == "--resolve":
            i += 1
            continue
        out.append(argv[i])
        i += 1
    return (out if found else argv), found


def _prepare(argv: list[str], mode: str) -> tuple[list[str], Sources]:
    """Environment, resolvers, recipes; returns the argv Hydra should parse and the config sources found."""
    from whileai.core import defaults as core_defaults

    from whileai.runner import schema
    from whileai.runner._origin import check_overrides

    argv, user = _pop_recipes_flag(list(argv))
    argv = [schema.canonical_override(a) for a in argv]  # loraRank=8 means lora_rank=8 (whileai.core.spec.ALIASES)
    if user:
        os.environ[defaults.RECIPES_ENV] = str(Path(user).expanduser().resolve())  # joblib workers read it too
    os.environ.setdefault(core_defaults.HOME_ENV, str(data_root()))  # Hydra's folders go under the data root
    os.environ.setdefault(defaults.TOKEN_ENV, new_token())
    os.environ[_MODE_ENV] = mode
    found = sources()
    register_resolvers()
    register(found)
    flags = [a for a in argv if a.startswith("-")]
    overrides = [a for a in argv if not a.startswith("-")]
    # values of flags that take one (--cfg job, --package x, --config-name x ...) are not overrides
    takes_value = {"--cfg", "-c", "--package", "-p", "--config-name", "-cn", "--config-dir", "-cd",
                   "--config-path", "-cp", "--info", "-i", "--experimental-rerun"}
    flag_values = {argv[i + 1] for i, a in enumerate(argv[:-1]) if a in takes_value}
    overrides = [o for o in overrides if o not in flag_values]
    kept, problems = check_overrides(overrides, found)
    added = {k.removeprefix("++"): k for k in kept if k.startswith("++") and k.removeprefix("++") in overrides}
    # what check_overrides refused; an override kept as typed ("++key=...", "+key=...") or with the "++" it added
    dropped = set(overrides) - {k.removeprefix("++") for k in kept} - set(kept)
    os.environ[_SWEPT_ENV] = ",".join(_swept_keys(kept))
    _STATE.update({"mode": mode, "problems": problems, "found": found, "argv": list(argv), "added": set(added.values())})
    if problems and ("-m" in flags or "--multirun" in flags or "--help" in flags or "-h" in flags):
        report_problems(problems)
        raise SystemExit(2)
    return [added.get(a, a) for a in argv if a not in dropped], found


def _swept_keys(overrides: list[str]) -> list[str]:
    """The keys the command line sweeps (``beta=0.01,0.04``, ``seed=range(3)``), in the order typed."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    keys = []
    for text in overrides:
        try:
            override = parser.parse_override(text)
        except Exception:  # Hydra reports its own grammar errors
            continue
        if override.is_sweep_override() and not override.key_or_group.startswith("hydra"):
            keys.append(override.key_or_group)
    return keys


def _label(overrides: list[str], multirun: bool) -> list[str]:
    """The ``key=value`` words a run's name ends with: a sweep's swept keys, else the knobs typed (at the root or
    for a stage, ``stages.sft.steps=5``) and a typed ``base_model``; ``_label.run_label`` places them."""
    from whileai.runner.schema import HOST_KEYS, KNOBS

    swept = set(k for k in os.environ.get(_SWEPT_ENV, "").split(",") if k)
    knobs = {*KNOBS, *HOST_KEYS, "base_model"}

    def wanted(key: str) -> bool:
        if multirun:
            return key in swept
        return key in knobs or (key.startswith("stages.") and key.rsplit(".", 1)[-1] in knobs)

    return [o for o in overrides if "=" in o and wanted(o.split("=", 1)[0].lstrip("+~"))]


def _scale_words(target: Target, label: list[str]) -> list[str]:
    """``processes=2`` (and ``nodes=2``) for a run's name when its job spans more than one process."""
    named = {w.split("=", 1)[0].lstrip("+") for w in label}
    return [f"{k}={count}" for k, count in (("processes", target.processes), ("nodes", target.nodes))
            if count > 1 and f"target.{k}" not in named]


def report_problems(problems: list[Any]) -> None:
    print(f"whileai: the spec has {len(problems)} problem(s); nothing was loaded or run:", file=sys.stderr)
    for problem in problems:
        print(f"  - {problem}", file=sys.stderr)


def _task(cfg: Any) -> Any:
    """The one Hydra task: compose -> validate into the typed spec -> (validate: print | run: the pipeline)."""
    import logging

    from hydra.core.hydra_config import HydraConfig

    from whileai.runner._origin import Origins

    register_resolvers()  # a joblib worker is a fresh process
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per platform request is noise here
    mode = os.environ.get(_MODE_ENV, _STATE["mode"])
    hydra_cfg = HydraConfig.get()
    choices = _choices(hydra_cfg)
    # as typed: the "++" this command line put before a stage knob Hydra would not add is its own, not the user's
    overrides = [o.removeprefix("++") if o in _STATE.get("added", ()) else o for o in hydra_cfg.overrides.task]
    origin = Origins(_STATE["found"] or sources(), choices, overrides)
    spec, stages, rows = _validated(cfg, origin, whole=mode == "run")
    if mode == "validate":
        return _show(spec, choices)
    return _run(spec, stages, hydra_cfg, choices, overrides, origin, rows)


def _choices(hydra_cfg: Any) -> dict[str, Any]:
    """The group options Hydra composed (``method: grpo``, ``recipe: grpo_tooluse``), Hydra's own left out."""
    from omegaconf import OmegaConf

    runtime_choices = OmegaConf.to_container(hydra_cfg.runtime.choices)  # a DictConfig: always a dict, keyed by group
    return ({k: v for k, v in runtime_choices.items() if isinstance(k, str) and not k.startswith("hydra")}
            if isinstance(runtime_choices, dict) else {})


def _validated(cfg: Any, origin: Any, whole: bool
               ) -> tuple[RecipeSpec, list[tuple[Stage, RunSpec]], ReadRows | None]:
    """The composed config as the typed spec, once, and each stage as its resolved spec, once (a quick run's caps
    applied between the two: what validate shows is what the run runs); every problem reported at once and exit 2
    when there are any: the schema's, then the rules between knobs (by the resolution wai.train runs), then the data
    files. ``whole`` (a run): every line of the rows file is checked, and a stage that needs its dataset's facts
    reads them from the rows (``_rundata``), which come back third for the run to go on with (None: not read)."""
    from omegaconf import OmegaConf

    from whileai.runner import schema
    from whileai.runner._datacheck import data_problems
    from whileai.runner._effective import validated_stages
    from whileai.runner.quick import rewrite

    problems = list(_STATE["problems"])
    try:
        plain = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    except Exception as exc:  # an interpolation that does not resolve
        problems.append(schema.Problem("", f"the spec does not resolve: {exc}".splitlines()[0], ""))
        report_problems(problems)
        raise SystemExit(2) from None
    quick = (lambda spec: rewrite(spec)[0]) if is_quick() else None  # a few steps, expect set aside
    data = _run_data(origin) if whole else None
    with _data_errors():
        spec, stages, found = validated_stages(schema.canonical_spec(plain), origin, rewrite=quick,
                                               facts=data.facts if data is not None else None)
    problems += found
    if spec is not None and not problems:  # the data files the spec names: they exist and a bounded sample parses
        problems += data.problems(spec) if data is not None else data_problems(spec, origin)
    if problems or spec is None:
        report_problems(problems)
        raise SystemExit(2)
    return spec, stages, data.rows if data is not None else None


def _run_data(origin: Any) -> RunData:
    """A run's rows and data-file problems, read once when first wanted (imported here: ``validate`` reads none)."""
    from whileai.runner._rundata import RunData

    return RunData(origin)


@contextlib.contextmanager
def _data_errors() -> Iterator[None]:
    """A data error is one message (file, line, what, fix) and exit 2, not Hydra's traceback."""
    from whileai.runner._datacheck import DATA_ERRORS, data_error_message

    try:
        yield
    except DATA_ERRORS as exc:
        print(data_error_message(exc), file=sys.stderr)
        _STATE["exit"] = max(_STATE["exit"], 2)
        raise SystemExit(2) from None


def _show(spec: RecipeSpec, choices: dict[str, Any]) -> int:
    """``validate``: the spec with the values the job will use, and a line saying it is valid."""
    from whileai.runner._effective import annotated_yaml, effective
    from whileai.runner._environment import environment_lines

    try:
        print(annotated_yaml(*effective(spec)), end="", flush=True)
        for line in environment_lines(spec):  # the environment's tools and turn cap, as YAML comments
            print(line, flush=True)
    except BrokenPipeError:  # `python -m whileai validate ... | head`
        from whileai.runner._closing import reader_left

        reader_left()
        return 0
    print(f"# valid: recipe={choices.get(defaults.RECIPE_GROUP) or 'none'}; nulls the job fills are shown with "
          "the value it will use (# comments); nothing was loaded or run", file=sys.stderr)
    return 0


def _run(spec: RecipeSpec, stages: list[tuple[Stage, RunSpec]], hydra_cfg: Any, choices: dict[str, Any],
         overrides: list[str], origin: Any, rows: ReadRows | None) -> int:
    """``run``: the pipeline, with where the spec came from, its stages' resolved specs and its rows where the
    validation read them; a data error is one message and exit 2."""
    from whileai.runner.pipeline import EXIT_INTERRUPTED, Context, run_spec

    multirun = str(hydra_cfg.mode) == "RunMode.MULTIRUN"
    context = Context(
        recipe=choices.get(defaults.RECIPE_GROUP),
        overrides=overrides,
        choices=choices,
        command=_command_line(),
        output_dir=Path(hydra_cfg.runtime.output_dir),
        sweep_id=f"sweep_{os.environ[defaults.TOKEN_ENV]}" if multirun else None,
        expect_lines={k: origin(f"expect.{k}") for k in spec.expect.model_fields_set},
        json=os.environ.get(_JSON_ENV) == "1",
        label=[*(typed := _label(overrides, multirun)), *_scale_words(spec.target, typed),
               *(["quick"] if is_quick() else [])],
        origin=origin,
        rows=rows,
    )
    with _data_errors():
        code = run_spec(spec, context, stages)
    _STATE["exit"] = max(_STATE["exit"], code)
    if code and (not multirun or code == EXIT_INTERRUPTED):  # Ctrl-C ends a sweep, not only its job
        raise SystemExit(code)
    return code


def _command_line() -> str:
    import shlex

    return "python -m whileai run " + " ".join(shlex.quote(a) for a in _STATE.get("argv") or sys.argv[1:])


def _hydra(argv: list[str], mode: str) -> int:
    import hydra
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()  # a second call in one process (a benchmark, a notebook) starts clean
    _STATE["exit"] = 0
    os.environ.pop(_JSON_ENV, None)
    argv, no_recipe = _no_recipe(list(argv))
    argv, _quick = pop_quick(argv)  # quick=true: whileai/runner/quick.py rewrites the validated spec in _task
    argv, cfg_job = _cfg_job(argv)
    mode = "validate" if cfg_job else mode
    names_a_recipe = no_recipe or _names_a_recipe(argv)
    argv, found = _prepare(argv, mode)
    asks_hydra = any(a in ("--help", "-h", "--hydra-help", "--info", "-i", "--cfg", "-c") for a in argv)
    if mode == "run" and not (names_a_recipe or asks_hydra):
        return refuse_bare_run(found)
    if mode == "validate":  # validate makes nothing: no run folder under the data root, no .hydra/ files
        argv = [*argv, *VALIDATE_HYDRA_OVERRIDES]
    sweep_id = f"sweep_{os.environ[defaults.TOKEN_ENV]}" if mode == "run" and _is_multirun(argv) else None
    if sweep_id:
        from whileai.runner._sweep import announce

        announce(sweep_id)
    main = hydra.main(version_base=None, config_path=str(found.conf), config_name="config")(_task)
    saved = sys.argv
    sys.argv = [f"python -m whileai {mode}", *argv]
    try:
        main()
    finally:
        sys.argv = saved
    if sweep_id:
        from whileai.runner._sweep import close

        close(sweep_id, as_json=os.environ.get(_JSON_ENV) == "1")
    return int(_STATE["exit"])


def _interrupted_by_sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"stopped by signal {signum} (SIGTERM)")


def run_main(argv: list[str] | None = None) -> int:
    """``python -m whileai run recipe=NAME [overrides] [Hydra flags] [--json]``.

    Results (the closing summary) go to stdout, progress and logs to stderr;
    ``--json`` prints the closing summary as one JSON object instead. SIGTERM (``kill``, ``timeout``, a scheduler
    ending the job) stops the hosted run as Ctrl-C does: the job runs in the platform's own process, so a runner
    killed outright would leave it training with nobody waiting on it.
    """
    import signal
    import threading

    args = list(sys.argv[1:] if argv is None else argv)
    if threading.current_thread() is not threading.main_thread():  # only the main thread may take a signal
        return _hydra(args, "run")
    previous = signal.signal(signal.SIGTERM, _interrupted_by_sigterm)
    try:
        return _hydra(args, "run")
    finally:
        signal.signal(signal.SIGTERM, previous)


def validate_main(argv: list[str] | None = None) -> int:
    """``python -m whileai validate [recipe=NAME] [overrides]``: compose and validate only; nothing is loaded."""
    return _hydra(list(sys.argv[1:] if argv is None else argv), "validate")
