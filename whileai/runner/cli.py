"""``python -m whileai run`` and ``validate``: one ``@hydra.main`` function behind both.

The dispatcher (``whileai/__main__.py``) pops the subcommand and hands the rest
of the command line here; Hydra parses it, so ``--help``, ``--cfg job``,
``-m``/``--multirun`` and ``hydra/launcher=...`` are Hydra's own. Only
``--recipes DIR`` is read (and removed) first, because it decides which
recipes Hydra can see. Key typos and unknown group options are caught before
Hydra composes, so they are reported with the nearest name and together with
every problem of the composed spec.

This is the only module (with ``_origin``) that touches Hydra and OmegaConf:
the spec leaves here as a plain dict.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from . import defaults
from ._locate import data_root, new_token, register, sources

__all__ = ["run_main", "validate_main", "register_resolvers", "new_token"]

#: set by run_main/validate_main for the task function (the same process; a joblib worker re-reads the env)
_STATE: dict[str, Any] = {"mode": "run", "problems": [], "found": None, "exit": 0, "argv": []}
_MODE_ENV = "WHILEAI_RUNNER_MODE"

#: What ``validate`` adds to Hydra's overrides so that it leaves no folder behind: no ``.hydra/``
#: files, and a run directory that already exists (the working directory, which Hydra does not
#: change: conf/config.yaml sets hydra.job.chdir false and job logging to none, so no log file).
VALIDATE_HYDRA_OVERRIDES = ("hydra.output_subdir=null", "hydra.run.dir=.")


def _knob_default(name: str, *, _root_: Any) -> Any:
    from whileai.simulations import defaults as sdk

    table = sdk.TRAINING_KNOBS if name in sdk.TRAINING_KNOBS else sdk.TRAINING_HOST_KEYS
    method = _root_.get("method")
    spec = table.get(name, {}).get(method)
    if spec is None:
        raise ValueError(f"wai.knob:{name}: {name} is not read by method={method}")
    return spec["default"]


#: where ``${wai.const:NAME}`` looks, in order: settings live with their owner (docs/architecture.md)
_CONST_HOMES = ("whileai.simulations.defaults", "whileai.kit.defaults", "whileai.platform.defaults",
                "whileai.jobs.defaults", "whileai.core.defaults")


def _const(name: str) -> Any:
    from whileai.core import defaults as core
    from whileai.jobs import defaults as jobs
    from whileai.kit import defaults as kit
    from whileai.platform import defaults as platform
    from whileai.simulations import defaults as sdk

    for home in (sdk, kit, platform, jobs, core):
        if hasattr(home, name):
            value = getattr(home, name)
            return list(value) if isinstance(value, tuple) else value
    where = ", ".join(m.replace(".", "/") + ".py" for m in _CONST_HOMES)
    raise ValueError(f"wai.const:{name}: no such constant in {where}")


def register_resolvers() -> None:
    """``${wai.knob:NAME}`` (the method's default from TRAINING_KNOBS), ``${wai.const:NAME}`` (a constant of a defaults module, _CONST_HOMES)."""
    from omegaconf import OmegaConf

    from .schema import HOST_KEYS, KNOBS

    OmegaConf.register_new_resolver("wai.knob", _knob_default, replace=True)
    OmegaConf.register_new_resolver("wai.const", _const, replace=True)
    OmegaConf.register_new_resolver("wai.knob_names", lambda: ", ".join((*KNOBS, *HOST_KEYS)), replace=True)


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
        else:
            out.append(arg)
    return out, chosen


def _prepare(argv: list[str], mode: str) -> list[str]:
    """Environment, resolvers, recipes; returns the argv Hydra should parse."""
    from whileai.simulations import defaults as sdk

    from . import schema
    from ._origin import check_overrides

    argv, user = _pop_recipes_flag(list(argv))
    argv = [schema.canonical_override(a) for a in argv]  # loraRank=8 means lora_rank=8 (whileai.core.spec.ALIASES)
    if user:
        os.environ[defaults.RECIPES_ENV] = str(Path(user).expanduser().resolve())  # joblib workers read it too
    os.environ.setdefault(sdk.HOME_ENV, str(data_root()))  # Hydra's folders go under the data root
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
    dropped = set(overrides) - set(kept)
    _STATE.update(mode=mode, problems=problems, found=found, argv=list(argv))
    if problems and ("-m" in flags or "--multirun" in flags or "--help" in flags or "-h" in flags):
        _report(problems)
        raise SystemExit(2)
    return [a for a in argv if a not in dropped]


def _report(problems: list[Any]) -> None:
    print(f"whileai: the spec has {len(problems)} problem(s); nothing was loaded or run:", file=sys.stderr)
    for problem in problems:
        print(f"  - {problem}", file=sys.stderr)


def _task(cfg: Any) -> Any:
    """The one Hydra task: compose -> plain dict -> validate -> (validate: print | run: the pipeline)."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from . import schema
    from ._origin import Origins

    import logging

    register_resolvers()  # a joblib worker is a fresh process
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per platform request is noise here
    mode = os.environ.get(_MODE_ENV, _STATE["mode"])
    found = _STATE["found"] or sources()
    hydra_cfg = HydraConfig.get()
    choices = {k: v for k, v in OmegaConf.to_container(hydra_cfg.runtime.choices).items() if not k.startswith("hydra")}
    overrides = list(hydra_cfg.overrides.task)
    origin = Origins(found, choices, overrides)
    problems = list(_STATE["problems"])
    try:
        plain = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    except Exception as exc:  # an interpolation that does not resolve
        problems.append(schema.Problem("", f"the spec does not resolve: {exc}".splitlines()[0], ""))
        _report(problems)
        raise SystemExit(2) from None
    plain = schema.canonical_spec(plain)
    problems += schema.check(plain, origin)
    if not problems:  # the data files the spec names: they exist and a bounded sample parses
        from ._datacheck import data_problems

        problems += data_problems(plain, origin)
    if problems:
        _report(problems)
        raise SystemExit(2)
    if mode == "validate":
        print(OmegaConf.to_yaml(OmegaConf.create(plain)), end="")
        print(f"# valid: recipe={choices.get(defaults.RECIPE_GROUP)}; nothing was loaded or run", file=sys.stderr)
        return 0
    from .pipeline import EXIT_INTERRUPTED, Context, run_spec

    multirun = str(hydra_cfg.mode) == "RunMode.MULTIRUN"
    context = Context(
        recipe=choices.get(defaults.RECIPE_GROUP),
        overrides=overrides,
        choices=choices,
        command=_command_line(),
        output_dir=Path(hydra_cfg.runtime.output_dir),
        sweep_id=f"sweep_{os.environ[defaults.TOKEN_ENV]}" if multirun else None,
        expect_lines={k: origin(f"expect.{k}") for k in (plain.get("expect") or {})},
    )
    from ._datacheck import DATA_ERRORS, data_error_message

    try:
        code = run_spec(plain, context)
    except DATA_ERRORS as exc:  # one message (file, line, what, fix), not Hydra's traceback
        print(data_error_message(exc), file=sys.stderr)
        _STATE["exit"] = max(_STATE["exit"], 2)
        raise SystemExit(2) from None
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
    argv = _prepare(argv, mode)
    if mode == "validate":  # validate makes nothing: no run folder under the data root, no .hydra/ files
        argv = [*argv, *VALIDATE_HYDRA_OVERRIDES]
    found = _STATE["found"]
    main = hydra.main(version_base=None, config_path=str(found.conf), config_name="config")(_task)
    saved = sys.argv
    sys.argv = [f"python -m whileai {mode}", *argv]
    try:
        main()
    finally:
        sys.argv = saved
    return int(_STATE["exit"])


def run_main(argv: list[str] | None = None) -> int:
    """``python -m whileai run [recipe=NAME] [overrides] [Hydra flags]``."""
    return _hydra(list(sys.argv[1:] if argv is None else argv), "run")


def validate_main(argv: list[str] | None = None) -> int:
    """``python -m whileai validate [recipe=NAME] [overrides]``: compose and validate only; nothing is loaded."""
    return _hydra(list(sys.argv[1:] if argv is None else argv), "validate")
