"""The bare TRL baseline the SFT benchmarks measure whileai against: plain transformers + PEFT + TRL, no whileai.

    python benchmarks/_bare_sft.py SETTINGS.json          # one process
    torchrun --standalone --nproc-per-node 2 benchmarks/_bare_sft.py SETTINGS.json

SETTINGS holds base, rows (a JSONL of OpenAI-wire rows, arguments as JSON text or objects), out, steps,
per_device, lr, rank, alpha, threads, and optionally template (a chat template file for the tokenizer). It
trains LoRA with SFTTrainer at the settings whileai's SFT job uses and prints, on rank 0, one JSON line:
train_seconds (set-up and training), steps, and step_times (each optimizer step's end, for a steady state).
"""

import json
import os
import sys
import time


def main(path: str) -> None:
    s = json.load(open(path))
    import torch

    torch.set_num_threads(s["threads"])
    from datasets import Dataset, Features, Json, List
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import SFTConfig, SFTTrainer

    rows = [json.loads(line) for line in open(s["rows"])]
    model = AutoModelForCausalLM.from_pretrained(s["base"])
    tok = AutoTokenizer.from_pretrained(s["base"])
    if s.get("template"):
        tok.chat_template = open(s["template"]).read()
    start = time.perf_counter()
    messages = []
    for r in rows:
        turns = []
        for m in r["messages"]:
            m = dict(m)
            if m.get("tool_calls"):
                m["tool_calls"] = [{**c, "function": {**c["function"], "arguments": (
                    c["function"]["arguments"] if isinstance(c["function"]["arguments"], dict)
                    else json.loads(c["function"]["arguments"]))}} for c in m["tool_calls"]]
            turns.append(m)
        messages.append(turns)
    dataset = Dataset.from_dict({"messages": messages, "tools": [r["tools"] for r in rows]},
                                features=Features({"messages": List(Json()), "tools": List(Json())}))
    several = int(os.environ.get("WORLD_SIZE", "1")) > 1
    args = SFTConfig(output_dir=s["out"], max_steps=s["steps"], per_device_train_batch_size=s["per_device"],
                     learning_rate=s["lr"], lr_scheduler_type="constant_with_warmup", warmup_steps=0.05,
                     logging_steps=1, save_strategy="no", report_to=[], disable_tqdm=True, use_cpu=True,
                     bf16=False, activation_checkpointing=False, assistant_only_loss=True,
                     max_length=min(2048, model.config.max_position_embeddings), packing=False, seed=0,
                     dataloader_num_workers=0,
                     **({"ddp_backend": "gloo", "ddp_find_unused_parameters": False} if several else {}))
    lora = LoraConfig(r=s["rank"], lora_alpha=s["alpha"], lora_dropout=0.0, target_modules="all-linear",
                      task_type="CAUSAL_LM")

    class Clock(TrainerCallback):
        at: list = []

        def on_step_end(self, args, state, control, **kwargs):
            self.at.append(time.time())

    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tok, peft_config=lora,
                         callbacks=[Clock()])
    trainer.train()
    if os.environ.get("RANK", "0") == "0":
        tokens = [e["num_tokens"] for e in trainer.state.log_history if "num_tokens" in e and "loss" in e]
        print(json.dumps({"train_seconds": time.perf_counter() - start, "steps": trainer.state.global_step,
                          "step_times": Clock.at, "step_tokens": tokens}))


if __name__ == "__main__":
    main(sys.argv[1])
