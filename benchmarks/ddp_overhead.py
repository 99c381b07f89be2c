"""Seconds per optimizer step of the framework's two-process SFT job against a bare torchrun + TRL script, and one
process against two, all in the same run.

    python benchmarks/ddp_overhead.py                  # 30 steps, effective batch 8, 2 rounds
    python benchmarks/ddp_overhead.py --steps 60 --rounds 3

Every side trains LoRA with TRL's SFTTrainer on the kit's tiny model and the sample dataset's passing rows, at
the same effective batch, steps, learning rate, LoRA shape, schedule and torch threads. The framework sides are
``wai.train(method="sft", config={"processes": 2})`` (torchrun over two worker ranks, gloo, rank 0 writing the
run) and the same with one process; their steps are timed by the points rank 0 logs as each step ends. The bare
side is a plain script under ``torchrun --nproc-per-node 2`` with the per-device batch the framework computes,
its steps timed by a callback on rank 0. Seconds per step are the steady state (first step's end to the last's,
over the steps between), so loading and set-up count on neither side. Rounds alternate the sides; the fastest of
each is compared.

Target: framework two-process / bare two-process <= 1.05. One against two processes is reported as measured:
two processes on a two-core machine share the cores with everything else, so they are not expected to halve a
step's time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import warnings

from _bare_trl import per_step, run_bare_sft, run_step_times  # the bare TRL baseline, no whileai in it

TARGET_RATIO = 1.05

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=8, help="the effective batch (divided across the processes)")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--alpha", type=int, default=32)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args(argv)
    os.environ["WHILEAI_HOME"] = tempfile.mkdtemp(prefix="whileai-bench-")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

    import whileai.simulations as wai
    from whileai.jobs import defaults
    from whileai.kit import load_sample
    from whileai.kit._base import tiny_model_dir

    threads = int(os.environ.get(defaults.JOB_CPU_THREADS_ENV) or defaults.JOB_CPU_THREADS)
    base = str(tiny_model_dir())
    rows = [r for r in load_sample() if r["passed"]]
    rows_path = os.path.join(os.environ["WHILEAI_HOME"], "rows.jsonl")
    with open(rows_path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    dataset = wai.push(rows, name="sample-passes")

    def framework(processes: int) -> float:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = wai.train(dataset, method="sft", base_model=base, steps=args.steps, learning_rate=args.lr,
                            check="off", config={"batch_size": args.batch, "lora_rank": args.rank,
                                                 "lora_alpha": args.alpha, "processes": processes})
        if run.wait(poll=2) != "done":
            raise RuntimeError(f"the framework's {processes}-process job failed: {run.error}")
        return per_step(run_step_times(run.id))

    settings = {"base": base, "steps": args.steps, "per_device": args.batch // 2, "lr": args.lr, "rank": args.rank,
                "alpha": args.alpha}
    two, bare, one = [], [], []
    for i in range(args.rounds):
        two.append(framework(2))
        bare.append(per_step(run_bare_sft({**settings, "rows": rows_path, "threads": threads}, processes=2)["step_times"]))
        one.append(framework(1))
        print(f"round {i + 1}: s/step framework 2 processes {two[-1]:.3f}, bare torchrun 2 processes {bare[-1]:.3f}, "
              f"framework 1 process {one[-1]:.3f}", flush=True)
    ratio = min(two) / min(bare)
    print(json.dumps({
        "steps": args.steps, "effective_batch": args.batch, "rows": len(rows), "threads_per_process": threads,
        "cores": os.cpu_count(),
        "framework_two_s_per_step": [round(x, 4) for x in two],
        "bare_torchrun_two_s_per_step": [round(x, 4) for x in bare],
        "framework_one_s_per_step": [round(x, 4) for x in one],
        "ratio_framework_over_bare": round(ratio, 3), "target": TARGET_RATIO,
        "two_over_one_processes": round(min(two) / min(one), 3),
    }, indent=1))
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
