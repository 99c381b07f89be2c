"""A played episode exported for TRL: its shape, and the tokens TRL 1.16's SFTTrainer trains on the kit's template.

The row is a real episode on the kit's bank (three rounds of calls, the first refused with a tool error, then the
answer), recorded as the run's summary records it (whileai.domain.episodes.record: OpenAI-wire messages, tool
messages with ``tool_call_id`` and ``name``). Exported with ``format="trl"`` it must be TRL's tool-calling
conversation (assistant ``tool_calls`` with dict arguments, the tool messages whole); under each mask mode and
unrolled, the labels TRL builds (and its collator keeps) train exactly the assistant turns that should train,
every token of a tool's answer at -100.
"""

from __future__ import annotations

import json
import re

import pytest

import whileai.simulations as wai
from _episodes import MOVE_ALL
from whileai.domain.episodes import KitEnvironment, judge_episode, kit_rows, play_episode, replay, tool_schemas
from whileai.domain.episodes.record import wire_messages
from whileai.domain.export import to_hf_dataset

pytestmark = pytest.mark.slow

TASK = MOVE_ALL
SCRIPT = [
    {"role": "assistant", "content": "Reading alice first.", "tool_calls": [
        {"type": "function", "function": {"name": "get_balance", "arguments": {"account": "alic"}}}]},
    {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_balance", "arguments": {"account": "alice"}}}]},
    {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "transfer", "arguments": {"source": "alice", "target": "bob",
                                                                            "amount": 30}}}]},
    "Done: bob now holds 50.",
]
#: what each assistant turn renders to on the kit's template, end of turn included: what must train
TURNS = [
    'Reading alice first.\n<tool_call>{"name": "get_balance", "arguments": {"account": "alic"}}</tool_call><|im_end|>',
    '<tool_call>{"name": "get_balance", "arguments": {"account": "alice"}}</tool_call><|im_end|>',
    '<tool_call>{"name": "transfer", "arguments": {"source": "alice", "target": "bob", "amount": 30}}</tool_call>'
    "<|im_end|>",
    "Done: bob now holds 50.<|im_end|>",
]
TINY = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2)


@pytest.fixture(scope="module")
def episode_row() -> dict:
    row = kit_rows([TASK])[0]
    replies = iter(SCRIPT)
    episode = play_episode(lambda conversation: next(replies), KitEnvironment(), row)
    verdict = judge_episode(episode, replay(KitEnvironment, row, TASK.gold), TASK.responses)
    assert verdict.passed and episode.rounds == 3
    return {"messages": wire_messages(episode.messages), "tools": tool_schemas(KitEnvironment()), "reward": 1.0,
            "passed": True, "task_id": TASK.task_id}


@pytest.fixture(scope="module")
def tokenizer():
    from whileai.kit import build_tokenizer

    return build_tokenizer()


def _trainer(tokenizer, tmp_path, dataset):
    import torch
    import trl

    from whileai.kit import tiny_model

    torch.set_num_threads(2)
    args = trl.SFTConfig(output_dir=str(tmp_path / "sft"), max_steps=1, per_device_train_batch_size=1,
                         report_to=[], use_cpu=True, disable_tqdm=True, dataloader_num_workers=0, save_strategy="no",
                         assistant_only_loss=True)
    return trl.SFTTrainer(model=tiny_model(tokenizer, **TINY), args=args, train_dataset=dataset,
                          processing_class=tokenizer)


def _spans(text: str, opener: str) -> list[tuple[int, int]]:
    """Character spans of each turn opened by ``opener`` (its body up to and including its end of turn)."""
    return [(m.end(), text.index("<|im_end|>", m.end()) + len("<|im_end|>")) for m in re.finditer(re.escape(opener), text)]


def _check_labels(trainer, tokenizer, index: int, conversation: list[dict], tools: list[dict], trained_turns: list[int]):
    """The example's labels train exactly the assistant turns ``trained_turns`` (0-based among the conversation's), and
    the collator hands them on unchanged; every token of a tool message is -100. Returns the trained text."""
    example = trainer.train_dataset[index]
    text = tokenizer.apply_chat_template(conversation, tools=tools, tokenize=False)
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    assert example["input_ids"] == encoded["input_ids"]
    turns = _spans(text, "<|im_start|>assistant\n")
    wanted = [turns[i] for i in trained_turns]
    expected = [any(a <= start and end <= b for a, b in wanted) for start, end in encoded["offset_mapping"]]
    assert [label != -100 for label in example["labels"]] == expected  # token by token
    tool_spans = _spans(text, "<|im_start|>tool\n")
    assert len(tool_spans) == sum(m["role"] == "tool" for m in conversation) > 0
    in_tools = [i for i, (start, end) in enumerate(encoded["offset_mapping"])
                if any(a <= start < b for a, b in tool_spans)]
    assert in_tools and all(example["labels"][i] == -100 for i in in_tools)  # the environment's words never train
    batch = trainer.data_collator([example])
    assert batch["labels"][0].tolist() == example["labels"]
    return tokenizer.decode([t for t, label in zip(example["input_ids"], example["labels"]) if label != -100])


def test_an_episode_exports_as_trls_tool_calling_conversation_and_trains_only_the_agents_turns(
        tmp_path, tokenizer, episode_row):
    import datasets

    report = wai.export_dataset([episode_row], tmp_path / "episode.jsonl", format="trl")
    assert report["trl_shape"] == "messages"
    exported = json.loads((tmp_path / "episode.jsonl").read_text().splitlines()[0])
    assert set(exported) == {"messages", "tools", "prompt_text"}
    messages = exported["messages"]
    assert [m["role"] for m in messages] == ["system", "user"] + ["assistant", "tool"] * 3 + ["assistant"]
    calls = [m["tool_calls"][0] for m in messages if m.get("tool_calls")]
    assert [c["function"]["arguments"] for c in calls] == [  # TRL's shape: dicts, not JSON text
        {"account": "alic"}, {"account": "alice"}, {"source": "alice", "target": "bob", "amount": 30}]
    tools = [m for m in messages if m["role"] == "tool"]
    assert [(t["tool_call_id"], t["name"]) for t in tools] == [(c["id"], c["function"]["name"]) for c in calls]
    assert tools[0]["content"].startswith("{'error': \"no account named 'alic'")  # the refusal, as the model read it
    assert exported["tools"] == episode_row["tools"] and exported["prompt_text"] == TASK.instruction

    dataset = datasets.load_dataset("json", data_files=report["output"], split="train", cache_dir=str(tmp_path / "c"))
    trainer = _trainer(tokenizer, tmp_path, dataset)
    trained = _check_labels(trainer, tokenizer, 0, messages, exported["tools"], [0, 1, 2, 3])
    assert trained == "".join(TURNS)
    assert "no account named" not in trained and "moved 30" not in trained


def test_the_final_mask_trains_only_the_answer(tmp_path, tokenizer, episode_row):
    rows = wai.to_trl(wai.training_rows([episode_row], mask_mode="final"))
    assert len(rows) == 1 and set(rows[0]) == {"prompt", "completion", "tools", "prompt_text"}
    row = rows[0]
    assert [m["role"] for m in row["prompt"]][-2:] == ["assistant", "tool"] and row["completion"][0]["content"] == (
        "Done: bob now holds 50.")
    trainer = _trainer(tokenizer, tmp_path, to_hf_dataset(rows))
    assert _check_labels(trainer, tokenizer, 0, row["prompt"] + row["completion"], row["tools"], [3]) == TURNS[3]


def test_unrolled_each_sample_trains_its_own_turn_after_the_tool_answers_before_it(tmp_path, tokenizer, episode_row):
    rows = wai.to_trl(wai.training_rows([episode_row], unroll=True))
    assert [r["unroll"] for r in rows] == [{"turn": k, "turns": 4} for k in (1, 2, 3, 4)]
    assert [sum(m["role"] == "tool" for m in r["prompt"]) for r in rows] == [0, 1, 2, 3]
    trainer = _trainer(tokenizer, tmp_path, to_hf_dataset(rows))
    for k, row in enumerate(rows):
        conversation = row["prompt"] + row["completion"]
        if k == 0:  # no tool message before the first turn: its labels are its own turn alone
            example = trainer.train_dataset[0]
            assert tokenizer.decode([t for t in example["labels"] if t != -100]) == TURNS[0]
            continue
        assert _check_labels(trainer, tokenizer, k, conversation, row["tools"], [k]) == TURNS[k]
