"""A recipe's ``expect:`` block: what its run must show, so a committed recipe is also a regression check.

Keys (each optional):

- ``status: done``: the last stage's run finished.
- ``holdout_after_min: X``: held-out pass rate after training at least X.
- ``holdout_gain_min: X``: after minus before (of the last stage) at least X.
- ``stage_gain_min: X``: the last stage's after minus the previous stage's after at least X
  (GRPO/DPO above their SFT start).
- ``no_alarm: true``: the HackMonitor raised no alarm.
- ``delta_verdict_not: [over-optimized, ...]``: delta_report's verdict is none of these.

``failures(expect, outcome, lines)`` returns one line per failed expectation,
naming the key, the file and line it was written on, the value and the number seen.
"""

from __future__ import annotations

from typing import Any

__all__ = ["failures"]


def _fmt(x: Any) -> str:
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def failures(expect: dict[str, Any], outcome: dict[str, Any], lines: dict[str, str]) -> list[str]:
    """Every failed line of ``expect`` against ``outcome`` (before, after, previous_after, status, alarms, verdict)."""
    out: list[str] = []

    def fail(key: str, seen: Any) -> None:
        where = lines.get(key) or "the spec"
        out.append(f"expect.{key}: {expect[key]!r} failed at {where}: the run shows {seen}")

    before, after = outcome.get("before"), outcome.get("after")
    if expect.get("status") is not None and outcome.get("status") != expect["status"]:
        fail("status", f"status {outcome.get('status')}")
    if expect.get("holdout_after_min") is not None:
        if after is None or after < expect["holdout_after_min"]:
            fail("holdout_after_min", f"held-out after {_fmt(after)}")
    if expect.get("holdout_gain_min") is not None:
        gain = None if before is None or after is None else after - before
        if gain is None or gain < expect["holdout_gain_min"]:
            fail("holdout_gain_min", f"held-out {_fmt(before)} -> {_fmt(after)} (gain {_fmt(gain)})")
    if expect.get("stage_gain_min") is not None:
        start = outcome.get("previous_after")
        gain = None if start is None or after is None else after - start
        if gain is None or gain < expect["stage_gain_min"]:
            fail("stage_gain_min", f"previous stage {_fmt(start)} -> this stage {_fmt(after)} (gain {_fmt(gain)})")
    if expect.get("no_alarm") and outcome.get("alarms"):
        kinds = ", ".join(sorted({str(a.get("kind") or a.get("alarm") or a) for a in outcome["alarms"]}))
        fail("no_alarm", f"{len(outcome['alarms'])} alarm(s): {kinds}")
    if expect.get("delta_verdict_not"):
        verdict = outcome.get("verdict")
        if verdict is None:
            fail("delta_verdict_not", "no delta report (set dataset.after to a file of post-training rollouts)")
        elif verdict in expect["delta_verdict_not"]:
            fail("delta_verdict_not", f"verdict {verdict}")
    return out
