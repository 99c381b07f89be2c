"""The model kit: tokenizer, chat template, tiny model, tool-call parser, sample task."""

from __future__ import annotations

import json

import pytest

from whileai import kit
from whileai.kit import build_tokenizer, parse_tool_calls, tiny_model
from whileai.domain.judges.judging import judge_reply
from whileai.domain.rows.rollouts import prompt_messages

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                "required": ["city", "unit"],
            },
        },
    },
    # a bare function schema (no {"type": "function"} wrapper) renders the same way
    {"name": "set_timer", "description": "Start a timer.",
     "parameters": {"type": "object", "properties": {"minutes": {"type": "integer"}}}},
]

CONVERSATION = [
    {"role": "system", "content": "You are a helpful agent."},
    {"role": "user", "content": "Weather in Paris in celsius?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_0", "type": "function",
         "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
    {"role": "tool", "tool_call_id": "call_0", "content": '{"temp": 18}'},
    {"role": "assistant", "content": "It is 18 degrees in Paris."},
    {"role": "user", "content": "And set a timer for 5 minutes."},
    {"role": "assistant", "content": "Sure.", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "set_timer", "arguments": '{"minutes": 5}'}}]},
]


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def test_tokenizer_is_deterministic_for_a_seed(tok):
    from whileai.kit import _tokenizer
    from whileai.kit import defaults

    # training itself (not the per-process cache) gives the same tokenizer twice
    assert _tokenizer._train(0, defaults.KIT_VOCAB_SIZE).to_str() == _tokenizer._train(0, defaults.KIT_VOCAB_SIZE).to_str()
    again = build_tokenizer()
    assert again.get_vocab() == tok.get_vocab()
    text = tok.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False)
    assert again(text)["input_ids"] == tok(text)["input_ids"]


def test_special_tokens(tok):
    assert tok.eos_token == "<|im_end|>"
    assert tok.pad_token and tok.bos_token and tok.pad_token_id != tok.eos_token_id
    for t in ("<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>",
              "</tool_response>", "<think>", "</think>"):
        assert len(tok(t)["input_ids"]) == 1, t
    # the call markup survives decoding with skip_special_tokens (the parser needs it)
    ids = tok("<tool_call>{}</tool_call><|im_end|>")["input_ids"]
    assert tok.decode(ids, skip_special_tokens=True) == "<tool_call>{}</tool_call>"


def test_city_unit_number_are_one_token_in_the_ask_and_in_the_call(tok):
    text = tok.apply_chat_template(CONVERSATION[:3], tools=TOOLS, tokenize=False)
    ids = tok(text)["input_ids"]
    for word in ("Paris", "celsius", "5", "get_weather"):
        (wid,) = tok(word)["input_ids"]
        assert ids.count(wid) >= 2 or word == "5", word
    ask = tok("Convert 120 km to miles")["input_ids"]
    call = tok('{"amount": 120, "from_unit": "km", "to_unit": "miles"}')["input_ids"]
    for word in ("120", "km", "miles"):
        (wid,) = tok(word)["input_ids"]
        assert wid in ask and wid in call, word


def test_template_renders_every_role_tools_and_calls(tok):
    text = tok.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False)
    assert text.startswith("<|im_start|>system\nYou are a helpful agent.\n\nTools:\n")
    assert "- get_weather(city: string, unit: string) - Current weather for a city.\n" in text
    assert "- set_timer(minutes: integer) - Start a timer.<|im_end|>" in text
    assert '"properties"' not in text  # compact, not the JSON schema
    assert "<|im_start|>user\nWeather in Paris in celsius?<|im_end|>\n" in text
    assert ('<|im_start|>assistant\n<tool_call>{"name": "get_weather", "arguments": '
            '{"city": "Paris", "unit": "celsius"}}</tool_call><|im_end|>\n') in text
    assert '<|im_start|>tool\n<tool_response>{"temp": 18}</tool_response><|im_end|>\n' in text
    # arguments given as a JSON string render the same as a dict
    assert 'Sure.\n<tool_call>{"name": "set_timer", "arguments": {"minutes": 5}}</tool_call>' in text
    prompt = tok.apply_chat_template(CONVERSATION[:2], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>user\nWeather in Paris in celsius?<|im_end|>\n<|im_start|>assistant\n")
    no_system = tok.apply_chat_template(CONVERSATION[1:2], tools=TOOLS, tokenize=False)
    assert no_system.startswith("<|im_start|>system\nTools:\n- get_weather")


def test_generation_mask_covers_exactly_the_assistant_turns(tok):
    out = tok.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=True, return_dict=True,
                                  return_assistant_tokens_mask=True)
    ids, mask = out["input_ids"], out["assistant_masks"]
    expected = []
    for m in CONVERSATION:
        if m["role"] == "assistant":
            expected.append(tok.apply_chat_template([m], tokenize=False)
                            .removeprefix("<|im_start|>assistant\n").removesuffix("\n"))
    spans, cur = [], []
    for i, k in zip(ids, mask):
        if k:
            cur.append(i)
        elif cur:
            spans.append(cur)
            cur = []
    if cur:
        spans.append(cur)
    assert [tok.decode(s) for s in spans] == expected
    assert all(s[-1] == tok.eos_token_id for s in spans)


def test_tiny_model_is_deterministic_and_sized_by_defaults(tok):
    import torch

    from whileai.kit import defaults

    a, b = tiny_model(tok, seed=3), tiny_model(tok, seed=3)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    c = tiny_model(tok, seed=4)
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)
    assert a.config.model_type == "llama"
    assert a.config.hidden_size == defaults.KIT_HIDDEN_SIZE
    assert a.config.num_hidden_layers == defaults.KIT_LAYERS
    assert a.config.vocab_size == len(tok)
    assert a.generation_config.eos_token_id == tok.eos_token_id
    assert tiny_model(tok, num_hidden_layers=1).config.num_hidden_layers == 1
    with pytest.raises(TypeError, match="hiden_size"):
        tiny_model(tok, hiden_size=3)


def test_save_and_reload_keep_ids_template_and_weights(tok, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = tiny_model(tok)
    tok.save_pretrained(tmp_path)
    model.save_pretrained(tmp_path)
    tok2 = AutoTokenizer.from_pretrained(tmp_path)
    model2 = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert tok2.chat_template == tok.chat_template
    assert tok2.get_vocab() == tok.get_vocab()
    for kw in ({}, {"add_generation_prompt": True}):
        a = tok.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False, **kw)
        b = tok2.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False, **kw)
        assert a == b and tok(a)["input_ids"] == tok2(b)["input_ids"]
    assert (tok2.eos_token, tok2.pad_token, tok2.bos_token) == (tok.eos_token, tok.pad_token, tok.bos_token)
    ids = torch.tensor([tok("Weather in Paris?")["input_ids"]])
    assert torch.equal(model(ids).logits, model2(ids).logits)


def test_parse_tool_calls_round_trips_rendered_calls(tok):
    text = tok.apply_chat_template(CONVERSATION[-1:], tokenize=False)
    body = text.removeprefix("<|im_start|>assistant\n")
    content, calls = parse_tool_calls(body)
    assert content == "Sure."
    assert calls == [{"id": "call_0", "type": "function",
                      "function": {"name": "set_timer", "arguments": '{"minutes": 5}'}}]
    body = tok.apply_chat_template(CONVERSATION[2:3], tokenize=False).removeprefix("<|im_start|>assistant\n")
    content, calls = parse_tool_calls(body)
    assert content is None
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Paris", "unit": "celsius"}
    two = kit.format_tool_call("a", {"x": [1, 2]}) + "\n" + kit.format_tool_call("b", "{}")
    content, calls = parse_tool_calls(two)
    assert content is None and [c["id"] for c in calls] == ["call_0", "call_1"]
    assert [c["function"]["name"] for c in calls] == ["a", "b"]


@pytest.mark.parametrize("junk", [
    "", "plain answer", "<tool_call>", "<tool_call>{not json</tool_call>", "<tool_call>[1, 2]</tool_call>",
    '<tool_call>{"arguments": {}}</tool_call>', '<tool_call>{"name": 3}</tool_call>',
    '<tool_call>{"name": "a", "arguments": [1]}</tool_call>', "</tool_call><tool_call><tool_call>",
    "\x00\udcff", "<tool_call>" + "[" * 5000 + "</tool_call>",
])
def test_parse_tool_calls_survives_junk(junk):
    content, calls = parse_tool_calls(junk)
    assert calls == []
    assert content == (junk.strip() or None)


def test_parse_tool_calls_keeps_good_calls_beside_junk():
    text = 'Let me check. <tool_call>{oops}</tool_call> <tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call><|im_end|>'
    content, calls = parse_tool_calls(text)
    assert content == "Let me check. <tool_call>{oops}</tool_call>"
    assert calls[0]["function"] == {"name": "f", "arguments": '{"a": 1}'}
    assert parse_tool_calls(None) == (None, [])


# ---------------------------------------------------------------------------
# the sample task and the shipped dataset
# ---------------------------------------------------------------------------


def _groups(rows):
    groups = {}
    for r in rows:
        groups.setdefault(r["task_id"], []).append(r)
    return groups


def test_sample_file_is_valid_rows_with_mixed_groups():

    rows = kit.load_sample()
    assert len(rows) >= 800
    groups = _groups(rows)
    mixed = [g for g in groups.values() if len({r["passed"] for r in g}) == 2]
    assert len(mixed) >= 0.6 * len(groups)
    for task_id, group in groups.items():
        assert sorted(r["rollout_index"] for r in group) == list(range(len(group)))
        assert len({json.dumps(prompt_messages(r)) for r in group}) == 1, task_id
    for r in rows:
        assert isinstance(r["reward"], float) and 0.0 <= r["reward"] <= 1.0
        assert r["passed"] == (r["reward"] == 1.0)
        assert r["sampling"] == {"temperature": r["sampling"]["temperature"]}
        assert {"proxy_reward", "difficulty"} <= set(r["markers"])
        assert isinstance(r["privileged"], dict) and all(isinstance(v, str) for v in r["privileged"].values())
        assert ("answer" in r["gold"]) != ("name" in r["gold"])
        roles = [m["role"] for m in r["messages"]]
        assert roles[:3] == ["system", "user", "assistant"]
        first = r["messages"][2]
        if first.get("tool_calls"):
            assert roles[3:] == ["tool", "assistant"]
            call = first["tool_calls"][0]
            assert r["messages"][3]["tool_call_id"] == call["id"]
            assert isinstance(json.loads(call["function"]["arguments"]), dict)
        else:
            assert roles == ["system", "user", "assistant"]
        # the passed flag agrees with the first-action check on the rendered reply
        rendered = _render_first_action(first)
        assert judge_reply(rendered, r)["passed"] == r["passed"]


def _render_first_action(message):
    if message.get("tool_calls"):
        fn = message["tool_calls"][0]["function"]
        return kit.format_tool_call(fn["name"], fn["arguments"])
    return message["content"]


def test_sample_has_each_failure_kind_and_answer_tasks():
    rows = kit.load_sample()
    failures = {r["markers"]["failure"] for r in rows}
    assert {"none", "wrong_tool", "wrong_argument", "missing_argument", "no_tool"} <= failures
    assert any("answer" in r["gold"] for r in rows)
    assert {r["messages"][1]["content"].split()[0] for r in rows if r["task_id"].startswith("weather")} >= {"Weather", "Tell"}


def test_sample_generator_is_deterministic_and_matches_the_shipped_file(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    from whileai.kit import sample_task

    assert sample_task.generate(n_tasks=20, seed=3) == sample_task.generate(n_tasks=20, seed=3)
    assert sample_task.generate(n_tasks=20, seed=3) != sample_task.generate(n_tasks=20, seed=4)
    script = Path(__file__).resolve().parent.parent / "scripts" / "make_sample.py"
    # a different hash seed must not change a byte (no str hash in the generator)
    env = {**__import__("os").environ, "PYTHONHASHSEED": "123"}
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr


def test_split_tasks_never_splits_a_task():
    from whileai.kit import sample_task

    rows = sample_task.generate(n_tasks=50)
    train, held = sample_task.split_tasks(rows)
    assert {r["task_id"] for r in train}.isdisjoint({r["task_id"] for r in held})
    assert len(train) + len(held) == len(rows)
    assert len({r["task_id"] for r in held}) == 10
    with pytest.raises(ValueError, match="holdout=1.5"):
        sample_task.split_tasks(rows, holdout=1.5)


# ---------------------------------------------------------------------------
# caching, the demo base and base resolution (tiny recipes only: no real pre-training here)
# ---------------------------------------------------------------------------


def test_build_once_builds_once_across_concurrent_callers(home):
    import threading
    import time

    from whileai.kit import _base

    calls = []

    def build(tmp):
        calls.append(1)
        time.sleep(0.3)
        (tmp / "config.json").write_text("{}")
        return {"ok": True}

    results = []
    threads = [threading.Thread(target=lambda: results.append(_base._build_once("x", build))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(set(results)) == 1
    assert (results[0] / "config.json").exists() and (results[0] / _base._DONE).exists()
    assert not [p for p in (home / "models").iterdir() if p.name.startswith(".x-")]


def test_a_failed_build_leaves_nothing_behind(home):
    from whileai.kit import _base

    def build(tmp):
        (tmp / "half").write_text("x")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        _base._build_once("y", build)
    assert [p.name for p in (home / "models").iterdir() if not p.name.endswith(".lock")] == []


def test_demo_base_is_cached_and_loads(home, monkeypatch):
    from whileai.kit import _base
    from whileai.kit import defaults

    monkeypatch.setattr(defaults, "KIT_BASE_STEPS", 2)
    monkeypatch.setattr(defaults, "KIT_BASE_EXAMPLES", 8)
    path = kit.demo_base()
    assert path.parent == home / "models"
    info = json.loads((path / _base._DONE).read_text())
    assert info["pretraining"]["steps"] == 2 and info["name"] == kit.KIT_BASE_NAME
    assert kit.demo_base() == path
    model, tok = kit.load_base(kit.KIT_BASE_NAME)
    assert model.config.model_type == "llama" and tok.chat_template == build_tokenizer().chat_template
    model2, _ = kit.load_base(str(path))
    assert model2.config.to_dict() == model.config.to_dict()
    # a different recipe is a different directory, never a stale one
    monkeypatch.setattr(defaults, "KIT_BASE_STEPS", 3)
    assert kit.demo_base() != path


def test_the_base_has_the_same_weights_whatever_threads_the_builder_runs(home, monkeypatch, tmp_path):
    """A job builds the base on one thread and a script on two; before KIT_BASE_THREADS the two differed."""
    import torch
    from safetensors.torch import load_file

    from whileai.kit import defaults

    monkeypatch.setattr(defaults, "KIT_BASE_STEPS", 20)
    monkeypatch.setattr(defaults, "KIT_BASE_EXAMPLES", 64)
    threads = torch.get_num_threads()
    built = []
    try:
        for n, root in ((2, tmp_path / "two"), (1, tmp_path / "one")):
            monkeypatch.setenv("WHILEAI_HOME", str(root))
            torch.set_num_threads(n)
            path = kit.demo_base()
            assert torch.get_num_threads() == n, "the build gives the process its thread count back"
            assert json.loads((path / "whileai_kit.json").read_text())["pretraining"]["threads"] == \
                defaults.KIT_BASE_THREADS
            built.append(load_file(str(path / "model.safetensors")))
    finally:
        torch.set_num_threads(threads)
    assert built[0].keys() == built[1].keys()
    assert all(torch.equal(built[0][k], built[1][k]) for k in built[0])


def test_tiny_model_dir_and_load_base_errors(home):
    from whileai.kit._base import tiny_model_dir

    path = tiny_model_dir()
    assert tiny_model_dir() == path
    model, tok = kit.load_base(path)
    assert len(tok) == model.config.vocab_size
    with pytest.raises(FileNotFoundError, match="nothing can be downloaded"):
        kit.load_base("some-org/not-cached-model")
    with pytest.raises(FileNotFoundError, match="not a model directory"):
        kit.load_base(str(home))


def test_pretraining_data_is_deterministic_and_never_the_sample_task():
    from whileai.kit import sample_task
    from whileai.kit._pretrain import pretrain_conversations

    convs = pretrain_conversations(300, seed=1)
    assert convs == pretrain_conversations(300, seed=1)
    names = {t["function"]["name"] for c in convs for t in c["tools"] or []}
    called = {call["function"]["name"] for c in convs for m in c["messages"] for call in m.get("tool_calls") or []}
    assert names and called <= names
    # The task's tool names are written on purpose (KIT_BASE_TASK_NAME_SHARE): their tokens need trained
    # embeddings for LoRA to reach them; the task's own requests never appear (below).
    assert names & {t["function"]["name"] for t in sample_task.TOOLS}
    asks = {c["messages"][-1]["content"] for c in convs} | {m["content"] for c in convs for m in c["messages"]
                                                             if m["role"] == "user"}
    assert not asks & {r["messages"][1]["content"] for r in kit.load_sample()}
