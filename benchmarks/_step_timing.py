"""Timing a whileai training job against a bare TRL script per optimizer step, for the GRPO step benchmarks.

Each round starts the framework's run and waits for it, then runs the bare script in a fresh interpreter; rounds
alternate the sides so a slower stretch of a shared machine falls on both. Per side and round, seconds per
optimizer step is read between the first step's log and the last one's (``_bare_trl.per_step``), so set-up and the
first step's warm-up are not counted, and over the whole span, set-up included. The fastest round of each side is
compared.

    timings = alternate(rounds, steps, start_run=lambda: wai.train(...), bare=lambda: run_bare(code))
    print(json.dumps({..., **timings.figures(TARGET_RATIO)}, indent=1))
    sys.exit(0 if timings.ratio() <= TARGET_RATIO else 1)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from _bare_trl import per_step  # the steady state both sides are read over


def run_bare(code: str) -> dict[str, Any]:
    """Run ``code`` (a bare TRL script) in a fresh interpreter, warnings off; the JSON object of its last line
    (``train_seconds``, ``steps``, ``step_ts``: each optimizer step's log time)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if done.returncode != 0:
        raise RuntimeError(f"the bare TRL script failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def framework_side(run: Any, steps: int) -> tuple[float, float, int]:
    """``(span, steady, points)`` of a started whileai run: seconds per step over its ``training["train_seconds"]``
    and between its loss points (stamped at each step's log), and how many points it logged. Raises when the job
    failed."""
    import whileai.simulations as wai

    if run.wait(poll=2) != "done":
        raise RuntimeError(f"the framework's job failed: {run.error}")
    series = wai.get_run(run.id)["series"]
    steady = per_step([p["ts"] for p in series if "loss" in p["metrics"]])
    return run.training["train_seconds"] / steps, steady, len(series)


@dataclass
class Timings:
    """Seconds per optimizer step of each round, per side: between steps (``steady``) and over the span."""

    framework: list[float] = field(default_factory=list)
    bare: list[float] = field(default_factory=list)
    framework_span: list[float] = field(default_factory=list)
    bare_span: list[float] = field(default_factory=list)

    def ratio(self) -> float:
        """The framework's fastest round over the bare script's, between steps: what the target bounds."""
        return min(self.framework) / min(self.bare)

    def figures(self, target: float) -> dict[str, Any]:
        """Both sides' figures per round, the ratio of the fastest and ``target``, as the benchmarks print them."""
        return {
            "framework_seconds_per_step": [round(x, 3) for x in self.framework],
            "bare_trl_seconds_per_step": [round(x, 3) for x in self.bare],
            "ratio_min_over_min": round(self.ratio(), 3), "target": target,
            "span_seconds_per_step": {"framework": [round(x, 3) for x in self.framework_span],
                                      "bare_trl": [round(x, 3) for x in self.bare_span],
                                      "ratio_min_over_min": round(min(self.framework_span) / min(self.bare_span), 3)},
        }


def alternate(rounds: int, steps: int, start_run: Callable[[], Any],
              bare: Callable[[], dict[str, Any]]) -> Timings:
    """``rounds`` rounds of the framework's run (``start_run`` starts it, warnings off) then the bare script
    (``bare`` runs it), each of ``steps`` steps; prints a line a round and returns the timings."""
    timings = Timings()
    for i in range(rounds):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = start_run()
        span, steady, points = framework_side(run, steps)
        timings.framework_span.append(span)
        timings.framework.append(steady)
        done = bare()
        timings.bare_span.append(done["train_seconds"] / steps)
        timings.bare.append(per_step(done["step_ts"]))
        print(f"round {i + 1}: framework {span:.2f} s/step over its span, {steady:.2f} between steps ({points} "
              f"points logged); bare TRL {timings.bare_span[-1]:.2f} and {timings.bare[-1]:.2f}", flush=True)
    return timings
