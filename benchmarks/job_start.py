"""How fast a local job starts with the warm worker, against importing TRL and PEFT in a fresh interpreter.

    python benchmarks/job_start.py                 # three of each
    python benchmarks/job_start.py --size tiny     # one of each (the CI test's size)
    python benchmarks/job_start.py --home ~/.whileai-bench   # a data root whose kit base is built

On one data root (fresh unless --home; the kit's bases are built first and the warm process made ready, each timed
apart), in the same run:

1. baseline: ``python -c "import trl, peft"`` in a fresh interpreter, wall seconds.
2. warm start: ``wai.train`` of an SFT job on the kit's tiny base (ROWS rows, 2 steps, no held-out set), from
   the call to its first stored training point, the job forked from the warm worker. Target: at most TARGET_WARM of the baseline. The same job started
   cold (WHILEAI_WARM_WORKER=0) is reported beside it.
3. a quick recipe: ``python -m whileai run recipe=sft_tooluse quick=true`` end to end from a fresh command line,
   which hands itself to a fork of the ready warm worker (whileai/platform/launcher/warm_cli.py) as a user's does
   (at the tiny size on the untrained tiny base, ``base_model=``, so the kit's base need not be pre-trained).
   Target: at most TARGET_QUICK of the baseline. The same command run in its own interpreter (WHILEAI_WARM_CLI=0)
   is reported beside it: ``ratio_quick_handoff_over_in_process`` is what the hand-off saves.

The medians are compared. It prints one JSON object and exits 1 when a ratio misses its target.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

#: the warm start against ``import trl, peft`` alone: a fork skips the imports, leaving the job's own setup
TARGET_WARM = 0.25
#: ``quick=true`` of the main recipe, end to end, against the same imports
TARGET_QUICK = 1.0
SIZES = {"tiny": 1, "full": 3}
#: rows the timed job trains on: few, so its time to a first step is the start (imports, model load, trainer
#: setup), not tokenizing a dataset (the sample's 947 passing rows take ~10 s of that on a loaded 2-core machine)
ROWS = 32


def _import_seconds() -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import trl, peft"], check=True)
    return time.perf_counter() - began


def _first_step_seconds(dataset, base: str) -> tuple[float, str]:
    """From ``wai.train`` to the run's first stored training point; and how the job started (its log's line)."""
    import whileai.simulations as wai
    from whileai.platform.launcher.jobs import job_log

    began = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(dataset, method="sft", base_model=base, steps=2, check="off", config={"batch_size": 2})
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        record = wai.get_run(run.id)
        if any("loss" in p["metrics"] for p in record["series"]):
            break
        if record["status"] not in ("running", "queued"):
            raise RuntimeError(f"the job ended {record['status']} before a training step: {record.get('error')}")
        time.sleep(0.05)
    seconds = time.perf_counter() - began
    if run.wait(poll=0.5) != "done":
        raise RuntimeError(f"the job failed: {run.error}")
    from whileai.domain.client import get_client

    job_id = get_client().request("GET", "/jobs", params={"run_id": run.id})["jobs"][0]["id"]
    said = [line for line in job_log(job_id).read_text().splitlines() if line.startswith(f"whileai job {job_id}: ")]
    return seconds, said[0] if said else ""


def _quick_seconds(base: str | None, handoff: bool = True) -> float:
    """The quick recipe from a fresh command line: handed to the warm process, or (``handoff=False``) run in its own
    interpreter."""
    began = time.perf_counter()
    more = [f"base_model={base}"] if base else []
    env = {**os.environ, **({} if handoff else {"WHILEAI_WARM_CLI": "0"})}
    done = subprocess.run([sys.executable, "-m", "whileai", "run", "recipe=sft_tooluse", "quick=true", *more],
                          capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"the quick recipe failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", choices=sorted(SIZES), default="full")
    p.add_argument("--home", default=None, help="data root to use (default: a fresh one)")
    args = p.parse_args(argv)
    os.environ["WHILEAI_HOME"] = args.home or tempfile.mkdtemp(prefix="whileai-bench-")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.pop("WHILEAI_RUNNER_TOKEN", None)
    rounds = SIZES[args.size]

    import whileai.simulations as wai
    from whileai.kit import load_sample
    from whileai.kit._base import demo_base, tiny_model_dir
    from whileai.platform import defaults
    from whileai.platform.launcher import _warm

    began = time.perf_counter()
    base = str(tiny_model_dir())
    if args.size != "tiny":  # the tiny size runs the quick recipe on the untrained tiny base: no pre-training
        demo_base()  # the quick recipe's base: pre-trained once per data root, not part of its timing
    kit_s = time.perf_counter() - began
    dataset = wai.push([r for r in load_sample() if r["passed"]][:ROWS], name="sample-passes")
    from whileai.__main__ import WARM_PRELOAD

    _warm.preload(WARM_PRELOAD)  # as a command line starts the warm process: with the jobs' and runner's modules
    began = time.perf_counter()
    warm_pid = _warm.wait_ready(600)
    ready_s = time.perf_counter() - began
    if warm_pid is None:
        raise RuntimeError("the warm worker did not become ready in 600 s; see <data root>/warm/warm.log")

    imports, warm, cold, quick, quick_here, how = [], [], [], [], [], []
    for i in range(rounds):
        imports.append(_import_seconds())
        _warm.wait_ready(600)  # ready before each timed start (it exits after WARM_IDLE_S without a job)
        seconds, line = _first_step_seconds(dataset, base)
        warm.append(seconds)
        how.append(line)
        os.environ[defaults.WARM_WORKER_ENV] = "0"
        try:
            cold.append(_first_step_seconds(dataset, base)[0])
        finally:
            os.environ.pop(defaults.WARM_WORKER_ENV)
        _warm.wait_ready(600)
        quick.append(_quick_seconds(base if args.size == "tiny" else None))
        _warm.wait_ready(600)
        quick_here.append(_quick_seconds(base if args.size == "tiny" else None, handoff=False))
        print(f"round {i + 1}: import trl, peft {imports[-1]:.2f} s; first step warm {warm[-1]:.2f} s, cold "
              f"{cold[-1]:.2f} s; quick recipe {quick[-1]:.2f} s handed off, {quick_here[-1]:.2f} s in its own "
              "interpreter", flush=True)
    baseline = statistics.median(imports)
    warm_ratio = statistics.median(warm) / baseline
    quick_ratio = statistics.median(quick) / baseline
    print(json.dumps({
        "size": args.size, "rounds": rounds, "cores": os.cpu_count(), "load_1min": round(os.getloadavg()[0], 2),
        "kit_base_s": round(kit_s, 2), "warm_ready_s": round(ready_s, 2),
        "import_trl_peft_s": [round(x, 2) for x in imports],
        "first_step_warm_s": [round(x, 2) for x in warm],
        "first_step_cold_s": [round(x, 2) for x in cold],
        "quick_recipe_s": [round(x, 2) for x in quick],
        "quick_recipe_in_process_s": [round(x, 2) for x in quick_here],
        "warm_started": how[0],
        "ratio_warm_first_step_over_import": round(warm_ratio, 3), "target_warm": TARGET_WARM,
        "ratio_quick_recipe_over_import": round(quick_ratio, 3), "target_quick": TARGET_QUICK,
        "ratio_quick_handoff_over_in_process": round(statistics.median(quick) / statistics.median(quick_here), 3),
    }, indent=1))
    if not args.home:
        _warm.shutdown()  # a fresh data root's warm process has nothing left to start
    return 0 if warm_ratio <= TARGET_WARM and quick_ratio <= TARGET_QUICK else 1


if __name__ == "__main__":
    sys.exit(main())
