"""python -m whileai <command>: the command line.

Each command lives in its own module and is imported only when it runs, so
``python -m whileai sync`` does not pay for torch. ``run`` and ``validate``
hand the rest of the command line to Hydra (whileai/runner/cli.py).
"""

from __future__ import annotations

import importlib
import sys

# command -> (module, function, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "platform": ("whileai.platform.server", "main", "start the platform server (store, API, pages, serving)"),
    "open": ("whileai.platform.server", "open_main", "open the run pages (or one run's page) in the browser, signed in"),
    "accounts": ("whileai.platform.accounts", "main", "add, list and rotate the platform's accounts and API keys"),
    "sync": ("whileai.domain.tracking", "sync_main", "deliver what was spooled while the platform was unreachable or offline"),
    "run": ("whileai.runner.cli", "run_main", "run an experiment: python -m whileai run recipe=sft_tooluse [knob=value ...]"),
    "validate": ("whileai.runner.cli", "validate_main", "compose and validate a spec only (nothing is loaded or run)"),
    "reproduce": ("whileai.runner.reproduce", "reproduce_main", "re-run a run from its stored spec: reproduce RUN_ID [overrides]"),
    "resume": ("whileai.runner.resume", "resume_main", "continue a stopped, failed or crashed run from its last checkpoint: resume RUN_ID"),
    "diff": ("whileai.runner.compare", "diff_main", "the spec keys two runs differ in, then held-out and cost: diff RUN_A RUN_B"),
    "wait": ("whileai.runner.compare", "wait_main", "follow every run of a sweep to its end and print one table: wait SWEEP"),
    "init": ("whileai.runner.init", "init_main", "write a recipe for your own data: init NAME --data FILE [--method M]"),
    "export": ("whileai.runner.export_model", "export_main", "a finished run's model: export RUN_ID --merged DIR [--gguf FILE]"),
    "runs": ("whileai.runner.runs", "runs_main", "the runs, newest first: runs [--status S] [--recipe R] [--sweep S] [--json]"),
    "show": ("whileai.runner.runs", "show_main", "one run: held-out result with n/CI/p, expect, adapter, page, spec: show RUN_ID"),
    "serve": ("whileai.runner.serving_cli", "serve_main", "serve a run's adapter or a merged export: serve RUN|FOLDER --name NAME"),
    "unserve": ("whileai.runner.serving_cli", "unserve_main", "stop serving a model name: unserve NAME"),
    "models": ("whileai.runner.serving_cli", "models_main", "the account's served models and their endpoint"),
}


#: whileai's own modules a warm process started from a command imports (whileai/platform/launcher/_warm.py), for the
#: libraries they pull in: a job's (the worker and its methods) and a forked command's (Hydra and OmegaConf through
#: the runner, the SDK's context and export). Named here because the platform, which runs the warm process, may not
#: name the layers above it.
WARM_PRELOAD = ("whileai.jobs.worker", "whileai.jobs.body", "whileai.jobs.sft", "whileai.jobs.dpo", "whileai.jobs.grpo",
                "whileai.jobs.rm", "whileai.runner.cli", "whileai.runner.pipeline", "whileai.domain.rows.context",
                "whileai.domain.export")


def _usage() -> str:
    lines = ["usage: python -m whileai <command> [options]", "", "commands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, _, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from whileai.core.package import namespace_problem

    problem = namespace_problem()  # run from a folder holding the clone as whileai/: say why nothing would work
    if problem is not None:
        print(f"python -m whileai: {problem}", file=sys.stderr)
        return 2
    from_command_line = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"unknown command {command!r}; accepted: {', '.join(COMMANDS)}\n\n{_usage()}", file=sys.stderr)
        return 2
    if from_command_line:  # a fork of the warm process runs it, when one is ready (its exit code); else here
        from whileai.platform.launcher.warm_cli import forward

        forwarded = forward(argv, "whileai", WARM_PRELOAD)
        if forwarded is not None:
            return forwarded
    module, func, _ = COMMANDS[command]
    try:
        result = getattr(importlib.import_module(module), func)(rest)
        sys.stdout.flush()  # a closed pipe is met here, not at exit after main has returned
    except BrokenPipeError:
        return _reader_left()
    return int(result or 0)


def _reader_left() -> int:
    """``python -m whileai show RUN | head``: the reader closed the pipe, so stop quietly with 0, no traceback."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush would meet the closed pipe again
    return 0


def _settle_before_exit() -> None:
    """Collect once, then freeze what is left, so the interpreter's teardown does not walk every object again.

    Teardown clears each module and runs the cycle collector between the stages, each pass over every object a
    command with transformers imported holds (hundreds of thousands), several times the cost of the one
    collection here, which still finalises the cyclic garbage (files, connections) while every module
    is alive. The atexit handlers (the tracker's last flush) run after this, as before. Only for ``python -m
    whileai``: a process that calls ``main`` and goes on (a test) keeps its collector as it was.
    """
    import gc

    gc.collect()
    gc.freeze()


if __name__ == "__main__":
    code = main()
    _settle_before_exit()
    sys.exit(code)
