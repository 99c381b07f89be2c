"""benchmarks/episode_step.py at its smallest size: the episode-GRPO job and the bare TRL environment_factory script
each train two steps in the kit environment, and the benchmark prints both sides' figures as one JSON object.

The ratio is not checked here: speed is the benchmark's to measure at full size (benchmarks/MEASURED.md), not a
timed test's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from whileai.domain import defaults as domain_defaults

ROOT = Path(__file__).resolve().parents[1]

#: two steps (the fewest a steady state is read over), one round, one SFT step of warm-up (the default path, kept
#: short), two generations of short completions
SMALLEST = ["--steps", "2", "--rounds", "1", "--warm-steps", "1", "--generations", "2", "--max-len", "64"]


@pytest.mark.slow
def test_the_benchmark_prints_both_sides_seconds_per_step_as_json():
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", "PYTHONWARNINGS": "ignore"}
    env.pop("WHILEAI_HOME", None)  # the benchmark makes its own data root
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "episode_step.py"), *SMALLEST], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode in (0, 1), done.stdout + done.stderr[-4000:]  # 1: over the target, which is not tested
    lines = done.stdout.splitlines()
    assert lines[0].startswith("round 1: framework ") and "bare TRL" in lines[0], done.stdout
    figures = json.loads("\n".join(lines[next(i for i, line in enumerate(lines) if line.startswith("{")):]))
    assert figures["steps"] == 2 and figures["environment"] == "kit" and figures["prompts"] > 0
    assert figures["settings"]["max_turns"] == domain_defaults.EPISODE_MAX_TURNS
    framework, bare = figures["framework_seconds_per_step"], figures["bare_trl_seconds_per_step"]
    assert len(framework) == len(bare) == 1 and framework[0] > 0 and bare[0] > 0
    # the ratio is of the unrounded seconds, the seconds printed rounded: equal to a thousandth
    assert figures["ratio_min_over_min"] == pytest.approx(framework[0] / bare[0], abs=1.5e-3)
    assert figures["target"] == 1.05
    spans = figures["span_seconds_per_step"]
    assert len(spans["framework"]) == len(spans["bare_trl"]) == 1 and min(spans["framework"] + spans["bare_trl"]) > 0
