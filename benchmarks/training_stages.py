"""Do GRPO and DPO started from an SFT run move the held-out pass rate above their SFT start?

    python benchmarks/training_stages.py                          # SFT 80 steps, then GRPO 30 and DPO 30 from it
    python benchmarks/training_stages.py --sft-steps 60 --holdout-rows 40 --dpo-steps 40 --dpo-lr 5e-4
    python benchmarks/training_stages.py --home ~/.whileai-bench --only dpo

Pushes the shipped sample set, cuts it by task (datasets.cut), trains SFT on
the train side's passing rows from the kit's demo base, then GRPO and DPO on
the whole train side with ``init_from=<the SFT run>`` on the embedded platform
(detached workers, one after the other). The baseline of each stage is its own
"before": the held-out first-action pass rate of the policy it starts from,
measured by the same job on the same held-out prompts, so before of GRPO and
DPO is the SFT run's after. Prints one JSON line per stage: before, after,
seconds of training and of the whole job. The bare base passes nothing
(KIT_BASE_* measured 0.000), which is why a GRPO run from it cannot learn: every
sampled group is unanimous.

Measured on the shared 2-core machine under load (1 thread per job; all 73
held-out prompts unless said): SFT 80 steps 0.000 -> 0.178; DPO 30 steps from
it 0.178 -> 0.233 at lr 1e-4 and 0.178 -> 0.247 at 3e-4 (~110 s of training);
from SFT 60 (40 prompts, 0.125) DPO 40 steps gained nothing at 1e-4, 0.175 at
3e-4, 0.200 at 5e-4. GRPO 30 steps never ended above its start: 1e-4 left every
start unchanged (0.178, 0.125, 0.795), higher rates or a lower temperature moved
a strong start down (SFT 300, 0.795 -> 0.753 at 5e-4, 0.466 at 1e-3 with 8
generations); its sampled reward stayed far under the greedy held-out rate and
most groups were unanimous.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings


def _stage(wai, dataset, held, **kwargs) -> dict:
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(dataset, holdout=held, **kwargs)
    status = run.wait(timeout=3600)
    training = run.training or {}
    return {
        "method": kwargs["method"],
        "run": run.id,
        "status": status,
        "error": (run.error or "").splitlines()[0] if run.error else None,
        "init_from": run.config.get("init_from"),
        "before": training.get("before"),
        "after": training.get("after"),
        "holdout_prompts": training.get("holdout_prompts"),
        "steps": training.get("steps"),
        "train_seconds": training.get("train_seconds"),
        "job_seconds": training.get("seconds"),
        "wall_seconds": round(time.perf_counter() - t, 1),
        "knobs": {k: run.config.get(k) for k in ("learning_rate", "beta", "generations", "temperature")
                  if run.config.get(k) is not None},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--home", default=None, help="data root to use (default: a fresh temporary one)")
    p.add_argument("--sft-steps", type=int, default=80)
    p.add_argument("--grpo-steps", type=int, default=30)
    p.add_argument("--grpo-lr", type=float, default=1e-4)
    p.add_argument("--generations", type=int, default=4)
    p.add_argument("--dpo-steps", type=int, default=30)
    p.add_argument("--dpo-lr", type=float, default=3e-4)
    p.add_argument("--holdout-rows", type=int, default=None,
                   help="held-out prompts scored per measurement (default: all of them, 73 on the sample)")
    p.add_argument("--only", choices=("grpo", "dpo"), default=None, help="run one of the two stages")
    args = p.parse_args(argv)
    os.environ["WHILEAI_HOME"] = args.home or tempfile.mkdtemp(prefix="whileai-bench-")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import whileai.simulations as wai
    from whileai.kit import demo_base, load_sample

    demo_base()  # built here (once per data root) so its time is not counted in a stage
    data = wai.push(load_sample(), name="sample")
    train_side, held = wai.datasets.cut(data, seed=0)
    passes = wai.push([r for r in wai.datasets.load_rows(train_side) if r["passed"]], name="sample:train:passes")
    config = {"holdout_rows": args.holdout_rows} if args.holdout_rows else {}
    sft = _stage(wai, passes, held, method="sft", steps=args.sft_steps, config=config)
    print(json.dumps(sft), flush=True)
    if sft["status"] != "done":
        return 1
    results = [sft]
    if args.only in (None, "grpo"):  # the HackMonitor is off here: it measures held-out on its own schedule
        results.append(_stage(wai, train_side, held, method="grpo", init_from=sft["run"], steps=args.grpo_steps,
                              generations=args.generations, learning_rate=args.grpo_lr,
                              config={**config, "monitor": False}))
        print(json.dumps(results[-1]), flush=True)
    if args.only in (None, "dpo"):
        results.append(_stage(wai, train_side, held, method="dpo", init_from=sft["run"], steps=args.dpo_steps,
                              learning_rate=args.dpo_lr, config=config))
        print(json.dumps(results[-1]), flush=True)
    return 0 if all(r["status"] == "done" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
