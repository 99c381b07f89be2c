"""Which user code a platform runs: ``python:MODULE:FUNCTION`` rewards and ``python:MODULE:CLASS`` environments.

Both are code the job imports and calls: a reward on every completion, an environment's tools on every turn of
every episode. One rule covers both. On the embedded platform the account is the local user and the module is
theirs: it runs, imported from the directory the user launched from (the job row's ``reward_path``, written here
and never taken from a request). A shared server runs only the modules its operator lists in REWARD_MODULES_ENV
(``reward_modules`` in config.json), a module or a package and everything under it, importable in the server's
own environment; with none listed, it runs none.
"""

from __future__ import annotations

import os

from whileai.core.paths import setting
from whileai.core.spec import PYTHON_PREFIX, RunSpec, is_python_ref
from whileai.core import defaults

__all__ = ["allowed_reward_modules", "reward_code_problems", "reward_path", "user_code"]


def allowed_reward_modules() -> list[str]:
    """The modules (and packages) the operator lets a shared server run as user code (rewards, environments)."""
    listed = setting(defaults.REWARD_MODULES_ENV, "reward_modules")
    return [part.strip() for part in listed.split(",") if part.strip()]


def user_code(spec: RunSpec) -> list[tuple[str, str]]:
    """The spec's user code as ``(knob, value)``: each ``python:`` reward (GRPO's ``reward``) and a ``python:``
    environment (SFT's and GRPO's ``environment``)."""
    refs = [("reward", r) for r in getattr(spec, "reward", None) or [] if is_python_ref(r)]
    environment = getattr(spec, "environment", None)
    if is_python_ref(environment):
        refs.append(("environment", environment))
    return refs


def reward_code_problems(spec: RunSpec, embedded: bool) -> list[str]:
    """Why this platform will not run the spec's user code; empty when it will (or there is none)."""
    if embedded:
        return []
    allowed = allowed_reward_modules()
    problems = []
    for knob, ref in user_code(spec):
        module = ref[len(PYTHON_PREFIX):].rpartition(":")[0]
        if not any(module == a or module.startswith(a + ".") for a in allowed):
            now = ", ".join(allowed) if allowed else "none"
            instead = ("train with reward=first_action, fine_grained or rm" if knob == "reward"
                       else "play environment=kit or bfcl")
            problems.append(f"{knob}={ref!r}: this server runs only the code modules its operator allows as "
                            f"rewards and environments ({defaults.REWARD_MODULES_ENV}, now: {now}); ask the "
                            f"operator to add {module!r}, or {instead}")
    return problems


def reward_path(spec: RunSpec, embedded: bool) -> str | None:
    """The directory the job imports the user's modules from (the job row's ``reward_path``) where the embedded
    platform runs one: the working directory of the user's own process, which this code runs in."""
    if embedded and user_code(spec):
        return os.getcwd()
    return None
