"""A base whose chat template drops tools: exports and the reward model's held-out pairs carry the hermes convention.

Such a base trains on whileai's hermes convention. An export names the base,
and beside the rows it writes the template the job renders with and a manifest
naming the convention (whileai/domain/export/_template.py); rendered with
that template, an exported row is byte for byte the text the trainer sees,
``<tools>`` block and ``<tool_call>`` calls included. A reward model on BFCL's
all-passing rows is measured on near misses of the held-out rows, scored with
the tools in that convention. The base here is the kit's tokenizer with a
ChatML template that ignores ``tools=`` (as SmolLM2-Instruct's does) and a
one-layer model of 16 dimensions: seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

#: ChatML turns, no tools: what SmolLM2-Instruct's template renders whatever ``tools=`` says.
DROPPING = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
ROW = {"messages": [
    {"role": "system", "content": "You answer with tools."},
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
], "tools": [TOOL], "passed": True, "reward": 1.0, "task_id": "t0"}
FAIL = {**ROW, "messages": [*ROW["messages"][:2], {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Bergen"}'}}]}],
    "passed": False, "reward": 0.0}


@pytest.fixture(scope="module")
def dropping_base(tmp_path_factory) -> Path:
    """A base folder (kit tokenizer, a one-layer random model) whose chat template drops tools."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from whileai.kit import build_tokenizer

    folder = tmp_path_factory.mktemp("dropping_base")
    tokenizer = build_tokenizer()
    tokenizer.chat_template = DROPPING
    tokenizer.save_pretrained(str(folder))
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=2048,
                         pad_token_id=tokenizer.pad_token_id)
    LlamaForCausalLM(config).save_pretrained(str(folder))
    return folder


def _job_tokenizer(base: Path):
    """The tokenizer as the job has it: the base's, with the run's tool convention put on it (kit.load_base)."""
    from transformers import AutoTokenizer

    from whileai.kit import use_tool_format

    tokenizer = AutoTokenizer.from_pretrained(str(base), local_files_only=True)
    use_tool_format(tokenizer, "auto")
    return tokenizer


def _with_exported_template(base: Path, template_file: str):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(base), local_files_only=True)  # the base's own, tool-dropping
    tokenizer.chat_template = Path(template_file).read_text(encoding="utf-8")
    return tokenizer


def test_a_trl_export_renders_with_its_template_as_the_trainer_saw_it(dropping_base, tmp_path):
    from whileai.simulations import export_dataset

    out = tmp_path / "sft.trl.jsonl"
    report = export_dataset([ROW], out, format="trl", base_model=str(dropping_base))
    assert report["tool_format"]["used"] == "hermes" and not report["tool_format"]["renders_tools"]
    manifest = json.loads(Path(report["manifest"]).read_text())
    assert manifest["parser"] == "hermes" and manifest["tool_format"]["used"] == "hermes"
    assert Path(report["chat_template"]).name == manifest["chat_template"] == "sft.trl.chat_template.jinja"

    row = json.loads(out.read_text().splitlines()[0])
    assert set(row) >= {"messages", "tools"}
    exported = _with_exported_template(dropping_base, report["chat_template"])
    job = _job_tokenizer(dropping_base)
    text = exported.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
    assert text == job.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
    assert '<tools>\n{"type": "function", "function": {"name": "get_weather"' in text
    assert '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>' in text
    # the base's own template, which a consumer without the exported one would use, never shows the tools
    from transformers import AutoTokenizer

    plain = AutoTokenizer.from_pretrained(str(dropping_base), local_files_only=True)
    assert "<tools>" not in plain.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)


def test_the_runners_preference_export_carries_the_template_and_an_unreadable_base_says_why(dropping_base, tmp_path):
    from whileai.core.spec import RMSpec, SFTSpec
    from whileai.runner.pipeline import _export
    from whileai.runner.schema import Export

    settings = Export(format="trl")
    path = tmp_path / "export" / "rm.trl.jsonl"
    rm = RMSpec(base_model=str(dropping_base), tool_format="auto", balance=False)  # the stage's resolved spec
    report = _export([ROW, FAIL], rm, settings, path)
    assert report["pairs_out"] == 1 and report["tool_format"]["used"] == "hermes"
    pair = json.loads(path.read_text().splitlines()[0])
    exported = _with_exported_template(dropping_base, report["chat_template"])
    for side in ("chosen", "rejected"):
        text = exported.apply_chat_template(pair["prompt"] + pair[side], tools=pair["tools"], tokenize=False)
        assert text == _job_tokenizer(dropping_base).apply_chat_template(pair["prompt"] + pair[side],
                                                                         tools=pair["tools"], tokenize=False)
        assert "<tools>" in text and "<tool_call>" in text
    assert (tmp_path / "export" / "rm.trl.manifest.json").is_file()

    missing = _export([ROW], SFTSpec(base_model=str(tmp_path / "no_such_base")), settings,
                      tmp_path / "x" / "sft.trl.jsonl")
    assert missing["rows_out"] == 1 and missing["chat_template"] is None and "no_such_base" in missing["chat_template_why"]


def test_a_reward_model_on_all_passing_bfcl_rows_is_measured_on_near_misses_in_the_hermes_convention(
        dropping_base, monkeypatch):
    import whileai.simulations as wai
    import whileai.domain.judges.reward_model as serving
    from whileai.jobs import rm
    from whileai.simulations._hosting import train_spec

    rows = list(wai.datasets.from_bfcl("tests/data/bfcl/BFCL_v4_simple_python.json",
                                       "tests/data/bfcl/possible_answer/BFCL_v4_simple_python.json"))[:12]
    resolved = train_spec("rm", {}, {"reward_span": "first_action", "near_misses": 3, "holdout_rows": 12},
                          base_model=str(dropping_base), target=None, holdout=None)
    assert not resolved.problems, resolved.problems
    model, tokenizer = rm.load(resolved.spec)
    assert tokenizer.whileai_tool_format["used"] == "hermes"
    seen: list[list[int]] = []
    scoring = serving.score_token_batches
    monkeypatch.setattr(serving, "score_token_batches", lambda m, ids, pad, size: seen.extend(ids) or scoring(m, ids, pad, size))
    result = rm.evaluate(resolved.spec, model, tokenizer, rows)
    # every held-out row passes, so the pairs are one near miss per row, judged to fail by BFCL's rule
    assert result.metric == "pair_accuracy" and 10 <= result.prompts == len(result.outcomes) <= 12
    assert result.near_misses["pairs"] == result.prompts and result.rows == 12 + result.prompts
    assert sum(v["pairs"] for v in result.by_failure.values()) == result.prompts
    texts = [tokenizer.decode(ids) for ids in seen]
    assert len(texts) == result.rows and all("<tools>" in t and "<tool_call>{" in t for t in texts)
    # the same pairs on every call: before and after score the same held-out set
    assert rm.evaluate(resolved.spec, model, tokenizer, rows).near_misses == result.near_misses


def _rendered(tokenizer, messages, tools, prompt: bool) -> str:
    return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=prompt)


@pytest.mark.slow
def test_the_merged_export_and_its_gguf_render_tools_as_the_run_trained_and_the_folder_trains_as_a_base(
        dropping_base, tmp_path):
    """A run on a template that drops tools trains in hermes; its merged folder and GGUF file carry that template,
    so a held-out prompt with tools renders exactly as the job rendered it; the merged folder, a folder of the
    user's outside every platform folder, is itself a base the embedded platform trains on."""
    import sys

    import gguf
    from transformers import AutoTokenizer

    sys.path.insert(0, str(Path(__file__).parent))
    from _runner_helpers import record, whileai

    import whileai.simulations as wai

    def run(base: Path) -> dict:
        done = whileai("run", "recipe=sft_tooluse", "quick=true", "dataset.tasks=24", f"base_model={base}", "--json",
                       env={"WHILEAI_SERVE_DIRS": ""})
        assert done.returncode == 0, done.stderr[-3000:]
        found = record(json.loads(done.stdout.strip().splitlines()[-1])["run"])
        assert found["status"] == "done", found.get("error")
        return found

    trained = run(dropping_base)
    assert trained["summary"]["training"]["tool_format"]["used"] == "hermes"
    merged, gguf_file = tmp_path / "merged", tmp_path / "model.gguf"
    exported = whileai("export", trained["id"], "--merged", str(merged), "--gguf", str(gguf_file))  # gguf: test extra
    assert exported.returncode == 0, exported.stderr

    job = _job_tokenizer(dropping_base)  # what the job rendered its training text with
    held = [r for r in wai.datasets.load_rows(trained["config"]["holdout"]) if r.get("tools")]
    assert held, "the held-out rows carry tools"
    prompt = [m for m in held[0]["messages"] if m["role"] in ("system", "user")][:2]
    tools = held[0]["tools"]
    want = _rendered(job, prompt, tools, True)
    assert "<tools>" in want
    folder = AutoTokenizer.from_pretrained(str(merged), local_files_only=True)
    assert _rendered(folder, prompt, tools, True) == want
    assert _rendered(folder, ROW["messages"], ROW["tools"], False) == _rendered(job, ROW["messages"], ROW["tools"], False)
    field = gguf.GGUFReader(str(gguf_file)).fields["tokenizer.chat_template"]
    from_gguf = AutoTokenizer.from_pretrained(str(dropping_base), local_files_only=True)
    from_gguf.chat_template = bytes(field.parts[field.data[0]]).decode()  # what llama.cpp and Ollama render with
    assert _rendered(from_gguf, prompt, tools, True) == want

    again = run(merged)  # the export is a base of the user's own: it trains with no operator setting
    assert again["config"]["base_model"] == str(merged)
    from whileai.domain.client import get_client

    # and the embedded platform serves that run's adapter on it: the run's own base, the user's folder
    model = get_client().request("POST", "/models", json={"name": "own-base", "baseModel": str(merged),
                                                          "adapterRunId": again["id"]})
    assert model["name"] == "own-base"
