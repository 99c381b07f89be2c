"""Exported rows against the real consumers: TRL's SFTTrainer and DPOTrainer on the kit's tiny model.

The masked tokens of a multi-turn tool-use row are checked one by one, and the
OpenAI preference shape is shown to be unusable by TRL under both hash seeds
that decide what TRL's ``is_conversational`` looks at.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import textwrap

import pytest

import whileai.simulations as wai
from whileai.domain.export import to_hf_dataset

pytestmark = pytest.mark.slow

SYSTEM = "You are a weather agent."
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather.", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "convert", "parameters": {
        "type": "object", "properties": {"value": {"type": "number"}}}}},
]
TINY = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2)


def rollout(i: int, passed: bool = True) -> dict:
    city = ["Paris", "Lima", "Oslo"][i % 3]
    answer = f"It is {60 + i} °F in {city}." if passed else f"No idea about {city}."
    return {
        "messages": [
            {"role": "user", "content": f"Weather in {city}, in fahrenheit?"},
            {"role": "assistant", "content": "<think>look it up</think>",
             "tool_calls": [{"id": "call_0", "type": "function", "function": {
                 "name": "get_weather", "arguments": json.dumps({"city": city, "unit": "celsius"})}}]},
            {"role": "tool", "tool_call_id": "call_0", "content": json.dumps({"temp": 15 + i})},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
                "name": "convert", "arguments": {"value": 15 + i}}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": str(60 + i)},
            {"role": "assistant", "content": answer},
        ],
        "reward": float(passed),
        "passed": passed,
        "task_id": f"weather-{i}",
        "privileged": "the forecast feed says it will snow",
    }


@pytest.fixture(scope="module")
def tokenizer():
    from whileai.kit import build_tokenizer

    return build_tokenizer()


@pytest.fixture(scope="module")
def data() -> wai.SimulationData:
    return wai.SimulationData([rollout(i) for i in range(6)], system_prompt=SYSTEM, tools=TOOLS, name="weather")


def tiny(tokenizer):
    import torch

    from whileai.kit import tiny_model

    torch.set_num_threads(2)
    return tiny_model(tokenizer, **TINY)


def trainer_args(kind: str, tmp_path, **extra):
    import trl

    config = {"sft": trl.SFTConfig, "dpo": trl.DPOConfig}[kind]
    return config(output_dir=str(tmp_path / kind), max_steps=2, per_device_train_batch_size=2, learning_rate=1e-3,
                  logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True,
                  dataloader_num_workers=0, **extra)


def assistant_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of each assistant turn's body, end-of-turn token included (what should train)."""
    header = "<|im_start|>assistant\n"
    return [(m.end(), text.index("<|im_end|>", m.end()) + len("<|im_end|>")) for m in re.finditer(re.escape(header), text)]


def test_sft_trains_on_exactly_the_assistant_turns(tmp_path, tokenizer, data):
    import datasets
    import trl

    report = wai.export_dataset(data, tmp_path / "sft.jsonl", format="trl")
    assert report["trl_shape"] == "messages"
    dataset = datasets.load_dataset("json", data_files=report["output"], split="train",
                                    cache_dir=str(tmp_path / "cache"))
    trainer = trl.SFTTrainer(model=tiny(tokenizer), args=trainer_args("sft", tmp_path, assistant_only_loss=True),
                             train_dataset=dataset, processing_class=tokenizer)

    row = json.loads((tmp_path / "sft.jsonl").read_text().splitlines()[0])
    text = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    example = trainer.train_dataset[0]
    assert example["input_ids"] == encoded["input_ids"]
    spans = assistant_spans(text)
    assert len(spans) == 3
    expected = [any(a <= start and end <= b for a, b in spans) for start, end in encoded["offset_mapping"]]
    trained = [label != -100 for label in example["labels"]]
    assert trained == expected  # token by token
    assert [label for label in example["labels"] if label != -100] == [
        token for token, keep in zip(example["input_ids"], expected) if keep]
    # and what trains is the three agent turns, read off the rows rather than the template
    assert tokenizer.decode([t for t, keep in zip(example["input_ids"], trained) if keep]) == (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}</tool_call><|im_end|>'
        '<tool_call>{"name": "convert", "arguments": {"value": 15}}</tool_call><|im_end|>'
        "It is 60 °F in Paris.<|im_end|>"
    )
    # the tools and the system prompt reach the prompt; the tool output does not train
    assert "Tools:\n- get_weather(city: string, unit: string)" in text and SYSTEM in text
    assert '{"temp": 15}' in text and '{"temp": 15}' not in tokenizer.decode(
        [t for t, keep in zip(example["input_ids"], trained) if keep])

    result = trainer.train()
    assert trainer.state.global_step == 2 and math.isfinite(result.training_loss)


def test_sft_unrolled_rows_train_only_their_last_turn(tmp_path, tokenizer):
    import trl

    row = rollout(0)
    row["messages"][3]["tool_calls"][0]["function"]["arguments"] = {"value": 0.30000000000000004}  # 17 digits
    data = wai.SimulationData([row], system_prompt=SYSTEM, tools=TOOLS)
    rows = wai.to_trl(wai.training_rows(data, unroll=True))
    assert len(rows) == 3 and all(set(r) >= {"prompt", "completion", "prompt_text", "unroll"} for r in rows)
    # to_hf_dataset: the two calls' argument dicts have different keys and a float datasets' Json would round
    trainer = trl.SFTTrainer(model=tiny(tokenizer), args=trainer_args("sft", tmp_path, assistant_only_loss=True),
                             train_dataset=to_hf_dataset(rows), processing_class=tokenizer)
    expected = [
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}</tool_call><|im_end|>',
        '<tool_call>{"name": "convert", "arguments": {"value": 0.30000000000000004}}</tool_call><|im_end|>',
        "It is 60 °F in Paris.<|im_end|>",
    ]
    for k in range(3):
        example = trainer.train_dataset[k]
        assert tokenizer.decode([t for t in example["labels"] if t != -100]) == expected[k]
    trainer.train()
    assert trainer.state.global_step == 2


def preference_pairs() -> list[dict]:
    pairs = []
    for i in range(4):
        rejected = rollout(i, passed=False)
        rejected["messages"][1]["tool_calls"][0]["function"]["arguments"] = json.dumps({"city": "Rome"})
        pairs.append({"chosen": rollout(i), "rejected": rejected, "winner": "chosen"})
    pairs.append({"chosen": rollout(9), "rejected": rollout(9), "winner": "tie"})
    return pairs


def test_dpo_trains_on_trl_preference_rows(tmp_path, tokenizer):
    import trl
    from trl.data_utils import maybe_apply_chat_template

    report = wai.export_preference(preference_pairs(), tmp_path / "dpo.jsonl", format="trl",
                                   system_prompt=SYSTEM, tools=TOOLS)
    assert report["ties_dropped"] == 1 and report["pairs_out"] == 4
    rows = [json.loads(line) for line in (tmp_path / "dpo.jsonl").read_text().splitlines()]
    for row in rows:
        rendered = maybe_apply_chat_template(row, tokenizer, tools=row["tools"])
        assert rendered["prompt"].endswith("<|im_start|>assistant\n") and "Tools:" in rendered["prompt"]
        assert rendered["chosen"].startswith("<tool_call>") and rendered["rejected"].startswith("<tool_call>")
        assert '"arguments": {"city": "Rome"}' in rendered["rejected"]
    trainer = trl.DPOTrainer(model=tiny(tokenizer), ref_model=tiny(tokenizer), args=trainer_args("dpo", tmp_path),
                             train_dataset=to_hf_dataset(rows), processing_class=tokenizer)
    result = trainer.train()
    assert trainer.state.global_step == 2 and math.isfinite(result.training_loss)


# TRL's is_conversational pops one key from the set of the row's keys; which one
# depends on the string hash seed. Seed 0 pops a conversational side and
# apply_chat_template indexes the prompt string; seed 1 pops "prompt" and the
# row passes through untouched, as plain text. Pinned here, found by trying seeds.
_HASH_SEEDS = {"0": "TypeError", "1": "plain text"}

_PROBE = textwrap.dedent(
    """
    import json, sys
    from trl.data_utils import maybe_apply_chat_template
    example = json.loads(open(sys.argv[1]).readline())
    supported = ["prompt", "chosen", "rejected", "completion", "messages"]
    popped = {key for key in example if key in supported}.pop()  # what TRL's is_conversational looks at
    try:
        out = maybe_apply_chat_template(example, None)  # both outcomes come before the tokenizer is used
    except TypeError as err:
        print(json.dumps({"popped": popped, "outcome": "TypeError", "error": str(err)}))
    else:
        print(json.dumps({"popped": popped, "outcome": "plain text" if out is example else "rendered"}))
    """
)


def test_openai_preference_shape_is_not_usable_by_trl(tmp_path):
    wai.export_preference(preference_pairs(), tmp_path / "openai.jsonl", system_prompt=SYSTEM, tools=TOOLS)
    row = json.loads((tmp_path / "openai.jsonl").read_text().splitlines()[0])
    assert isinstance(row["prompt"], str) and isinstance(row["chosen"], list)
    probe = tmp_path / "probe.py"
    probe.write_text(_PROBE)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    procs = {
        seed: subprocess.Popen([sys.executable, str(probe), str(tmp_path / "openai.jsonl")],
                               env={**env, "PYTHONHASHSEED": seed}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        for seed in _HASH_SEEDS
    }
    results = {}
    for seed, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        results[seed] = json.loads(out.strip().splitlines()[-1])
    assert results["0"]["popped"] != "prompt" and results["0"]["outcome"] == "TypeError"
    assert "string indices must be integers" in results["0"]["error"]
    assert results["1"]["popped"] == "prompt" and results["1"]["outcome"] == "plain text"
