"""The hosted GRPO job's time per optimizer step against a bare TRL GRPOTrainer script, in the same run.

    python benchmarks/grpo_step.py                      # 12 steps, 3 rounds
    python benchmarks/grpo_step.py --steps 20 --rounds 2

Both sides train LoRA with TRL's GRPOTrainer on the kit's tiny model, the same
prompts (the sample's train-side tasks with a pass and a fail, one prompt per
task, tools listed), the same steps, generations, prompts per optimizer step
(TRAIN_GRPO_PROMPTS_PER_STEP in micro-batches of TRAIN_GRPO_PROMPTS_PER_MICROBATCH),
completion cap, temperature, beta, loss, learning rate, LoRA shape, schedule and
torch threads, each in its own fresh process. The framework side is
``wai.train(method="grpo")`` (a detached worker on the embedded platform, the
HackMonitor off, every step logged to the run with the group watch's
``sampled_pass_rate`` / ``mixed_groups``); its span is the job's
``training["train_seconds"]``: the prompts, the dataset, the trainer and
``trainer.train()``. The bare side times the same span in a plain script with a
plain reward (the parsed reply's first call against the gold call). Per side,
seconds per optimizer step is the time between the first step's log and the
last one's over the steps between (the framework's from its run's points, which
are stamped at each log; the bare side's from a callback stamping the same
moment), so set-up and the first step's warm-up are not counted; the span over
the steps, set-up included, is printed beside it. Rounds alternate the sides and
the fastest of each is compared. Target: framework / bare <= 1.05 between steps.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import textwrap

from _step_timing import alternate, run_bare  # the rounds and the steady state, shared with episode_step.py

TARGET_RATIO = 1.05

_BARE = textwrap.dedent("""
    import json, time
    import torch
    torch.set_num_threads({threads})
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen3_template

    prompts = [json.loads(line) for line in open({rows_path!r})]
    model = AutoModelForCausalLM.from_pretrained({base!r})
    tok = AutoTokenizer.from_pretrained({base!r})
    tok.response_template = qwen3_template
    start = time.perf_counter()

    class Tool(dict):  # a schema the chat template renders as is, with the name TRL calls it by
        def __init__(self, schema):
            super().__init__(schema)
            self.__name__ = schema["function"]["name"]

        def __call__(self, **kwargs):
            return "not executed"

    tools = [schema for schema in prompts[0]["tools"]]
    dataset = Dataset.from_list([{{"prompt": p["prompt"], "gold": p["gold"]}} for p in prompts])

    def reward(prompts, completions, gold, **_):
        out = []
        for completion, want in zip(completions, gold):
            want = json.loads(want)
            message = completion[-1] if isinstance(completion, list) and completion else {{}}
            calls = message.get("tool_calls") or []
            got = calls[0]["function"] if calls else None
            if "answer" in want:
                out.append(float(not calls and (message.get("content") or "").strip() == want["answer"]))
            else:
                out.append(float(got is not None and got.get("name") == want["name"]
                                 and got.get("arguments") == want["arguments"]))
        return out

    args = GRPOConfig(output_dir={out!r}, max_steps={steps}, per_device_train_batch_size={micro_batch},
                      gradient_accumulation_steps={accumulation}, num_generations={generations},
                      max_completion_length={max_len}, temperature={temperature}, beta={beta}, loss_type="bnpo",
                      mask_truncated_completions=True, epsilon_high=0.28, scale_rewards="group",
                      max_tool_calling_iterations=0, log_completions=False,
                      learning_rate={lr}, lr_scheduler_type="constant_with_warmup", warmup_steps=0.05,
                      logging_steps=1, save_strategy="no", report_to=[], disable_tqdm=True, use_cpu=True,
                      bf16=False, activation_checkpointing=False, seed=0, dataloader_num_workers=0)
    lora = LoraConfig(r={rank}, lora_alpha={alpha}, lora_dropout=0.0, target_modules="all-linear",
                      task_type="CAUSAL_LM")
    from transformers import TrainerCallback

    step_ts = []

    class StepTimes(TrainerCallback):  # the wall time of each step's log, as the framework's run stamps its points
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                step_ts.append(time.time())

    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=args, train_dataset=dataset,
                          processing_class=tok, peft_config=lora, tools=[Tool(t) for t in tools],
                          callbacks=[StepTimes()])
    trainer.train()
    print(json.dumps({{"train_seconds": time.perf_counter() - start, "steps": trainer.state.global_step,
                      "step_ts": step_ts}}))
""")


def _bare(base: str, rows_path: str, settings: dict, threads: int) -> dict:
    with tempfile.TemporaryDirectory() as out:
        return run_bare(_BARE.format(base=base, rows_path=rows_path, out=out, threads=threads, **settings))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--generations", type=int, default=4)
    p.add_argument("--max-len", type=int, default=32)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--beta", type=float, default=0.04)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    os.environ["WHILEAI_HOME"] = tempfile.mkdtemp(prefix="whileai-bench-")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import whileai.simulations as wai
    from whileai.jobs import defaults as job_defaults
    from whileai.jobs.grpo import mixed_prompts
    from whileai.kit import load_sample
    from whileai.kit._base import tiny_model_dir
    from whileai.core import defaults as core_defaults

    threads = int(os.environ.get(job_defaults.JOB_CPU_THREADS_ENV) or job_defaults.JOB_CPU_THREADS)
    base = str(tiny_model_dir())
    rows = load_sample()
    data = wai.push(rows, name="sample")
    train_side, _held = wai.datasets.cut(data)
    train_rows = wai.datasets.load_rows(train_side)
    prompts = mixed_prompts(train_rows, True)
    rows_path = os.path.join(os.environ["WHILEAI_HOME"], "prompts.jsonl")
    with open(rows_path, "w") as f:  # the sample's tasks share one tool list
        for prompt in prompts:
            f.write(json.dumps({**prompt, "tools": train_rows[0]["tools"]}) + "\n")
    per_step = core_defaults.TRAIN_GRPO_PROMPTS_PER_STEP
    micro = min(per_step, core_defaults.TRAIN_GRPO_PROMPTS_PER_MICROBATCH)
    settings = {"steps": args.steps, "generations": args.generations, "max_len": args.max_len,
                "temperature": args.temperature, "beta": args.beta, "lr": args.lr,
                "micro_batch": args.generations * micro, "accumulation": per_step // micro,
                "rank": core_defaults.TRAIN_LORA_R, "alpha": core_defaults.TRAIN_LORA_ALPHA}

    timings = alternate(
        args.rounds, args.steps,
        start_run=lambda: wai.train(train_side, method="grpo", base_model=base, steps=args.steps,
                                    generations=args.generations, max_completion_length=args.max_len,
                                    temperature=args.temperature, beta=args.beta, learning_rate=args.lr,
                                    check="off", config={"monitor": False}),
        bare=lambda: _bare(base, rows_path, settings, threads))
    print(json.dumps({
        "steps": args.steps, "prompts": len(prompts), "prompts_per_step": per_step, "threads": threads,
        "settings": settings, "model": "the kit's tiny model (kit._base.tiny_model_dir)",
        **timings.figures(TARGET_RATIO),
    }, indent=1))
    return 0 if timings.ratio() <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
