"""Shared by the runner's end-to-end tests: run ``python -m whileai ...`` and read what it left.

Runs train the kit's randomly initialised tiny model (``tiny_model_dir``, built in seconds)
with a few steps on a few tasks: these tests prove the runner's plumbing; the main job's
learning is measured by benchmarks/runner_overhead.py and the recipe's own expect block.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: small enough for CI on 2 cores: a few tasks, two optimizer steps, four held-out prompts
TINY = ["dataset.tasks=24", "holdout_rows=4", "steps=2"]


def tiny_base() -> str:
    from whileai.kit._base import tiny_model_dir

    return str(tiny_model_dir())


def whileai(*args: str, token: str | None = None, timeout: float = 600, env: dict | None = None,
            **kwargs: Any) -> subprocess.CompletedProcess:
    """``python -m whileai ARGS`` with this session's data root; ``token`` names its output folder."""
    full = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", **(env or {})}
    full.pop("WHILEAI_RUNNER_TOKEN", None)
    if token:
        full["WHILEAI_RUNNER_TOKEN"] = token
    return subprocess.run([sys.executable, "-m", "whileai", *args], capture_output=True, text=True, env=full,
                          cwd=kwargs.pop("cwd", ROOT), timeout=timeout, **kwargs)


def runs_file(token: str, job: str | None = None) -> dict[str, Any]:
    home = Path(os.environ["WHILEAI_HOME"])
    folder = home / "runner" / ("runs" if job is None else "multirun") / token
    path = folder / "whileai_runs.json" if job is None else folder / job / "whileai_runs.json"
    return json.loads(path.read_text())


def record(run_id: str) -> dict[str, Any]:
    import whileai.simulations as wai

    return wai.get_run(run_id)


def runner_record(run_id: str) -> dict[str, Any]:
    from whileai.runner.provenance import record_of

    found = record_of(record(run_id))
    assert found is not None, f"{run_id} carries the runner's record on its config"
    return found
