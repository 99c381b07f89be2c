"""The hosted episode-GRPO job's time per optimizer step against a bare TRL script using environment_factory.

    python benchmarks/episode_step.py                       # 8 steps, 3 rounds
    python benchmarks/episode_step.py --steps 12 --rounds 2

Both sides train LoRA with TRL's GRPOTrainer(environment_factory=...) in the kit environment (KitEnvironment,
whileai/domain/episodes/kit.py), each in its own fresh process, on the same model, the same prompts (one per
training episode of EPISODE_TASKS kit tasks: the framework's own cut and prompt list, written to a file), the
same steps, generations, prompts per optimizer step (TRAIN_GRPO_PROMPTS_PER_STEP in micro-batches of
TRAIN_GRPO_PROMPTS_PER_MICROBATCH), turn cap (EPISODE_MAX_TURNS, TRL's max_tool_calling_iterations),
completion cap, temperature, beta, loss, learning rate, LoRA shape, schedule, seed and torch threads. The model
is the kit's demo base after WARM_STEPS of the framework's SFT on the training episodes, merged into one folder
before the rounds, so the rollouts are episodes of several calls and tool answers (the demo base's own calls do
not parse, so its rollouts end after one turn; ``--warm-steps 0`` times those).

The framework side is ``wai.train(method="grpo", environment="kit")`` (a detached worker on the embedded
platform, every step logged to the run with the group watch's figures, the episode judge its one reward); its
span is the job's ``training["train_seconds"]``. The bare side times the same span in a plain script whose one
reward reads the environment's state: the accounts against the task's gold calls replayed on a fresh bank, and
the final reply saying what the task asks (the kit's own ``get_reward`` hidden, as the framework hides it), so
both sides sample the same episodes step by step. Seconds per optimizer step are read between the first step's
log and the last one's, rounds alternate the sides and the fastest of each is compared (``_step_timing``,
shared with grpo_step.py). Target: framework / bare <= 1.05 between steps. The figure last measured:
benchmarks/MEASURED.md#episode-grpo-step.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import textwrap
import warnings
from pathlib import Path

from _step_timing import alternate, run_bare  # the rounds and the steady state, shared with grpo_step.py

TARGET_RATIO = 1.05
#: kit tasks drawn (kit_tasks, EPISODE_KIT_SEED) and cut as the runner cuts them: 50 training episodes at the
#: default hold-out, six steps' worth of prompts
EPISODE_TASKS = 60
#: SFT steps on the training episodes (KIT_SFT_LR, KIT_SFT_BATCH) before the rounds: at 100 the sampled
#: rollouts make between two and three tool calls each, most of them answered with a tool's error
WARM_STEPS = 100
#: held-out episodes each framework job plays before and after training: the fewest it takes; that measure lies
#: outside both timed spans and is not read here
HOLDOUT_ROWS = 1

_BARE = textwrap.dedent("""
    import json, re, time
    import torch
    torch.set_num_threads({threads})
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen3_template

    from whileai.domain.episodes.kit import KitEnvironment, KitTask  # the environment under test

    prompts = [json.loads(line) for line in open({rows_path!r})]
    model = AutoModelForCausalLM.from_pretrained({base!r})
    tok = AutoTokenizer.from_pretrained({base!r})
    tok.response_template = qwen3_template
    start = time.perf_counter()

    class Bank(KitEnvironment):  # the reward below is the only one: TRL would add get_reward beside it
        get_reward = None

    dataset = Dataset.from_list([{{"prompt": p["prompt"], "kit_task": p["kit_task"]}} for p in prompts])

    def reward(completions, environments, kit_task, **_):
        out = []
        for completion, bank, text in zip(completions, environments, kit_task):
            task = KitTask.read(text)
            gold = KitEnvironment()
            gold.reset(kit_task=task)
            for call in task.gold:
                getattr(gold, call["name"])(**call["arguments"])
            replies = [m for m in completion if m["role"] == "assistant"]
            reply = (replies[-1].get("content") or "") if replies else ""
            said = all(re.search(rf"(?<![\\w.]){{re.escape(r)}}(?![\\w]|\\.\\d)", reply, re.IGNORECASE)
                       for r in task.responses)
            out.append(float((bank.balances, bank.closed) == (gold.balances, gold.closed) and said))
        return out

    args = GRPOConfig(output_dir={out!r}, max_steps={steps}, per_device_train_batch_size={micro_batch},
                      gradient_accumulation_steps={accumulation}, num_generations={generations},
                      max_completion_length={max_len}, temperature={temperature}, beta={beta}, loss_type="bnpo",
                      mask_truncated_completions=True, epsilon_high=0.28, scale_rewards="group",
                      max_tool_calling_iterations={max_turns}, log_completions=False,
                      learning_rate={lr}, lr_scheduler_type="constant_with_warmup", warmup_steps=0.05,
                      logging_steps=1, save_strategy="no", report_to=[], disable_tqdm=True, use_cpu=True,
                      bf16=False, activation_checkpointing=False, seed=0, dataloader_num_workers=0)
    lora = LoraConfig(r={rank}, lora_alpha={alpha}, lora_dropout=0.0, target_modules="all-linear",
                      task_type="CAUSAL_LM")
    step_ts = []

    class StepTimes(TrainerCallback):  # the wall time of each step's log, as the framework's run stamps its points
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                step_ts.append(time.time())

    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=args, train_dataset=dataset,
                          processing_class=tok, peft_config=lora, environment_factory=Bank,
                          callbacks=[StepTimes()])
    trainer.train()
    print(json.dumps({{"train_seconds": time.perf_counter() - start, "steps": trainer.state.global_step,
                      "step_ts": step_ts}}))
""")


def _bare(base: str, rows_path: str, settings: dict, threads: int) -> dict:
    with tempfile.TemporaryDirectory() as out:
        return run_bare(_BARE.format(base=base, rows_path=rows_path, out=out, threads=threads, **settings))


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--generations", type=int, default=4)
    p.add_argument("--max-len", type=int, default=256)  # agent_tooluse's: a four-call episode's turns and answers
    p.add_argument("--temperature", type=float, default=0.3)  # agent_tooluse's
    p.add_argument("--beta", type=float, default=0.04)
    p.add_argument("--lr", type=float, default=2e-4)  # agent_tooluse's
    p.add_argument("--warm-steps", type=int, default=WARM_STEPS)
    p.add_argument("--rounds", type=int, default=3)
    return p.parse_args(argv)


def _episodes(base: str, max_len: int) -> tuple[object, list[dict]]:
    """The train side of EPISODE_TASKS kit tasks' gold episodes, pushed and cut as the runner cuts them, and the
    prompts the framework's job trains on (its own prompt list and context filter)."""
    import whileai.simulations as wai
    from whileai.domain.episodes import KitEnvironment, kit_episode_rows, kit_tasks, tool_methods
    from whileai.jobs._episodes import _fitting, episode_prompts
    from whileai.jobs._loading import max_length
    from whileai.kit import load_base

    rows = kit_episode_rows(kit_tasks(EPISODE_TASKS))
    cut = wai.datasets.cut_rows(rows, None, None, "episodes")
    model, tokenizer = load_base(base)
    every = episode_prompts(cut.train_rows)
    tools = tool_methods(KitEnvironment())  # one environment: every prompt is shown the same tools
    prompts, _ = _fitting(tokenizer, every, [tools] * len(every), max_length(model, episodes=True), max_len)
    return cut.train, prompts


def _warmed(train_side: object, base: str, steps: int) -> str:
    """The model both sides start from: ``base`` after ``steps`` of the framework's SFT on the training episodes,
    the adapter merged into a folder of the data root (``python -m whileai export --merged``); ``base`` at 0."""
    if steps == 0:
        return base
    import whileai.simulations as wai
    from whileai.kit import defaults as kit_defaults
    from whileai.runner.export_model import export_main

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(train_side, method="sft", base_model=base, environment="kit", steps=steps,
                        learning_rate=kit_defaults.KIT_SFT_LR, batch_size=kit_defaults.KIT_SFT_BATCH,
                        holdout_rows=HOLDOUT_ROWS, wait=True)
    if run.status != "done":
        raise RuntimeError(f"the warm-up SFT job failed: {run.error}")
    folder = Path(os.environ["WHILEAI_HOME"]) / "sft-merged"
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries the rounds and the figures alone
        if export_main([run.id, "--merged", str(folder)]) != 0:
            raise RuntimeError(f"merging the warm-up run {run.id}'s adapter into {base} failed (its stderr says why)")
    return str(folder)


def _settings(args: argparse.Namespace, prompts: int) -> dict:
    """The bare script's settings: the job's batch shape (``_grpo_batch.batch_shape`` on one process), turn cap and
    LoRA shape."""
    from whileai.core import defaults as core_defaults
    from whileai.domain import defaults as domain_defaults

    per_step = min(core_defaults.TRAIN_GRPO_PROMPTS_PER_STEP, prompts)
    micro = min(per_step, core_defaults.TRAIN_GRPO_PROMPTS_PER_MICROBATCH)
    return {"steps": args.steps, "generations": args.generations, "max_len": args.max_len,
            "temperature": args.temperature, "beta": args.beta, "lr": args.lr,
            "max_turns": domain_defaults.EPISODE_MAX_TURNS, "prompts_per_step": per_step,
            "micro_batch": args.generations * micro, "accumulation": per_step // micro,
            "rank": core_defaults.TRAIN_LORA_R, "alpha": core_defaults.TRAIN_LORA_ALPHA}


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    os.environ["WHILEAI_HOME"] = tempfile.mkdtemp(prefix="whileai-bench-")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import whileai.simulations as wai
    from whileai.jobs import defaults as job_defaults
    from whileai.kit import demo_base

    threads = int(os.environ.get(job_defaults.JOB_CPU_THREADS_ENV) or job_defaults.JOB_CPU_THREADS)
    train_side, prompts = _episodes(str(demo_base()), args.max_len)
    base = _warmed(train_side, str(demo_base()), args.warm_steps)
    rows_path = os.path.join(os.environ["WHILEAI_HOME"], "prompts.jsonl")
    with open(rows_path, "w") as f:
        f.writelines(json.dumps(prompt) + "\n" for prompt in prompts)
    settings = _settings(args, len(prompts))
    timings = alternate(
        args.rounds, args.steps,
        start_run=lambda: wai.train(train_side, method="grpo", base_model=base, environment="kit",
                                    prompt_source="gold", steps=args.steps, generations=args.generations,
                                    max_completion_length=args.max_len, temperature=args.temperature,
                                    beta=args.beta, learning_rate=args.lr, holdout_rows=HOLDOUT_ROWS, check="off",
                                    config={"monitor": False}),
        bare=lambda: _bare(base, rows_path, settings, threads))
    print(json.dumps({
        "steps": args.steps, "prompts": len(prompts), "prompts_per_step": settings["prompts_per_step"],
        "threads": threads, "settings": settings, "environment": "kit",
        "model": f"the kit's demo base (kit._base.demo_base) after {args.warm_steps} SFT steps on the episodes",
        **timings.figures(TARGET_RATIO),
    }, indent=1))
    return 0 if timings.ratio() <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
