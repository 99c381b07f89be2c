"""python -m whileai demo: a short tracked fine-tune on the embedded platform, end to end.

Pushes the passing rows of the kit's sample tool-use dataset, fine-tunes the
kit's tiny model on them for DEMO_STEPS steps with a transformers Trainer
logging through ``wai.TrainerCallback``, and prints the run and its page. No
server, no account, no downloads: everything is built in code and stored
under the data root. Runs in well under a minute on a laptop CPU.

    python -m whileai demo
    python -m whileai demo --steps 10
"""

from __future__ import annotations

import argparse
import os
import time

from whileai.simulations import defaults

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m whileai demo", description=__doc__.split("\n\n")[1])
    p.add_argument("--steps", type=int, default=defaults.DEMO_STEPS, help="optimizer steps (DEMO_STEPS)")
    p.add_argument("--seed", type=int, default=0, help="model and data-order seed")
    return p


def _examples(tokenizer, rows: list[dict]) -> list[dict]:
    examples = []
    for row in rows:
        text = tokenizer.apply_chat_template(row["messages"], tools=row.get("tools"), tokenize=False)
        encoded = tokenizer(text, truncation=True, max_length=defaults.DEMO_MAX_TOKENS)
        encoded["labels"] = list(encoded["input_ids"])
        examples.append(encoded)
    return examples


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.steps < 1:
        raise SystemExit(f"--steps {args.steps}: give at least 1 step")
    started = time.monotonic()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    import torch
    from transformers import DataCollatorForSeq2Seq, PrinterCallback, Trainer, TrainingArguments

    import whileai.simulations as wai
    from whileai.kit import build_tokenizer, load_sample, tiny_model

    # One thread: at this size a second one gains little, and on a busy machine two OpenMP
    # threads spin against each other (measured: 1.4 CPU-s per step against 0.2 with one).
    torch.set_num_threads(1)
    passing = [row for row in load_sample() if row.get("passed")][: defaults.DEMO_ROWS]
    dataset = wai.push(passing, name="sample-tooluse-passes")
    tokenizer = build_tokenizer(seed=args.seed)
    model = tiny_model(tokenizer, seed=args.seed, **defaults.DEMO_MODEL_SHAPE)
    config = {
        "model": {"builder": "whileai.kit.tiny_model", **defaults.DEMO_MODEL_SHAPE},
        "rows": len(passing),
        "max_steps": args.steps,
        "batch_size": defaults.DEMO_BATCH_SIZE,
        "learning_rate": defaults.DEMO_LEARNING_RATE,
        "seed": args.seed,
        "command": "python -m whileai demo" + (f" --steps {args.steps}" if args.steps != defaults.DEMO_STEPS else ""),
    }
    training_args = TrainingArguments(
        output_dir=_scratch(),
        max_steps=args.steps,
        per_device_train_batch_size=defaults.DEMO_BATCH_SIZE,
        learning_rate=defaults.DEMO_LEARNING_RATE,
        logging_steps=max(1, args.steps // 10),
        seed=args.seed,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    with wai.training_run(dataset=dataset, config=config, name="demo") as run:
        run.note(parameters=sum(p.numel() for p in model.parameters()))
        trainer = Trainer(
            model=model,
            args=training_args,
            train_dataset=_examples(tokenizer, passing),
            data_collator=DataCollatorForSeq2Seq(tokenizer, padding=True),
        )
        trainer.remove_callback(PrinterCallback)  # the run page has the curve; the console gets one line
        trainer.add_callback(wai.TrainerCallback(run))
        print(f"training the kit's tiny model on {len(passing)} passing rows of {dataset.id} for {args.steps} steps...")
        trainer.train()
    print(run, flush=True)
    print(f"page: {run.url}  ({time.monotonic() - started:.0f} s)", flush=True)
    return 0 if run.status == "done" else 1


def _scratch() -> str:
    """Where the Trainer may write (it saves nothing here, but wants a directory)."""
    from whileai.core.paths import data_root

    path = data_root() / "demo"
    path.mkdir(parents=True, exist_ok=True)
    return str(path)
