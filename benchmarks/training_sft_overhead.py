"""The hosted SFT job's training phase against a bare TRL script on the same model and rows, in the same run.

    python benchmarks/training_sft_overhead.py                 # 60 steps, 2 rounds
    python benchmarks/training_sft_overhead.py --steps 120 --rounds 3

Both sides train LoRA with TRL's SFTTrainer on the kit's tiny model, the
sample dataset's passing rows, the same steps, batch, learning rate, LoRA shape,
schedule and torch threads, each in its own fresh process. The framework side is
``wai.train(method="sft", wait=True)`` (a detached worker on the embedded
platform); its training phase is the job's ``training["train_seconds"]``:
export with the gates on, the dataset, the trainer, ``trainer.train()`` with
every step logged to the run through TrainerCallback. The bare side times the
same span in a plain script: the rows to TRL's shape, the dataset, the trainer,
``trainer.train()``. Rounds alternate the two sides; the fastest of each is
compared. Target: framework / bare <= 1.05.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import warnings

from _bare_trl import run_bare_sft  # the bare TRL baseline, no whileai in it

TARGET_RATIO = 1.05

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--alpha", type=int, default=32)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args(argv)
    os.environ["WHILEAI_HOME"] = tempfile.mkdtemp(prefix="whileai-bench-")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import whileai.simulations as wai
    from whileai.kit import load_sample
    from whileai.kit._base import tiny_model_dir
    from whileai.jobs import defaults

    threads = int(os.environ.get(defaults.JOB_CPU_THREADS_ENV) or defaults.JOB_CPU_THREADS)
    base = str(tiny_model_dir())
    rows = [r for r in load_sample() if r["passed"]]
    rows_path = os.path.join(os.environ["WHILEAI_HOME"], "rows.jsonl")
    with open(rows_path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    dataset = wai.push(rows, name="sample-passes")

    framework, bare = [], []
    for i in range(args.rounds):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            get = wai.get_run
            run = wai.train(dataset, method="sft", base_model=base, steps=args.steps, learning_rate=args.lr,
                            check="off", config={"batch_size": args.batch, "lora_rank": args.rank,
                                                 "lora_alpha": args.alpha})
        if run.wait(poll=2) != "done":
            raise RuntimeError(f"the framework's job failed: {run.error}")
        framework.append(run.training["train_seconds"])
        bare.append(run_bare_sft({"base": base, "rows": rows_path, "steps": args.steps, "per_device": args.batch,
                                  "lr": args.lr, "rank": args.rank, "alpha": args.alpha, "threads": threads})["train_seconds"])
        points = len(get(run.id)["series"])
        print(f"round {i + 1}: framework {framework[-1]:.2f} s ({points} points logged), bare TRL {bare[-1]:.2f} s",
              flush=True)
    ratio = min(framework) / min(bare)
    print(json.dumps({
        "steps": args.steps, "batch": args.batch, "rows": len(rows), "threads": threads,
        "framework_train_seconds": [round(x, 2) for x in framework],
        "bare_trl_train_seconds": [round(x, 2) for x in bare],
        "ratio_min_over_min": round(ratio, 3), "target": TARGET_RATIO,
    }, indent=1))
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
