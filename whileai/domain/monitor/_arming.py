"""Which of HackMonitor's alarms can fire, and in words why each one that cannot is off.

Three checks compare the proxy with the gold judge (``divergence``,
``gold_decline`` and the n-gram ``feature`` scan); without gold they would
compare the reward with itself, so they are off. The gold-free checks are
``length``, ``kl`` (only with a budget) and ``format``, the format-marker check,
which covers markers when the feature scan cannot (it is off while the scan
runs, since the scan reads every marker beyond gold already). A caller may turn
any check off with ``disarm={kind: reason}``; the reason is what the summary and
the report show.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from whileai.domain.monitor._report import ALARM_KINDS

__all__ = ["ARMED", "GOLD_CHECKS", "SHARED_ALPHA", "check_disarm", "armed_state"]

#: The value of an armed check in ``summary()["armed"]``.
ARMED = "armed"

#: Checks that need a gold judge.
GOLD_CHECKS = ("divergence", "gold_decline", "feature")

#: Checks that split MONITOR_ALPHA between them (the KL bound and the feature scan spend their own).
SHARED_ALPHA = ("divergence", "gold_decline", "length", "format")

_NO_GOLD = {
    "divergence": "no gold judge, so divergence would compare the reward with itself",
    "gold_decline": "no gold judge, so there is no independent score to see fall",
    "feature": ("no gold judge, so a phrase the reward pays for cannot be told from one that does the task "
                "(the format-marker check runs instead)"),
}


def check_disarm(disarm: Any) -> tuple[dict[str, str], list[str]]:
    """``disarm`` as {kind: reason}, and the problems with it (for the constructor's one error)."""
    if disarm is None:
        return {}, []
    if not isinstance(disarm, Mapping):
        return {}, [f"disarm={disarm!r} must be a mapping of alarm kind to the reason it is off, e.g. "
                    "{'divergence': 'the reward is the strictest judge there is'}; leave it None to arm every "
                    "check that can run"]
    out: dict[str, str] = {}
    problems: list[str] = []
    for kind, reason in disarm.items():
        if kind not in ALARM_KINDS:
            problems.append(f"disarm names {kind!r}; accepted kinds: {list(ALARM_KINDS)}")
        elif not isinstance(reason, str) or not reason.strip():
            problems.append(f"disarm[{kind!r}]={reason!r} must be a sentence saying why the check is off "
                            "(summary()['armed'] shows it)")
        else:
            out[kind] = reason.strip()
    return out, problems


def _off(reason: str) -> str:
    return reason if reason.lower().startswith("off") else f"off: {reason}"


def armed_state(*, has_gold: bool, kl_budget: float | None, disarm: Mapping[str, str]) -> dict[str, str]:
    """Alarm kind -> ``"armed"`` or ``"off: <why>"``; a caller's reason wins over the monitor's own."""
    state: dict[str, str] = {}
    for kind in ALARM_KINDS:
        if kind in disarm:
            state[kind] = _off(disarm[kind])
        elif kind in GOLD_CHECKS and not has_gold:
            state[kind] = _off(_NO_GOLD[kind])
        elif kind == "kl" and kl_budget is None:
            state[kind] = _off("no kl_budget, so the KL is measured and logged but never alarmed; pass "
                               "kl_budget= in nats of sequence KL to arm it")
        else:
            state[kind] = ARMED
    if state["feature"] == ARMED and state["format"] == ARMED:
        state["format"] = _off("the feature scan reads every format marker beyond gold already")
    return state
