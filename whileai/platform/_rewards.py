"""Which ``python:MODULE:FUNCTION`` rewards a platform runs: its operator's rule for code named by an account.

A ``python:`` reward is code the job imports and calls. On the embedded platform the
account is the local user and the module is theirs: it runs, imported from the
directory the user launched from (the job row's ``reward_path``, written here and
never taken from a request). A shared server runs only the modules its operator
lists in REWARD_MODULES_ENV (``reward_modules`` in config.json), a module or a
package and everything under it, importable in the server's own environment; with
none listed, it runs none.
"""

from __future__ import annotations

import os

from whileai.core.paths import setting
from whileai.core.spec import RunSpec
from whileai.core import defaults

__all__ = ["allowed_reward_modules", "reward_code_problems", "reward_path"]

_PREFIX = "python:"


def allowed_reward_modules() -> list[str]:
    """The modules (and packages) the operator lets a shared server run as rewards."""
    listed = setting(defaults.REWARD_MODULES_ENV, "reward_modules")
    return [part.strip() for part in listed.split(",") if part.strip()]


def _python_rewards(spec: RunSpec) -> list[str]:
    """The spec's ``python:`` rewards (only GRPO's spec has a ``reward``)."""
    return [r for r in getattr(spec, "reward", None) or [] if r.startswith(_PREFIX)]


def reward_code_problems(spec: RunSpec, embedded: bool) -> list[str]:
    """Why this platform will not run the spec's ``python:`` rewards; empty when it will (or there are none)."""
    if embedded:
        return []
    allowed = allowed_reward_modules()
    problems = []
    for ref in _python_rewards(spec):
        module = ref[len(_PREFIX):].rpartition(":")[0]
        if not any(module == a or module.startswith(a + ".") for a in allowed):
            now = ", ".join(allowed) if allowed else "none"
            problems.append(f"reward={ref!r}: this server runs only the reward modules its operator allows "
                            f"({defaults.REWARD_MODULES_ENV}, now: {now}); ask the operator to add {module!r}, or "
                            "train with reward=first_action, fine_grained or rm")
    return problems


def reward_path(spec: RunSpec, embedded: bool) -> str | None:
    """The directory the job imports the user's reward module from (the job row's ``reward_path``) where the
    embedded platform runs one: the working directory of the user's own process, which this code runs in."""
    if embedded and _python_rewards(spec):
        return os.getcwd()
    return None
