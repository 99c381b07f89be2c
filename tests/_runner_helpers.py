"""Shared by the runner's end-to-end tests: run ``python -m whileai ...`` and read what it left.

Runs train the kit's randomly initialised tiny model (``tiny_model_dir``, built in seconds)
with a few steps on a few tasks: these tests prove the runner's plumbing; the main job's
learning is measured by benchmarks/runner_overhead.py and the recipe's own expect block.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
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


def without_bfcl_eval() -> dict[str, str]:
    """Environment for a ``whileai`` subprocess that finds no installed bfcl-eval, even where this machine has it.

    A plain module named ``bfcl_eval`` first on the import path hides the package (its spec has no
    package folder, so no data folder is found): the run reads the committed sample and says it is a
    smoke run, as on a machine without bfcl-eval. BFCL_DATA is cleared for the same reason.
    """
    stub = Path(tempfile.gettempdir()) / f"whileai-no-bfcl-eval-{os.getpid()}"
    stub.mkdir(exist_ok=True)
    (stub / "bfcl_eval.py").write_text('"""Stands in for an absent bfcl-eval (tests/_runner_helpers.py)."""\n')
    path = os.pathsep.join(p for p in (str(stub), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "BFCL_DATA": ""}


@contextlib.contextmanager
def runner_in_training(*args: str, token: str, timeout: float = 300) -> Iterator[tuple[subprocess.Popen, str]]:
    """``python -m whileai run ARGS`` started under ``token``: ``(its process, its run's id)`` once the run has
    stored a trained step (``timeout`` covers cold imports on a busy CPU); killed on the way out if still running."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WHILEAI_RUNNER_TOKEN": token, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.Popen([sys.executable, "-m", "whileai", "run", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    path = Path(os.environ["WHILEAI_HOME"]) / "runner" / "runs" / token / "whileai_runs.json"
    run_id = None
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not (run_id and (record(run_id).get("step") or 0) >= 1):
            if path.exists():
                run_id = runs_file(token)["runs"][0]["id"]
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.5)
        assert run_id is not None, "the run started training"
        yield proc, run_id
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def ctrl_c(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """SIGINT to the runner, as Ctrl-C sends it; its output once it has exited, which must be with 130."""
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 130, out + err
    return out, err


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


#: per method, the selection report's count of what the trainer gets, and the export report's
_COUNTED = {"sft": ("rows", "rows_out"), "grpo": ("prompts", "rows_out"), "dpo": ("pairs", "pairs_out"),
            "rm": ("pairs", "pairs_out")}


def assert_counts(run_id: str) -> dict[str, Any]:
    """The selection report, the export report and the worker log each count what the trainer received.

    ``training["trainer_received"]`` is ``len(trainer.train_dataset)`` read in the job after training: the
    rows (SFT), prompts (GRPO) or pairs (DPO, RM) the TRL trainer was given.
    """
    from whileai.platform.launcher.jobs import job_log
    from whileai.domain.client import get_client

    run = record(run_id)
    summary = run["summary"]
    training = summary["training"]
    method = training["method"]
    received = training["trainer_received"]
    chosen, exported = _COUNTED[method]
    too_long = training.get("left_out_too_long") or 0  # the job leaves out what exceeds the model's context, and says so
    near = summary["selection"].get("near_miss_pairs") or 0  # rm: the job adds these to the rows' pairs
    assert summary["selection"][chosen] + near == received + too_long, (method, summary["selection"], received, too_long)
    assert summary["export"][exported] == received + too_long, (method, summary["export"], received, too_long)
    if method in ("dpo", "rm"):
        assert training["pairs"] == received and training["rows"] == 2 * received
    job = get_client().request("GET", "/jobs", params={"run_id": run_id})["jobs"][0]
    log = Path(job_log(job["id"])).read_text()
    unit = {"sft": "rows", "grpo": "prompts"}.get(method, "pairs")
    assert f"trained {method} on {received} {unit} " in log, log
    given = training["holdout_rows_given"]
    measured = training["holdout_prompts"]
    what = "pairs" if training["metric"] in ("pair_accuracy", "row_accuracy") else "distinct prompts"
    assert f"held-out after: {training['metric']} {training['after']} on {measured} {what}" in log, log
    assert f"(of {given} held-out rows)" in log and "held-out set (" not in log, log
    return run


def cached_hub_base(root: Path, name: str) -> dict[str, str]:
    """An environment whose Hugging Face cache holds a snapshot of hub id ``name`` (its config.json only), as a
    pre-fetched base would: ``validate`` accepts a hub base only from the cache, since nothing is downloaded here.
    The hub itself cannot be reached from this machine, so the cache's layout stands in for a real fetch."""
    repo = root / "hub" / ("models--" + name.replace("/", "--"))
    (repo / "snapshots" / "0").mkdir(parents=True, exist_ok=True)
    (repo / "snapshots" / "0" / "config.json").write_text('{"model_type": "llama"}')
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text("0")
    return {"HF_HUB_CACHE": str(root / "hub")}
