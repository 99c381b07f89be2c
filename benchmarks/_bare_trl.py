"""Running the bare TRL baseline (``_bare_sft.py``) from a benchmark: one process, or several under torchrun."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPT = Path(__file__).with_name("_bare_sft.py")


def run_bare_sft(settings: dict, processes: int = 1) -> dict:
    """Train the bare baseline with ``settings`` (see ``_bare_sft.py``; ``out`` is filled in); its JSON result."""
    with tempfile.TemporaryDirectory() as out:
        path = Path(out) / "settings.json"
        path.write_text(json.dumps({**settings, "out": out}))
        launch = ([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(processes)]
                  if processes > 1 else [sys.executable])
        done = subprocess.run([*launch, str(SCRIPT), str(path)], capture_output=True, text=True,
                              env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if done.returncode != 0:
        raise RuntimeError(f"the bare TRL script failed:\n{done.stderr[-3000:]}")
    return json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])


def per_step(times: list[float]) -> float:
    """Seconds per optimizer step in the steady state: the first step's end to the last's, over the steps between
    (loading, export and the trainer's set-up fall outside it, on every side)."""
    if len(times) < 2:
        raise RuntimeError("a side made fewer than two steps: pass --steps 2 or more")
    return (times[-1] - times[0]) / (len(times) - 1)


def per_token(times: list[float], tokens: list[float]) -> float:
    """Seconds per thousand trained tokens in the steady state (TRL's cumulative ``num_tokens`` at each step's end):
    two sides whose batches draw rows of other lengths (another order, another filter) compare per token."""
    if len(times) < 2 or len(tokens) != len(times) or tokens[-1] <= tokens[0]:
        raise RuntimeError(f"cannot time tokens: {len(times)} step ends, {len(tokens)} token counts")
    return 1000 * (times[-1] - times[0]) / (tokens[-1] - tokens[0])


def run_steps(run_id: str) -> tuple[list[float], list[float]]:
    """When each of a whileai run's optimizer steps ended, and TRL's cumulative ``num_tokens`` there: its loss
    points' times and token counts (rank 0 logs one point per step as the step ends, logging_steps=1), in step
    order."""
    import whileai.simulations as wai

    points = sorted((p for p in wai.get_run(run_id)["series"] if "loss" in p["metrics"]), key=lambda p: p["step"])
    return [p["ts"] for p in points], [p["metrics"].get("num_tokens", 0.0) for p in points]


def run_step_times(run_id: str) -> list[float]:
    """When each of a whileai run's optimizer steps ended (``run_steps``' times)."""
    return run_steps(run_id)[0]
