"""``python -m whileai export RUN_ID --merged DIR [--gguf FILE]`` on a run the runner trained.

One run of the main recipe on the kit's tiny random base (a few steps, about ten seconds) is
exported; plain ``transformers`` loads the merged folder (no PEFT, no whileai) and must give the
logits and the greedy reply of the base with the adapter on it, which differ from the bare base's.
The GGUF file is read back with the ``gguf`` package's own reader (no llama.cpp here).
"""

from __future__ import annotations

import json

import pytest

from _runner_helpers import runs_file, tiny_base, whileai


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    token = "export-" + tmp_path_factory.mktemp("t").name[-6:]
    done = whileai("run", "recipe=sft_tooluse", "dataset.tasks=24", "holdout_rows=4", "steps=6",
                   f"base_model={tiny_base()}", "--json", token=token)
    closing = json.loads(done.stdout.strip().splitlines()[-1])
    run_id = closing["run"]
    assert run_id and runs_file(token)["runs"][-1]["id"] == run_id, done.stderr[-2000:]
    return run_id


def _prompt(tokenizer) -> list[int]:
    messages = [{"role": "system", "content": "Call a tool when the request needs one."},
                {"role": "user", "content": "Tell me the current time in Tokyo."}]
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]


def test_the_merged_folder_loads_in_plain_transformers_and_replies_as_the_adapter_does(trained, tmp_path):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import whileai.simulations as wai

    out = tmp_path / "merged"
    done = whileai("export", trained, "--merged", str(out))
    assert done.returncode == 0, done.stderr
    assert f"merged     {out}" in done.stdout
    assert "--tool-call-parser hermes" in done.stdout and "tool calls hermes format" in done.stdout
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"} <= names
    assert not list(tmp_path.glob(".merged.partial-*")), "no partial folder is left behind"

    merged = AutoModelForCausalLM.from_pretrained(str(out)).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    assert tokenizer.chat_template, "the chat template travels with the model"
    summary = wai.get_run(trained)["summary"]
    base = AutoModelForCausalLM.from_pretrained(tiny_base()).eval()
    bare = AutoModelForCausalLM.from_pretrained(tiny_base()).eval()
    adapted = PeftModel.from_pretrained(base, summary["adapter"]).eval()
    ids = torch.tensor([_prompt(tokenizer)])
    with torch.no_grad():
        got, want, plain = merged(ids).logits, adapted(ids).logits, bare(ids).logits
    gap = (got - want).abs().max().item()
    moved = (want - plain).abs().max().item()
    assert gap < 1e-4 and moved > 100 * gap, (gap, moved)  # the merge carries the adapter, not just the base
    kwargs = {"max_new_tokens": 24, "do_sample": False, "pad_token_id": tokenizer.pad_token_id}
    with torch.no_grad():
        reply = merged.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
        expected = adapted.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **kwargs)
    assert reply.tolist() == expected.tolist()


def test_export_never_writes_into_a_folder_that_holds_something(trained, tmp_path):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    gguf_file = tmp_path / "model.gguf"
    gguf_file.write_text("mine too")
    done = whileai("export", trained, "--merged", str(out), "--gguf", str(gguf_file))
    assert done.returncode == 2 and done.stdout == ""
    assert "2 problem(s); nothing was written" in done.stderr
    assert "exists and is not empty; export never writes into it" in done.stderr
    assert "exists; export never overwrites a file" in done.stderr
    assert [p.name for p in out.iterdir()] == ["notes.txt"] and gguf_file.read_text() == "mine too"
    missing = whileai("export", "run_00000000deadbeef", "--merged", str(tmp_path / "new"))
    assert missing.returncode == 2 and "no run 'run_00000000deadbeef'" in missing.stderr
    assert not (tmp_path / "new").exists()


def test_the_gguf_file_holds_the_merged_weights_in_llama_cpp_layout(trained, tmp_path):
    gguf = pytest.importorskip("gguf")
    import numpy as np
    from safetensors.numpy import load_file

    from whileai.runner._gguf import permute_qk

    out, target = tmp_path / "merged", tmp_path / "model.gguf"
    done = whileai("export", trained, "--merged", str(out), "--gguf", str(target))
    assert done.returncode == 0, done.stderr
    reader = gguf.GGUFReader(str(target))
    weights = load_file(str(out / "model.safetensors"))
    config = json.loads((out / "config.json").read_text())
    tensors = {t.name: t for t in reader.tensors}
    assert len(tensors) == len(weights)

    def field(name):
        f = reader.fields[name]
        return f.parts[f.data[0]]

    assert bytes(field("general.architecture")).decode() == "llama"
    assert int(field("llama.block_count")[0]) == config["num_hidden_layers"]
    assert len(reader.fields["tokenizer.ggml.tokens"].data) == config["vocab_size"]
    assert "tokenizer.chat_template" in reader.fields
    embed = np.asarray(tensors["token_embd.weight"].data).reshape(weights["model.embed_tokens.weight"].shape)
    assert np.array_equal(embed, weights["model.embed_tokens.weight"])
    q = np.asarray(tensors["blk.0.attn_q.weight"].data).reshape(weights["model.layers.0.self_attn.q_proj.weight"].shape)
    assert np.array_equal(q, permute_qk(weights["model.layers.0.self_attn.q_proj.weight"], config["num_attention_heads"]))


def test_without_the_gguf_package_the_export_is_refused_naming_it(monkeypatch):
    import importlib.util

    from whileai.runner import _gguf

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real(name, *a))
    said = _gguf.gguf_missing()
    assert said is not None and "pip install 'whileai[gguf]'" in said and "gguf package" in said
