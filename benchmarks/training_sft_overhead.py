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
import subprocess
import sys
import tempfile
import textwrap
import warnings

TARGET_RATIO = 1.05

_BARE = textwrap.dedent("""
    import json, sys, time
    import torch
    torch.set_num_threads({threads})
    from datasets import Dataset, Features, Json, List, Value
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    rows = [json.loads(line) for line in open({rows_path!r})]
    model = AutoModelForCausalLM.from_pretrained({base!r})
    tok = AutoTokenizer.from_pretrained({base!r})
    start = time.perf_counter()
    data = []
    for r in rows:
        messages = []
        for m in r["messages"]:
            m = dict(m)
            if m.get("tool_calls"):
                m["tool_calls"] = [{{**c, "function": {{**c["function"], "arguments": json.loads(c["function"]["arguments"])}}}}
                                   for c in m["tool_calls"]]
            messages.append(m)
        data.append({{"messages": messages, "tools": r["tools"]}})
    features = Features({{"messages": List(Json()), "tools": List(Json())}})
    dataset = Dataset.from_dict({{"messages": [d["messages"] for d in data], "tools": [d["tools"] for d in data]}},
                                features=features)
    args = SFTConfig(output_dir={out!r}, max_steps={steps}, per_device_train_batch_size={batch},
                     learning_rate={lr}, lr_scheduler_type="constant_with_warmup", warmup_steps=0.05,
                     logging_steps=1, save_strategy="no", report_to=[], disable_tqdm=True, use_cpu=True,
                     bf16=False, activation_checkpointing=False, assistant_only_loss=True,
                     max_length=min(2048, model.config.max_position_embeddings), packing=False, seed=0,
                     dataloader_num_workers=0)
    lora = LoraConfig(r={rank}, lora_alpha={alpha}, lora_dropout=0.0, target_modules="all-linear",
                      task_type="CAUSAL_LM")
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tok, peft_config=lora)
    trainer.train()
    print(json.dumps({{"train_seconds": time.perf_counter() - start, "steps": trainer.state.global_step}}))
""")


def _bare(base: str, rows_path: str, steps: int, batch: int, lr: float, rank: int, alpha: int, threads: int) -> float:
    with tempfile.TemporaryDirectory() as out:
        code = _BARE.format(base=base, rows_path=rows_path, out=out, steps=steps, batch=batch, lr=lr, rank=rank,
                            alpha=alpha, threads=threads)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if done.returncode != 0:
        raise RuntimeError(f"the bare TRL script failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["train_seconds"]


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
        bare.append(_bare(base, rows_path, args.steps, args.batch, args.lr, args.rank, args.alpha, threads))
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
