"""Does a hosted SFT run teach the kit's demo base the sample task? Held-out pass rate before and after.

    python benchmarks/training_sample_learns.py               # a fresh data root, the kit recipe
    python benchmarks/training_sample_learns.py --home ~/.whileai-bench --steps 300
    python benchmarks/training_sample_learns.py --base DIR   # a saved base, with the kit's SFT recipe

Pushes the shipped sample dataset, cuts it by task (datasets.cut), pushes the
train side's passing rows and runs ``wai.train(method="sft", holdout=<the cut's
holdout>, wait=True)`` on the embedded platform: a detached worker, LoRA on the
demo base with the kit's recipe (KIT_SFT_*). The baseline is the same base's
held-out first-action pass rate before training, measured by the same job. The
target is near 0 before and at least KIT_SFT_TARGET_PASS_RATE (0.5) after.
Building the demo base (once per data root) is timed separately.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--home", default=None, help="data root to use (default: a fresh temporary one)")
    p.add_argument("--steps", type=int, default=None, help="optimizer steps (default: KIT_SFT_STEPS)")
    p.add_argument("--holdout-rows", type=int, default=None, help="held-out prompts scored (default: all)")
    p.add_argument("--timeout", type=float, default=1800.0)
    p.add_argument("--base", default=None,
                   help="a saved base directory instead of the demo base (trained with the kit's SFT recipe)")
    args = p.parse_args(argv)
    os.environ["WHILEAI_HOME"] = args.home or tempfile.mkdtemp(prefix="whileai-bench-")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import whileai.simulations as wai
    from whileai.kit import demo_base, load_sample
    from whileai.kit import defaults

    t = time.perf_counter()
    if args.base is None:
        demo_base()  # the job would build it too; built here so its time is not counted as training
    base_seconds = time.perf_counter() - t
    recipe: dict = {}
    if args.base is not None:  # a directory gets our generic defaults; give it the kit's recipe instead
        recipe = {"base_model": args.base, "learning_rate": defaults.KIT_SFT_LR}
        config_extra = {"batch_size": defaults.KIT_SFT_BATCH, "lora_rank": defaults.KIT_SFT_LORA_R,
                        "lora_alpha": defaults.KIT_SFT_LORA_ALPHA}
    else:
        config_extra = {}

    data = wai.push(load_sample(), name="sample")
    train_side, held = wai.datasets.cut(data, seed=0)
    passes = wai.push([r for r in wai.datasets.load_rows(train_side) if r["passed"]], name="sample:train:passes")
    config = {**config_extra, **({"holdout_rows": args.holdout_rows} if args.holdout_rows else {})}
    steps = args.steps if args.steps is not None else (defaults.KIT_SFT_STEPS if args.base else None)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(passes, method="sft", holdout=held, steps=steps, config=config, **recipe)
    status = run.wait(timeout=args.timeout)
    wall = time.perf_counter() - t
    training = run.training or {}
    result = {
        "status": status,
        "error": (run.error or "").splitlines()[0] if run.error else None,
        "before": training.get("before"),
        "after": training.get("after"),
        "target_after": defaults.KIT_SFT_TARGET_PASS_RATE,
        "holdout_prompts": training.get("holdout_prompts"),
        "rows": training.get("rows"),
        "steps": training.get("steps"),
        "train_seconds": training.get("train_seconds"),
        "job_seconds": training.get("seconds"),
        "wall_seconds_from_train_call": round(wall, 1),
        "demo_base_build_seconds": round(base_seconds, 1) if args.base is None else None,
        "base": run.config.get("base_model"),
        "run": run.id,
        "config": {k: run.config.get(k) for k in ("learning_rate", "steps", "batch_size", "lora_rank", "lora_alpha")},
    }
    print(json.dumps(result, indent=1))
    ok = status == "done" and (training.get("after") or 0) >= defaults.KIT_SFT_TARGET_PASS_RATE
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
